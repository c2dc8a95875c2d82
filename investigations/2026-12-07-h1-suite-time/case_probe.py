import sys, time, jax
import benchmarks.cases as cases, benchmarks.timing as timing, benchmarks.suites as suites
c=[0]
jax.monitoring.register_event_duration_secs_listener(lambda e,*a,**k: c.__setitem__(0,c[0]+(e=="/jax/core/compile/backend_compile_duration")))
orig=timing.first_call
def fc(call):
    t=time.process_time(); p=c[0]; r=orig(call); print("  first_call", round(time.process_time()-t,2), c[0]-p, file=sys.stderr); return r
timing.first_call=fc
origM=dict(cases.METHODS)
for k,f in origM.items():
    def wrap(problem, settings, f=f, k=k):
        t=time.process_time(); p=c[0]
        try: return f(problem, settings)
        finally: print(" make", k, problem.name, round(time.process_time()-t,2), c[0]-p, file=sys.stderr)
    cases.METHODS[k]=wrap
o2=suites.split_vs_mask
def svm(*a,**k):
    t=time.process_time(); p=c[0]; r=o2(*a,**k); print(" split_vs_mask", round(time.process_time()-t,2), c[0]-p, file=sys.stderr); return r
suites.split_vs_mask=svm
o3=cases.run_case
def rc(case,*a):
    t=time.process_time(); p=c[0]; r=o3(case,*a); print("CASE", case.problems, case.batch, case.n, round(time.process_time()-t,2), c[0]-p, file=sys.stderr); return r
suites.run_case=rc
sys.argv=[sys.argv[0]]+sys.argv[1:]
exec(open(__file__.replace("case_probe.py", "bench_profile.py")).read())
