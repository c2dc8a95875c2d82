"""``python -m benchmarks.refill_cost [--rounds R] [--costs C ...] [--cases NAME ...]``:
the lanes' refill rule at other values of the solver's ``refill_cost`` (what a refill
costs, in steps of the solver: ``fixedopt.Solver.refill_cost``), same solves, one
process: the measurement behind L-BFGS's 0.25 and the least-squares solvers' 1.

The lanes refill once a share ``sqrt(2 cost / k)`` of them is idle (``k``: the steps
of the rows that stopped); a lower cost refills sooner, leaving fewer lanes idle, for
more refills. Each case is traced and compiled once per value (the rule is read at
trace time), then the compiled solves are called in interleaved rounds (``rounds``
each, ``block_until_ready``); medians. The answers are compared: a row's steps and
bits do not depend on when it gets its lane where XLA compiles the objective alike for
every row (see the lanes in the README; ``quad``'s tridiagonal form is not such an
objective at n = 8: its x then agrees to rounding, with the same steps).

Writes ``benchmarks/results/<backend>-refill-cost-<date>.{jsonl,md}``.
"""

from __future__ import annotations

import contextlib
import pathlib
import statistics
import time
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.compiler_options import fit_case, minimize_case
from benchmarks.timing import case_arguments, cases_to_files, environment

RESULTS = pathlib.Path(__file__).parent / "results"
LBFGS, LM = fixedopt.LBFGS, fixedopt.LevenbergMarquardt
CASES = {  # name: (the case's solve and inputs, its solver's class)
    "quad n = 8, B = 1024": (lambda: minimize_case("quad", 1024, 8), LBFGS),
    "quad n = 8, B = 16384": (lambda: minimize_case("quad", 16384, 8), LBFGS),
    "quad n = 32, B = 1024": (lambda: minimize_case("quad", 1024, 32), LBFGS),
    "quad n = 64, B = 1024": (lambda: minimize_case("quad", 1024, 64), LBFGS),
    "quad n = 512, B = 256": (lambda: minimize_case("quad", 256, 512), LBFGS),
    "gaussian LM, B = 1e5": (lambda: fit_case("gaussian", 10**5), LM),
    "decay LM, B = 1e4": (lambda: fit_case("decay", 10**4), LM),
}


@contextlib.contextmanager
def refill_cost(solver_class: type[fixedopt.Solver], cost: float) -> Iterator[None]:
    """``solver_class.refill_cost`` set to ``cost`` meanwhile (read when a solve traces)."""
    kept = solver_class.refill_cost
    solver_class.refill_cost = cost
    try:
        yield
    finally:
        solver_class.refill_cost = kept


def measure(name: str, costs: list[float], rounds: int) -> dict:
    """Compile the case once per cost, then run the programs interleaved; medians."""
    build, solver_class = CASES[name]
    solve, inputs = build()
    options = fixedopt.compiler_options(solver_class())  # compiled as when called alone
    programs, compile_s = {}, {}
    for cost in costs:
        jax.clear_caches()  # traced anew: the rule is read at trace time
        tic = time.perf_counter()
        with refill_cost(solver_class, cost):
            programs[cost] = jax.jit(solve, compiler_options=options).lower(*inputs).compile()
        compile_s[cost] = time.perf_counter() - tic
    answers = {cost: jax.block_until_ready(p(*inputs)) for cost, p in programs.items()}
    run_s: dict[float, list[float]] = {cost: [] for cost in costs}
    for _ in range(rounds):
        for cost, program in programs.items():
            tic = time.perf_counter()
            jax.block_until_ready(program(*inputs))
            run_s[cost].append(time.perf_counter() - tic)
    first = answers[costs[0]]
    record: dict = {"case": name, "rounds": rounds}
    for cost in costs:
        pairs = zip((first.x, first.steps), (answers[cost].x, answers[cost].steps))
        same = all(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) for a, b in pairs)
        record[str(cost)] = {"run_s": statistics.median(run_s[cost]),
                             "compile_s": compile_s[cost],
                             "steps": float(jnp.mean(answers[cost].steps)),
                             "converged": float(jnp.mean(answers[cost].converged)),
                             "same_bits": same}  # fmt: skip
    return record


def markdown(records: list[dict], costs: list[float], title: str, env: dict) -> str:
    base = str(costs[0])
    head = ["case", *(f"{c}: run ms" for c in costs), *(f"{base} / {c}" for c in costs[1:]),
            "steps", "converged", "same bits"]  # fmt: skip
    lines = [f"# {title}", "",
             f"The lanes' refill rule at a refill cost of {', '.join(map(str, costs))} steps "
             "(the solver's `refill_cost`); each "
             f"solve compiled once per value, then called in {records[0]['rounds']} "
             f"interleaved rounds, medians; backend {env['backend']} ({env['host_cpus']} "
             f"CPUs), jax {env['versions'].get('jax')}. Ratios: the time at {base} over "
             "the time at each (above 1: faster). `python -m benchmarks.refill_cost`.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for r in records:
        at = [r[str(c)] for c in costs]
        cells = [r["case"], *(f"{1e3 * a['run_s']:.1f}" for a in at),
                 *(f"{at[0]['run_s'] / a['run_s']:.2f}x" for a in at[1:]),
                 f"{at[0]['steps']:.2f}", f"{at[0]['converged']:.3f}",
                 "yes" if all(a["same_bits"] for a in at) else "no"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> pathlib.Path:
    parser = case_arguments("refill_cost", __doc__, CASES, 9, RESULTS)
    parser.add_argument("--costs", nargs="*", type=float, default=[1.0, 0.5, 0.25, 0.1])
    args = parser.parse_args(argv)
    env = environment() | {"suite": "refill_cost"}
    cases = args.cases or list(CASES)
    measured = lambda name: measure(name, args.costs, args.rounds)
    written = lambda records, title, env: markdown(records, args.costs, title, env)
    return cases_to_files(env, cases, measured, written, args.out, "refill-cost")


if __name__ == "__main__":
    main()
