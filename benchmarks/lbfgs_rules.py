"""``python -m benchmarks.lbfgs_rules [--rounds R] [--cases NAME ...]``: what two rules of
L-BFGS (2026-12-03) buy, each alone and both, against the rules before them; same
solves, one process.

- ``settle``: a model that predicts no reduction above ``f``'s rounding from the new
  point passes its test at once (``LBFGS.step``), instead of after one more step whose
  line search ran in rounding noise (up to its ``patience`` of 5 trials, and a trip of
  the lanes runs as many trials as its busiest lane).
- ``reach``: Hager–Zhang's extrapolation trusts the slope's secant up to ``expand**2``
  times the trial (not ``expand``) where ``f`` curved as the quadratic through the two
  slopes says (``fixedopt._solvers.wolfe._extrapolated``).

The rules before are restored here, while a variant traces, by patching the two
functions that carry them; each variant is traced and compiled once (caches cleared),
then the compiled solves are called in interleaved rounds (``block_until_ready``);
medians.

Writes ``benchmarks/results/<backend>-lbfgs-rules-<date>.{jsonl,md}``.
"""

from __future__ import annotations

import contextlib
import pathlib
import statistics
import time
from collections.abc import Iterator

import jax

jax.config.update("jax_enable_x64", True)  # quad runs in float64 (and float32)

import jax.numpy as jnp  # noqa: E402

import fixedopt  # noqa: E402
import fixedopt._solvers.lbfgs as lbfgs  # noqa: E402
import fixedopt._solvers.wolfe as wolfe  # noqa: E402
from benchmarks import problems  # noqa: E402
from benchmarks.timing import case_arguments, cases_to_files, environment  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
VARIANTS = ("before", "settle", "reach", "both")


def quad_case(batch: int, n: int, dtype: str = "float64"):
    """``minimize`` (defaults) on the suites' ``quad`` (tridiagonal, condition 1e3)."""
    problem = problems.quad(batch, n, dtype=dtype)

    def solve(x0, fixed, *args):
        return fixedopt.minimize(problem.jax_fun, x0, fixed, args=args, batched=True)

    floats = (problem.x0, *problem.args)
    x0, *args = (jnp.asarray(a, dtype) for a in floats)
    return solve, (x0, jnp.asarray(problem.fixed), *args)


CASES = {
    "quad n = 8, B = 1024": lambda: quad_case(1024, 8),
    "quad n = 8, B = 16384": lambda: quad_case(16384, 8),
    "quad n = 8, B = 1024, float32": lambda: quad_case(1024, 8, "float32"),
    "quad n = 32, B = 1024": lambda: quad_case(1024, 32),
    "quad n = 64, B = 1024": lambda: quad_case(1024, 64),
    "quad n = 512, B = 256": lambda: quad_case(256, 512),
}


def never_settled(predicted: jax.Array, value: jax.Array) -> jax.Array:
    """``lbfgs.measurable`` as ``LBFGS.step`` read it before: the new point's predicted
    reduction is never below rounding (``model_validated`` keeps its own test)."""
    return jnp.ones(jnp.shape(predicted), bool)


def reach_expand(low: wolfe._Point, trial: wolfe._Point, expand: float) -> jax.Array:
    """The extrapolation before: the secant's zero within ``[1.1, expand]`` times the trial."""
    secant, rise = wolfe._slope_zero(low, trial)
    bounded = jnp.clip(secant, 1.1 * trial.step, expand * trial.step)
    return jnp.where((rise > 0) & jnp.isfinite(secant), bounded, expand * trial.step)


@contextlib.contextmanager
def rules(variant: str) -> Iterator[None]:
    """The rules of ``variant`` in place while a solve traces."""
    kept = lbfgs.measurable, wolfe._extrapolated
    if variant in ("before", "reach"):
        lbfgs.measurable = never_settled
    if variant in ("before", "settle"):
        wolfe._extrapolated = reach_expand
    try:
        yield
    finally:
        lbfgs.measurable, wolfe._extrapolated = kept


def measure(name: str, rounds: int) -> dict:
    """Compile the case once per variant, then run the programs interleaved; medians."""
    solve, inputs = CASES[name]()
    programs, compile_s = {}, {}
    for variant in VARIANTS:
        jax.clear_caches()  # traced anew: the rules are read at trace time
        tic = time.perf_counter()
        with rules(variant):
            programs[variant] = jax.jit(solve).lower(*inputs).compile()
        compile_s[variant] = time.perf_counter() - tic
    answers = {v: jax.block_until_ready(p(*inputs)) for v, p in programs.items()}
    run_s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant, program in programs.items():
            tic = time.perf_counter()
            jax.block_until_ready(program(*inputs))
            run_s[variant].append(time.perf_counter() - tic)
    record: dict = {"case": name, "rounds": rounds}
    for variant in VARIANTS:
        answer = answers[variant]
        record[variant] = {"run_s": statistics.median(run_s[variant]),
                           "compile_s": compile_s[variant],
                           "steps": float(jnp.mean(answer.steps)),
                           "steps_max": int(jnp.max(answer.steps)),
                           "converged": float(jnp.mean(answer.converged)),
                           "value_mean": float(jnp.mean(answer.value))}  # fmt: skip
    return record


def markdown(records: list[dict], title: str, env: dict) -> str:
    head = ["case", *(f"{v}: run ms" for v in VARIANTS), *(f"{v}" for v in VARIANTS[1:]),
            *(f"{v}: steps" for v in VARIANTS), "converged (before / both)"]  # fmt: skip
    lines = [f"# {title}", "",
             "L-BFGS (defaults) with the rules before 2026-12-03 and with each new rule "
             "(`settle`, `reach`, `both`: the code as committed); each solve compiled once "
             f"per variant, then called in {records[0]['rounds']} interleaved rounds, "
             f"medians; backend {env['backend']} ({env['host_cpus']} CPUs), jax "
             f"{env['versions'].get('jax')}. Ratios: the time before over the time of each "
             "variant (above 1: faster). `python -m benchmarks.lbfgs_rules`.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for r in records:
        at = [r[v] for v in VARIANTS]
        cells = [r["case"], *(f"{1e3 * a['run_s']:.1f}" for a in at),
                 *(f"{at[0]['run_s'] / a['run_s']:.2f}x" for a in at[1:]),
                 *(f"{a['steps']:.2f}" for a in at),
                 f"{at[0]['converged']:.3f} / {at[-1]['converged']:.3f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> pathlib.Path:
    parser = case_arguments("lbfgs_rules", __doc__, CASES, 11, RESULTS)
    args = parser.parse_args(argv)
    env = environment() | {"suite": "lbfgs_rules"}
    cases = args.cases or list(CASES)
    measured = lambda name: measure(name, args.rounds)
    return cases_to_files(env, cases, measured, markdown, args.out, "lbfgs-rules")


if __name__ == "__main__":
    main()
