"""Study (issue 63 item 11): would a progress callback that is always in the program,
under a ``lax.cond`` on a traced flag that is False by default, cost the default path?

Variants of one jitted 8-row decay fit (Gpufit's protocol), each against the default:
  loop    the lanes' report under a traced-off cond in every loop trip (jax.debug.callback)
  pure    one jax.pure_callback under a traced-off cond, outside the loop, result used
  cond    a traced-off cond without a callback, result used
  flag    the traced flag used without a cond (the control)
and a trivial program ``x + 1`` with and without such a callback. Process CPU time per
call, variants interleaved, median of 9. Run: python -m benchmarks.progress_cost
"""

import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from fixedopt._contract.status import RUNNING, busy
from fixedopt._driver import lanes, progress

_default_report = lanes._report
_flag = {}


def _report_always(layout, limit, given, state, iteration, queued, written=False):
    """The lanes' report with a traced flag instead of a static ``progress``."""
    lanes_state = layout.state.unpack(state)

    def report():
        left = limit - queued + jnp.sum(busy(lanes_state.status))
        running = lanes_state.status == RUNNING
        worst = jnp.max(jnp.where(running, lanes_state.grad_norm, 0.0), initial=0.0)
        jax.debug.callback(progress.report_text, iteration, left, limit, worst)

    jax.lax.cond(_flag["on"] & (iteration % 10 == 0) & ~written, report, lambda: None)


def _host(_):
    return np.int32(0)


def _solve_of(variant, t):
    residual = lambda p, d, t: p[0] * jnp.exp(-p[1] * t) + p[2] - d  # traced anew

    def solve(x0, fixed, data, off):
        on = off < 0  # traced, False
        _flag["on"] = on
        shift = jnp.int32(0)
        if variant == "pure":
            shape = jax.ShapeDtypeStruct((), jnp.int32)
            shift = jax.lax.cond(on, lambda: jax.pure_callback(_host, shape, off), lambda: shift)
        elif variant == "cond":
            shift = jax.lax.cond(on, lambda: jnp.sin(off * 1.0).astype(jnp.int32), lambda: shift)
        elif variant == "flag":
            shift = on.astype(jnp.int32)
        return fixedopt.least_squares(residual, x0 + shift, fixed, args=(data, t),
                                      args_axes=(0, None), batched=True, ftol=1e-4, gtol=0.0,
                                      xtol=0.0, max_steps=10)  # fmt: skip

    return solve


def compiled(variant, rows=8):
    t = jnp.linspace(0, 3, 32, dtype=jnp.float32)
    rng = np.random.default_rng(0)
    a, k, c = rng.uniform(1, 2, rows), rng.uniform(0.5, 2, rows), rng.uniform(0, 0.2, rows)
    clean = a[:, None] * np.exp(-k[:, None] * np.asarray(t)) + c[:, None]
    data = jnp.asarray(clean + 0.01 * rng.normal(size=clean.shape), jnp.float32)
    fixed = jnp.zeros((rows, 3), bool).at[:, 2].set(rng.random(rows) < 0.5)
    inputs = (jnp.ones((rows, 3), jnp.float32), fixed, data, jnp.int32(1))
    lanes._report = _report_always if variant == "loop" else _default_report
    try:
        program = jax.jit(_solve_of(variant, t)).lower(*inputs).compile()
    finally:
        lanes._report = _default_report
    hlo = program.as_text()
    counts = {"fusions": len(re.findall(r" fusion\(", hlo)),
              "conditionals": len(re.findall(r" conditional\(", hlo)),
              "custom_calls": len(re.findall(r"custom_call_target=", hlo))}  # fmt: skip
    return program, inputs, counts


def trivial(variant):
    def program(x, off):
        if variant == "pure":
            shape = jax.ShapeDtypeStruct((), jnp.int32)
            x = x + jax.lax.cond(off < 0, lambda: jax.pure_callback(_host, shape, off),
                                 lambda: jnp.int32(0))  # fmt: skip
        elif variant == "debug":
            jax.lax.cond(off < 0, lambda: jax.debug.callback(print, off), lambda: None)
        return x + 1

    inputs = (jnp.ones(8, jnp.int32), jnp.int32(1))
    return jax.jit(program).lower(*inputs).compile(), inputs, {}


def cpu_per_call(program, inputs, calls):
    start = time.process_time()
    for _ in range(calls):
        jax.block_until_ready(program(*inputs))
    return (time.process_time() - start) / calls


def compare(builds, calls, repeats=9):
    programs = {name: build() for name, build in builds.items()}
    times = {name: [] for name in programs}
    for _ in range(repeats):
        for name, (program, inputs, _) in programs.items():
            times[name].append(cpu_per_call(program, inputs, calls))
    base = statistics.median(next(iter(times.values())))
    for name, (_, _, counts) in programs.items():
        median = statistics.median(times[name])
        print(f"{name:8s} {median * 1e6:7.1f} us/call  x{median / base:.3f}  {counts}")


if __name__ == "__main__":
    print("8-row decay fit, float32, Gpufit protocol:")
    compare({v: (lambda v=v: compiled(v)) for v in ("default", "loop", "pure", "cond", "flag")},
            calls=1000)  # fmt: skip
    print("trivial program x + 1:")
    compare({v: (lambda v=v: trivial(v)) for v in ("plain", "pure", "debug")}, calls=5000)
