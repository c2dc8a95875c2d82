"""The cost of L-BFGS's certification of CONVERGED verdicts (``LBFGS.certify``: the
whole Hessian up to n = 16, conjugate gradients above), against the same solver
without it: wall time of whole batched solves, compiled once, interleaved (A B A B
...), median of 7; compile time (lower + compile) apart; mean steps per row.

    python -m benchmarks.certify_cost   # writes benchmarks/results/cpu-certify-cost-<date>.md
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from fixedopt import testing_problems as problems

CASES = (
    ("quad", 4, 1024), ("quad", 8, 1024), ("quad", 16, 1024), ("quad", 64, 1024),
    ("quad", 512, 256), ("spectra", 10, 1024),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Uncertified(fixedopt.LBFGS):
    """L-BFGS with the default options and no certification (the ablation)."""

    certify = fixedopt.Solver.certify


def patched(module, name: str, value):
    """A context factory: ``module.name`` is ``value`` within (for tracing an ablation)."""

    @contextlib.contextmanager
    def context():
        old = getattr(module, name)
        setattr(module, name, value)
        try:
            yield
        finally:
            setattr(module, name, old)

    return context


SOLVERS = {"certified": fixedopt.LBFGS(), "uncertified": Uncertified()}


def measure(
    name: str,
    n: int,
    batch: int,
    solvers: dict = SOLVERS,
    contexts: dict | None = None,
    repeats: int = 7,
) -> dict:
    """One case: ``solvers`` (label: solver; the time ratio is the first's over the
    second's), each traced inside ``contexts[label]()`` where given; median of
    ``repeats`` interleaved calls."""
    problem = getattr(problems, name)(batch, n)
    args = tuple(map(jnp.asarray, problem.args))
    x0, fixed = jnp.asarray(problem.x0), jnp.asarray(problem.fixed)
    solves, steps, compile_s, converged = {}, {}, {}, {}
    for label, solver in solvers.items():

        def solve(x0, fixed, args, solver=solver):
            return fixedopt.minimize(problem.jax_fun, x0, fixed, args=args, batched=True,
                                     args_axes=0, solver=solver)  # fmt: skip

        start = time.perf_counter()
        with (contexts or {}).get(label, contextlib.nullcontext)():
            solves[label] = jax.jit(solve).lower(x0, fixed, args).compile()
        compile_s[label] = time.perf_counter() - start
        solution = jax.block_until_ready(solves[label](x0, fixed, args))
        steps[label] = float(np.mean(solution.steps))
        converged[label] = float(np.mean(solution.converged))
    times: dict[str, list[float]] = {label: [] for label in solvers}
    for _ in range(repeats):
        for label, solve in solves.items():
            start = time.perf_counter()
            jax.block_until_ready(solve(x0, fixed, args))
            times[label].append(time.perf_counter() - start)
    medians = {label: float(np.median(t)) for label, t in times.items()}
    row = {"problem": name, "n": n, "B": batch}
    for label in solvers:
        row[f"{label}_ms"] = round(1e3 * medians[label], 1)
        row[f"{label}_steps"] = round(steps[label], 1)
        row[f"{label}_converged"] = round(converged[label], 3)
        row[f"{label}_compile_s"] = round(compile_s[label], 2)
    first, second = list(solvers)[:2]
    row["time ratio"] = round(medians[first] / medians[second], 3)
    return row


def write(stem: str, doc: str, rows: list[dict]) -> None:
    """``rows`` as a table under ``doc``'s first paragraph, in
    ``benchmarks/results/<stem>-<date>.md``; printed too."""
    name = f"{stem}-{datetime.date.today()}"
    columns = list(rows[0])
    lines = [f"# {name}", "", doc.strip().split("\n\n")[0], "",
             "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]  # fmt: skip
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    (pathlib.Path(__file__).parent / "results" / f"{name}.md").write_text(text)
    print(text)


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    write("cpu-certify-cost", __doc__, [measure(*case) for case in CASES])


if __name__ == "__main__":
    main()
