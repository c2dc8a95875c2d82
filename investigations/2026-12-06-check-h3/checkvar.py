"""Compile-only CPU of variants of the after-loop check (quad64's chunk)."""
import os, sys, tempfile, time
os.environ["FIXEDOPT_CACHE"] = tempfile.mkdtemp()
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from benchmarks.first_call_cases import BUILDERS
from fixedopt._driver import after_loop, ahead
from fixedopt._driver.loop import LoopState, certify
from fixedopt._contract.status import Status
from fixedopt._numerics import cpu_compiler
import fixedopt._solvers.certify as C

captured = {}
real_start = ahead.start
def fake_start(before, compiled, *args, export=False):
    if not export:
        captured["args"] = args
        raise SystemExit  # stop the call here
ahead.start = fake_start
try:
    BUILDERS["quad64"](int(sys.argv[1]) if len(sys.argv) > 1 else 2048)["call"]()
except SystemExit:
    pass
set_up, plan, chunk = captured["args"]

def verdict_only(set_up, plan, chunk):
    inputs, claim = chunk
    objective, rows = set_up(plan, inputs)
    solver, stopping = plan.solver, inputs.stopping
    def one(row, x, value, steps, reason, doubted, initial):
        problem = objective.problem(row)
        flat = ravel_pytree(x)[0]
        start = problem.value_and_grad(problem.project(objective.start(row)))[0]
        initial = jnp.where(jnp.isnan(initial), start, initial.astype(start.dtype))
        value, grad, solver_state = solver.start(problem, flat)
        state = LoopState(flat, value, grad, problem.grad_norm(flat, grad), steps,
                          jnp.asarray(Status.CONVERGED, jnp.int32), reason,
                          jnp.asarray(jnp.inf, value.dtype), initial,
                          doubted.astype(value.dtype), solver_state, jnp.zeros((), jnp.int32))
        from fixedopt._driver.loop import objective_scale, CERTIFY_SHARE, Reason
        inputs = (state.x, state.value, state.grad, state.solver_state)
        decrement, step, _ = solver.certify(problem, *inputs)
        scale = objective_scale(state.value, state.initial_value, stopping.precision)
        allowed = CERTIFY_SHARE * stopping.precision * scale
        holds = 0.5 * decrement <= allowed
        trial_value = problem.value_and_grad(problem.project(inputs[0] + step))[0]
        gains = state.value - trial_value > allowed
        return holds & ((state.reason != Reason.PRECISION) | ~gains)
    return jax.vmap(one)(rows, *claim)

def t(f, opts):
    j = jax.jit(f, static_argnums=(0, 1), compiler_options=opts)
    c0 = time.process_time(); low = j.lower(set_up, plan, chunk); c1 = time.process_time()
    comp = low.compile(); c2 = time.process_time()
    import re
    txt = comp.as_text(); fus = len(re.findall(r" fusion\(", txt))
    return f"trace+lower {c1-c0:.2f} xla {c2-c1:.2f} fusions {fus}"

for name, f in [("full", after_loop._check_rows), ("status only", verdict_only)]:
    for on in (None, cpu_compiler.CPU_OPTIONS):
        jax.clear_caches()
        print(name, "elemental" if on else "default", t(f, on), flush=True)
