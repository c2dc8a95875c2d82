"""What L-BFGS's certification costs through lanes, and how much of it is the
mechanism (rows waiting PENDING, the per-trip check of an eighth of the lanes): quad
n = 8, B = 1e5, float64, three solvers compiled once and timed interleaved, median of
7 (``certify_cost.measure``): the default ``LBFGS()``, ``Uncertified`` (no check) and
``NothingLeft`` (a check that always answers "nothing left": the mechanism alone).

    python -m benchmarks.certify_mechanism LABEL   # appends a row to
    # benchmarks/results/cpu-certify-mechanism.md; run it on two trees to compare them
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

import jax
import jax.numpy as jnp
from certify_cost import Uncertified, measure

import fixedopt

RESULTS = pathlib.Path(__file__).parent / "results" / "cpu-certify-mechanism.md"


@dataclasses.dataclass(frozen=True)
class NothingLeft(fixedopt.LBFGS):
    """L-BFGS whose check always holds (decrement 0): the mechanism's cost alone."""

    def certify(self, problem, x, value, grad, state):
        return fixedopt.Certificate(jnp.zeros((), value.dtype), jnp.zeros_like(x), state)


def main(label: str) -> None:
    jax.config.update("jax_enable_x64", True)
    solvers = {"certified": fixedopt.LBFGS(), "uncertified": Uncertified(),
               "nothing_left": NothingLeft()}  # fmt: skip
    row = measure("quad", 8, 100_000, solvers=solvers)
    columns = ["certified_ms", "uncertified_ms", "nothing_left_ms", "certified_steps",
               "time ratio"]  # fmt: skip
    if not RESULTS.exists():
        RESULTS.write_text(
            f"# cpu-certify-mechanism\n\n{__doc__.strip()}\n\n| tree | "
            + " | ".join(columns)
            + " |\n|---|"
            + "---|" * len(columns)
            + "\n"
        )
    line = f"| {label} | " + " | ".join(str(row[c]) for c in columns) + " |\n"
    with RESULTS.open("a") as out:
        out.write(line)
    print(line, end="")


if __name__ == "__main__":
    main(sys.argv[1])
