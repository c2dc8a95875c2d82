"""The cost of L-BFGS's initial inverse Hessian choices (``LBFGS(scaling=...)``) on
batches whose parameters share one scale: wall time of whole batched solves, compiled
once, interleaved (A B C A B C ...), median of 7, and the mean steps per row.

    python -m benchmarks.lbfgs_scaling   # writes benchmarks/results/cpu-lbfgs-scaling-<date>.md
"""

from __future__ import annotations

import datetime
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from fixedopt import testing_problems as problems

CASES = (("quad", 4, 1024), ("quad", 8, 1024), ("quad", 16, 1024), ("spectra", 10, 1024))
SCALINGS = ("scalar", "auto", "hessian")


def measure(name: str, n: int, batch: int) -> dict:
    problem = getattr(problems, name)(batch, n)
    args = tuple(map(jnp.asarray, problem.args))
    x0, fixed = jnp.asarray(problem.x0), jnp.asarray(problem.fixed)
    solves, steps = {}, {}
    for scaling in SCALINGS:
        solver = fixedopt.LBFGS(scaling=scaling)

        def solve(x0, fixed, args, solver=solver):
            return fixedopt.minimize(problem.jax_fun, x0, fixed, args=args, batched=True,
                                     args_axes=0, solver=solver)  # fmt: skip

        solves[scaling] = jax.jit(solve)
        steps[scaling] = float(
            np.mean(jax.block_until_ready(solves[scaling](x0, fixed, args)).steps)
        )
    times: dict[str, list[float]] = {s: [] for s in SCALINGS}
    for _ in range(7):
        for scaling, solve in solves.items():
            start = time.perf_counter()
            jax.block_until_ready(solve(x0, fixed, args))
            times[scaling].append(time.perf_counter() - start)
    medians = {s: float(np.median(t)) for s, t in times.items()}
    row = {"problem": name, "n": n, "B": batch}
    for s in SCALINGS:
        row[f"{s}_ms"] = round(1e3 * medians[s], 1)
        row[f"{s}_steps"] = round(steps[s], 1)
    row.update({f"{s}/scalar": round(medians[s] / medians["scalar"], 3) for s in SCALINGS[1:]})
    return row


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    rows = [measure(*case) for case in CASES]
    columns = list(rows[0])
    lines = [f"# cpu-lbfgs-scaling-{datetime.date.today()}", "", __doc__.strip().split("\n\n")[0],
             "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]  # fmt: skip
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    out = (
        pathlib.Path(__file__).parent / "results" / f"cpu-lbfgs-scaling-{datetime.date.today()}.md"
    )
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
