"""The cost of L-BFGS's certification of CONVERGED verdicts (``LBFGS.certify``: the
whole Hessian up to n = 16, conjugate gradients above), against the same solver
without it: wall time of whole batched solves, compiled once, interleaved (A B A B
...), median of 7; compile time (lower + compile) apart; mean steps per row.

    python -m benchmarks.certify_cost   # writes benchmarks/results/cpu-certify-cost-<date>.md
"""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks import problems

CASES = (
    ("quad", 4, 1024), ("quad", 8, 1024), ("quad", 16, 1024), ("quad", 64, 1024),
    ("quad", 512, 256), ("spectra", 10, 1024),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Uncertified(fixedopt.LBFGS):
    """L-BFGS with the default options and no certification (the ablation)."""

    certify = fixedopt.Solver.certify


SOLVERS = {"certified": fixedopt.LBFGS(), "uncertified": Uncertified()}


def measure(name: str, n: int, batch: int) -> dict:
    problem = getattr(problems, name)(batch, n)
    args = tuple(map(jnp.asarray, problem.args))
    x0, fixed = jnp.asarray(problem.x0), jnp.asarray(problem.fixed)
    solves, steps, compile_s, converged = {}, {}, {}, {}
    for label, solver in SOLVERS.items():

        def solve(x0, fixed, args, solver=solver):
            return fixedopt.minimize(problem.jax_fun, x0, fixed, args=args, batched=True,
                                     args_axes=0, solver=solver)  # fmt: skip

        start = time.perf_counter()
        solves[label] = jax.jit(solve).lower(x0, fixed, args).compile()
        compile_s[label] = time.perf_counter() - start
        solution = jax.block_until_ready(solves[label](x0, fixed, args))
        steps[label] = float(np.mean(solution.steps))
        converged[label] = float(np.mean(solution.converged))
    times: dict[str, list[float]] = {label: [] for label in SOLVERS}
    for _ in range(7):
        for label, solve in solves.items():
            start = time.perf_counter()
            jax.block_until_ready(solve(x0, fixed, args))
            times[label].append(time.perf_counter() - start)
    medians = {label: float(np.median(t)) for label, t in times.items()}
    row = {"problem": name, "n": n, "B": batch}
    for label in SOLVERS:
        row[f"{label}_ms"] = round(1e3 * medians[label], 1)
        row[f"{label}_steps"] = round(steps[label], 1)
        row[f"{label}_converged"] = round(converged[label], 3)
        row[f"{label}_compile_s"] = round(compile_s[label], 2)
    row["time ratio"] = round(medians["certified"] / medians["uncertified"], 3)
    return row


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    rows = [measure(*case) for case in CASES]
    columns = list(rows[0])
    lines = [f"# cpu-certify-cost-{datetime.date.today()}", "", __doc__.strip().split("\n\n")[0],
             "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]  # fmt: skip
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    name = f"cpu-certify-cost-{datetime.date.today()}.md"
    (pathlib.Path(__file__).parent / "results" / name).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
