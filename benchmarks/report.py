"""The markdown report of a run: ratios against the targets, then every measurement.

Built from the JSON records alone, so it can be regenerated from a saved file:
``python -m benchmarks.report benchmarks/results/<file>.json``. The ``solvers`` suite
has the layout below; the full suites (``cpu``, ``gpu``, ``micro``) that of
:mod:`benchmarks.tables`.
"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Sequence

from benchmarks import tables

SCIPY = "scipy-lbfgsb-loop"
OPTAX = "optax-lbfgs-vmap-mask"
FIXEDOPT = "fixedopt-mask"
OPTAX_TARGET = 1.5
COMPILE_TARGET_S = 2.0


def scipy_target(n: int) -> float:
    """Required speedup of fixedopt over the scipy loop (from the issue)."""
    return 10.0 if n <= 64 else 4.0


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _cases(records: Sequence[dict]) -> list[tuple]:
    return list(dict.fromkeys((r["problem"], r["B"], r["n"]) for r in records))


def ratio_table(records: Sequence[dict]) -> list[str]:
    """One row per problem/size: median times, fixedopt's speedups and their targets."""
    lines = [
        "| problem | B | n | scipy loop (s) | optax recipe (s) | fixedopt (s) "
        "| fixedopt vs scipy | fixedopt vs optax | fixedopt compile (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in _cases(records):
        by_method = {r["method"]: r for r in records if (r["problem"], r["B"], r["n"]) == case}
        median = {m: by_method[m]["time_median_s"] for m in (SCIPY, OPTAX, FIXEDOPT)}
        vs_scipy = median[SCIPY] / median[FIXEDOPT]
        vs_optax = median[OPTAX] / median[FIXEDOPT]
        compile_s = by_method[FIXEDOPT]["compile_s"]
        target = scipy_target(case[2])
        lines.append(
            f"| {case[0]} | {case[1]} | {case[2]} | {median[SCIPY]:.3f} | {median[OPTAX]:.3f} "
            f"| {median[FIXEDOPT]:.3f} | {vs_scipy:.1f}x {_mark(vs_scipy >= target)} "
            f"(≥{target:g}x) | {vs_optax:.2f}x {_mark(vs_optax >= OPTAX_TARGET)} "
            f"(≥{OPTAX_TARGET:g}x) | {compile_s:.2f} {_mark(compile_s <= COMPILE_TARGET_S)} "
            f"(≤{COMPILE_TARGET_S:g}) |"
        )
    return lines


def detail_table(records: Sequence[dict]) -> list[str]:
    """Every measurement of every method on every problem/size."""
    lines = [
        "| problem | B | n | method | median (s) | min–max (s) | repeats | compile (s) "
        "| steps mean/max | converged | gtol met | max rel Δf | rows agree | fixed exact |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['problem']} | {r['B']} | {r['n']} | {r['method']} "
            f"| {r['time_median_s']:.3f} | {r['time_min_s']:.3f}–{r['time_max_s']:.3f} "
            f"| {r['repeats']} | {r['compile_s']:.2f} "
            f"| {r['steps_mean']:.1f}/{r['steps_max']} | {r['converged_frac']:.3f} "
            f"| {r['gtol_met_frac']:.3f} | {r['max_rel_obj_diff']:.1e} "
            f"| {r['rows_agree_frac']:.3f} | {'yes' if r['fixed_bit_identical'] else 'NO'} |"
        )
    return lines


def notes(records: Sequence[dict]) -> list[str]:
    """Environment, the new-mask compile check and how to read the columns."""
    env = records[0]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    lines = [
        f"- backend `{env['backend']}`, device `{env['device']}`, {env['host_cpus']} host "
        f"CPUs (BLAS threads for scipy: {env['blas_threads']}), dtype {env['dtype']}, "
        f"gtol {env['gtol']} (max-norm of the projected gradient), "
        f"max_steps {env['max_steps']}; {versions}.",
        "- Times are medians over repeats interleaved across methods in one process "
        "(A B A B ...); only the ratios are meaningful on a shared machine. Compile time "
        "is JAX's trace + lowering + XLA compile seconds during the first call "
        "(from `jax.monitoring`); the JSON also has the first call's wall time.",
    ]
    for r in records:
        if r.get("new_mask_compiles") is not None:
            c = r["new_mask_compiles"]
            lines.append(
                f"- {r['problem']} B={r['B']} n={r['n']}: a new mask grew fixedopt's jit "
                f"cache by {c['cache_growth']} and triggered {c['backend_compiles']} XLA "
                "compilations (both must be 0)."
            )
    scipy_repeats = {r["repeats"] for r in records if r["method"] == SCIPY}
    other_repeats = {r["repeats"] for r in records if r["method"] != SCIPY}
    if scipy_repeats != other_repeats:
        lines.append(
            f"- The scipy loop was timed {sorted(scipy_repeats)} time(s) per case (slow), "
            f"the JAX methods {sorted(other_repeats)} times."
        )
    lines += [
        "- `converged`: as the method reports it (scipy: `success` and its own final "
        "gradient within gtol, since with ftol=0 it also reports success when f stops "
        "decreasing); `gtol met`: the projected gradient at "
        "the returned x re-evaluated in NumPy; `max rel Δf`: max over rows of "
        "|f − f_scipy| / max(|f_scipy|, 1), both re-evaluated in NumPy; `rows agree`: "
        "fraction of rows with that difference ≤ 1e-6; `fixed exact`: every fixed entry "
        "bit-identical to x0.",
    ]
    return lines


def markdown(records: Sequence[dict], title: str) -> str:
    """The whole report."""
    if records and records[0].get("suite") != "solvers":
        return tables.markdown(records, title)
    sections = [
        [f"# {title}", ""],
        ["## Speedups of fixedopt (targets in parentheses)", ""],
        ratio_table(records),
        ["", "## All measurements", ""],
        detail_table(records),
        ["", "## Notes", ""],
        notes(records),
    ]
    return "\n".join(line for section in sections for line in section) + "\n"


if __name__ == "__main__":
    source = pathlib.Path(sys.argv[1])
    print(markdown(json.loads(source.read_text()), title=source.stem), end="")
