"""The ``minimize`` part of the status_truth suite (L-BFGS with one ``scaling``, one
dtype per process): every row that does not tell the truth, and the summary.

    python -m benchmarks.status_truth_minimize float32   # then float64; appends to
    # benchmarks/results/cpu-status-truth-certified.md (a third argument: another name)

One process per dtype: a single process that compiles the whole suite (both dtypes,
both scalings, the MGH tables) ran out of memory maps in LLVM ("Cannot allocate
memory", then a segfault) twice on these machines at this stop.
"""

from __future__ import annotations

import pathlib
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import status_truth  # noqa: E402
from tests import minimize_truth  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"


def main(dtype_name: str, scaling: str = "auto", name: str = "cpu-status-truth-certified") -> None:
    out_path = RESULTS / f"{name}.md"
    start = time.perf_counter()
    rows = status_truth.minimize_cases(
        minimize_truth.PROBLEMS, (np.dtype(dtype_name).type,), fixedopt.LBFGS(scaling=scaling)
    )
    lines = [f"## {dtype_name}, LBFGS(scaling={scaling!r})", "",
             "| problem | start | scale | status | steps | gap | allowed | accurate |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if not r["truthful"]:
            lines.append(f"| {r['problem']} | {r['start']} | {r['scale']:g} | {r['status']} | "
                         f"{r['steps']} | {r['gap']:.3g} | {r['allowed']:.3g} | "
                         f"{r['accurate']} |")  # fmt: skip
    lines += ["", "| cases | truthful | false CONVERGED | accurate not CONVERGED | "
              "accurate at MAX_STEPS |", "|---|---|---|---|---|"]  # fmt: skip
    (summary,) = [s for s in status_truth.minimize_summary(rows) if s["dtype"] == "all"]
    keys = ("cases", "truthful", "false_converged", "accurate_not_converged",
            "accurate_at_max_steps")  # fmt: skip
    lines.append("| " + " | ".join(str(summary[k]) for k in keys) + " |")
    lines += ["", f"{time.perf_counter() - start:.0f} s; backend {jax.default_backend()}", ""]
    text = "\n".join(lines) + "\n"
    if not out_path.exists():
        out_path.write_text(f"# {name}\n\n" + __doc__.strip() + "\n\n")
    with out_path.open("a") as out:
        out.write(text)
    print(text)


if __name__ == "__main__":
    main(*sys.argv[1:])
