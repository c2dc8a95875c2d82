import json, os, resource, time
import jax, pytest
_c=[0]
def _comp(e,*a,**k): _c[0]+= e=="/jax/core/compile/backend_compile_duration"
def _hit(e,*a,**k): _c[0]-= e=="/jax/compilation_cache/cache_hits"
jax.monitoring.register_event_duration_secs_listener(_comp)
jax.monitoring.register_event_listener(_hit)
def cpu():
    ch=resource.getrusage(resource.RUSAGE_CHILDREN); return time.process_time()+ch.ru_utime+ch.ru_stime
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    c,p=cpu(),_c[0]
    yield
    with open(os.environ["H1_PERTEST"],"a") as f:
        f.write(json.dumps({"id":item.nodeid,"cpu":round(cpu()-c,2),"prog":_c[0]-p})+"\n")
