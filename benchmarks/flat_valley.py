"""A one-off check (docs/decisions.md, "Flat steps in a valley"): float32 rows with JAX's
64-bit mode off, relative tests off and ``abs_gtol`` 1e-3 (the benchmarks' float32
settings): statuses, reasons, CONVERGED rows whose float64 gradient at the returned
``x`` is beyond the tolerance, steps. ``FLAT_STEPS`` 4: the same at commit d29e26e (the
constant patched to 4 gave the same numbers).

    python -m benchmarks.flat_valley rosen8 rosen64 quad   # B = 1,024 (env B)
"""

import os
import sys

import numpy as np

from benchmarks.cases import Case, evaluate
from benchmarks.methods import GTOL, Settings, as_rows, fixedopt_call, jitted
from benchmarks.tpu_peers import float32_only
from fixedopt.testing_problems import BATCHED


def report(name, problem, settings) -> None:
    """One line: statuses, reasons of CONVERGED rows, untrue ones, steps."""
    call, inputs = fixedopt_call(problem, settings)
    solution = jitted(call)(*inputs)
    gradient = evaluate(problem, as_rows(solution))[1]
    status, reason, steps = (np.asarray(a) for a in (solution.status, solution.reason,
                                                     solution.steps))  # fmt: skip
    converged, beyond = status == 0, gradient > settings.gtol
    print(
        f"{name}: status {dict(zip(*np.unique(status, return_counts=True)))} reason "
        f"{dict(zip(*np.unique(reason[converged], return_counts=True)))} CONVERGED untrue "
        f"{np.sum(converged & beyond)} (PRECISION {np.sum(converged & (reason == 5) & beyond)}) "
        f"within {np.mean(~beyond):.4f} steps max {steps.max()} mean {steps.mean():.1f}",
        flush=True,
    )


def main(cases: list[str]) -> None:
    """rosen n = 8 and 64 at B (1,024), quad(256, 64) at abs_gtol 1e-3 to 1e-7."""
    batch = int(os.environ.get("B", 1024))
    with float32_only():
        for n in (8, 64):
            if f"rosen{n}" in cases:
                problem = Case(("rosen",), batch, n, (), "float32").make("rosen")
                report(f"rosen n={n}", problem, Settings(GTOL["float32"], 5000))
        if "quad" in cases:
            problem = BATCHED["quad"](256, 64, 0, "float32")
            for gtol in (1e-3, 1e-4, 1e-5, 1e-7):
                report(f"quad(256,64) abs_gtol {gtol}", problem, Settings(gtol, 2000, 32, 2**20))


if __name__ == "__main__":
    main(sys.argv[1:] or ["rosen8", "rosen64", "quad"])
