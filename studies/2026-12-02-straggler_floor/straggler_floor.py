"""One slow row: the batch with it against the clean batch, and the floor that the slow
row's own steps set (issue 18's target: at most 1.2x the clean batch at every B >= 1024).

A row's steps are sequential: whatever schedules the batch, the batch with a straggler
takes at least as long as the straggler solved alone. So ``alone / clean`` is a lower
bound of ``straggler / clean`` for this solver's step count, on this machine. Cases:
``quad`` n = 32 (the ``scale`` suite's), float64, the default solver and lanes, stopped at
max |projected gradient| <= 1e-6 (the benchmarks' tolerance); the straggler is the same
batch with its last row an ill-conditioned diagonal (``benchmarks.problems.straggler``),
and ``alone`` that row as a batch of one. scipy's L-BFGS-B on that row gives its step
count for comparison (the same tolerance, ``lb == ub`` on its fixed entries). Two
solvers: the default ``LBFGS()``, whose diagonal scaling (``scaling="auto"``) learns the
ill-conditioned diagonal, so that the row is slow no more, and ``LBFGS(scaling="scalar")``,
with which it stays a straggler (as before the diagonal scaling).

    python -m benchmarks.straggler_floor   # writes benchmarks/results/cpu-straggler-floor-DATE.md
"""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
import statistics
import sys

import jax
import numpy as np
import scipy.optimize

import fixedopt
from benchmarks import timing
from benchmarks.methods import Settings, fixedopt_call
from fixedopt.testing_problems import BatchedProblem as Problem
from fixedopt.testing_problems import quad, straggler

RESULTS = pathlib.Path(__file__).parent / "results"
SIZES = (1024, 4096, 16384)
N = 32
ROUNDS = 5
SOLVERS = {"LBFGS()": fixedopt.LBFGS(), 'LBFGS(scaling="scalar")': fixedopt.LBFGS(scaling="scalar")}


def last_row(problem: Problem) -> Problem:
    """The problem's last row, as a batch of one."""
    args = tuple(a[-1:] for a in problem.args)
    return dataclasses.replace(problem, x0=problem.x0[-1:], fixed=problem.fixed[-1:], args=args)


def program(problem: Problem, solver: fixedopt.LBFGS):
    """The batched ``minimize`` of ``problem`` by ``solver``, compiled; a call that blocks."""
    call, inputs = fixedopt_call(problem, Settings(), solver=solver)
    compiled, _ = timing.compiled(jax.jit(call), *inputs)
    return lambda: jax.block_until_ready(compiled(*inputs))


def scipy_steps(problem: Problem) -> int:
    """scipy L-BFGS-B's iterations on the problem's one row (``lb == ub`` on fixed)."""
    x0, fixed = problem.x0[0], problem.fixed[0]
    bounds = [(v, v) if f else (None, None) for v, f in zip(x0, fixed)]
    result = scipy.optimize.minimize(
        problem.numpy_fun, x0, args=problem.row_args(0), jac=True, method="L-BFGS-B",
        bounds=bounds, options={"gtol": 1e-6, "ftol": 0.0, "maxiter": 100_000},
    )  # fmt: skip
    return int(result.nit)


def measure(batch: int, solver_name: str) -> dict:
    clean, slow = quad(batch, N), straggler(batch, N)
    alone = last_row(slow)
    solver = SOLVERS[solver_name]
    calls = {
        name: program(problem, solver)
        for name, problem in (("clean", clean), ("straggler", slow), ("alone", alone))
    }
    times, outputs = timing.interleaved(calls, ROUNDS)
    seconds = {name: statistics.median(samples) for name, samples in times.items()}
    steps = np.asarray(outputs["straggler"].steps)
    return {
        "solver": solver_name,
        "B": batch,
        **{f"{name}_s": round(value, 4) for name, value in seconds.items()},
        "straggler / clean": round(seconds["straggler"] / seconds["clean"], 2),
        "floor: alone / clean": round(seconds["alone"] / seconds["clean"], 2),
        "slow row steps": int(steps[-1]),
        "other rows mean steps": round(float(steps[:-1].mean()), 1),
        "scipy steps, slow row": scipy_steps(alone),
        "converged": float(np.mean(outputs["straggler"].converged)),
    }


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    sizes = tuple(int(b) for b in sys.argv[1:]) or SIZES
    rows = [measure(batch, solver) for solver in SOLVERS for batch in sizes]
    columns = list(rows[0])
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    table += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows]
    environment = timing.environment()
    name = f"cpu-straggler-floor-{datetime.date.today().isoformat()}"
    text = (f"# {name}\n\n{__doc__.strip()}\n\n" + "\n".join(table) + "\n\nTimes: median of "
            f"{ROUNDS} calls, interleaved, compile apart; {environment['host_cpus']} CPUs, "
            f"jax {environment['versions'].get('jax')}.\n")  # fmt: skip
    (RESULTS / f"{name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
