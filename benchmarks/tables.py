"""The markdown report of a full suite (``cpu``, ``gpu``): ratio tables, then details.

Every ratio is ``time(other method) / time(fixedopt)`` from one interleaved case: above
1 means fixedopt is faster. ``*`` marks a time extrapolated from a subsample of rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks import micro_tables

FIXEDOPT = "fixedopt-mask"
ANCHORS = (
    ("scipy loop", "scipy-lbfgsb-loop"),
    ("jaxopt vmap", "jaxopt-lbfgsb-vmap"),
    ("optax vmap", "optax-lbfgs-vmap-mask"),
    ("TFP batch", "tfp-lbfgs-batch"),
)
LS_ANCHORS = (
    ("scipy least_squares loop", "scipy-least-squares-loop"),
    ("lmfit loop", "lmfit-loop"),
)
OPTAX_TARGET = 1.5


def scipy_target(n: int) -> float:
    """Required speedup of fixedopt over the scipy loop (from the issue)."""
    return 10.0 if n <= 64 else 4.0


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def case_records(records: Sequence[dict]) -> list[dict]:
    return [r for r in records if "micro" not in r]


def _cases(records, group_filter) -> dict[tuple, dict[str, dict]]:
    """``(problem, dtype, B, n) -> {method: record}`` for the groups that pass the filter."""
    cases: dict[tuple, dict[str, dict]] = {}
    for r in case_records(records):
        if group_filter(r):
            key = (r["problem"], r["dtype"], r["B"], r["n"])
            cases.setdefault(key, {})[r["method"]] = r
    return cases


def _time(r: dict | None) -> str:
    if r is None:
        return "—"
    if "skipped" in r:
        return "skipped"
    return f"{r['time_median_s']:.3g}{'*' if r['extrapolated'] else ''}"


def ratio(other: dict | None, mine: dict) -> tuple[str, float | None]:
    """``time(other) / time(mine)`` as text, and as a number (None if not measured)."""
    if other is None:
        return "—", None
    if "skipped" in other:
        return "skipped", None
    value = other["time_median_s"] / mine["time_median_s"]
    return f"{value:.3g}x{'*' if other['extrapolated'] else ''}", value


def minimize_table(records) -> list[str]:
    lines = [
        "| problem | dtype | B | n | fixedopt-mask (s) | "
        + " | ".join(f"vs {label}" for label, _ in ANCHORS)
        + " | split / mask | chunk64 / mask | compile (s) | converged | fixed exact |",
        "|---|---|---:|---:|---:|" + "---:|" * len(ANCHORS) + "---:|---:|---:|---:|---|",
    ]
    cases = _cases(records, lambda r: r["group"] == r["problem"] and "least" not in r["method"])
    for (problem, dtype, batch, n), by_method in cases.items():
        mine = by_method.get(FIXEDOPT)
        if mine is None or "skipped" in mine or problem == "spectra":
            continue
        cells = []
        for label, method in ANCHORS:
            text, value = ratio(by_method.get(method), mine)
            target = scipy_target(n) if label == "scipy loop" else OPTAX_TARGET
            if value is not None and label in ("scipy loop", "optax vmap"):
                text += f" {_mark(value >= target)}"
            cells.append(text)
        variants = [
            ratio(by_method.get(f"fixedopt-{v}"), mine)[0] for v in ("split", "mask-chunk64")
        ]
        lines.append(
            f"| {problem} | {dtype} | {batch} | {n} | {_time(mine)} | {' | '.join(cells)} "
            f"| {' | '.join(variants)} | {mine['compile_s']:.1f} | {mine['converged_frac']:.3f} "
            f"| {'yes' if mine['fixed_bit_identical'] else 'NO'} |"
        )
    return lines


def least_squares_table(records) -> list[str]:
    lines = [
        "| problem | dtype | B | n | fixedopt-lm (s) | "
        + " | ".join(f"vs {label}" for label, _ in LS_ANCHORS)
        + " | compile (s) | converged | max rel Δf | fixed exact |",
        "|---|---|---:|---:|---:|" + "---:|" * len(LS_ANCHORS) + "---:|---:|---:|---|",
    ]
    for (problem, dtype, batch, n), by_method in _cases(records, lambda r: True).items():
        mine = by_method.get("fixedopt-lm")
        if mine is None or "skipped" in mine:
            continue
        cells = [ratio(by_method.get(method), mine)[0] for _, method in LS_ANCHORS]
        lines.append(
            f"| {problem} | {dtype} | {batch} | {n} | {_time(mine)} | {' | '.join(cells)} "
            f"| {mine['compile_s']:.1f} | {mine['converged_frac']:.3f} "
            f"| {mine['max_rel_obj_diff']:.1e} | {'yes' if mine['fixed_bit_identical'] else 'NO'} |"
        )
    return lines


def straggler_table(records) -> list[str]:
    """Per method: the batch's time without and with the one ill-conditioned row."""
    lines = [
        "| B | n | method | without (s) | with straggler (s) | with / without | steps max |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    groups = [
        r
        for r in case_records(records)
        if "straggler" in r["group"] and "skipped" not in r and not r["extrapolated"]
    ]
    bases = {(b["method"], b["B"], b["n"]): b for b in groups if b["problem"] == "quad"}
    for r in groups:
        base = bases.get((r["method"], r["B"], r["n"]))
        if r["problem"] != "straggler" or base is None:
            continue
        lines.append(
            f"| {r['B']} | {r['n']} | {r['method']} | {_time(base)} | {_time(r)} "
            f"| {r['time_median_s'] / base['time_median_s']:.2f}x | {r['steps_max']} |"
        )
    return lines


def detail_table(records) -> list[str]:
    """Every measurement of every method on every problem/size."""
    lines = [
        "| problem | dtype | B | n | method | median (s) | min–max (s) | rep | compile (s) "
        "| steps mean/max | converged | gtol met | max rel Δf | fixed exact | memory (MB) |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in case_records(records):
        head = f"| {r['problem']} | {r['dtype']} | {r['B']} | {r['n']} | {r['method']} "
        if "skipped" in r:
            lines.append(head + f"| skipped: {r['skipped']} |" + " |" * 9)
            continue
        star = "*" if r["extrapolated"] else ""
        memory = "—" if r["memory_bytes"] is None else f"{r['memory_bytes'] / 2**20:.1f}"
        lines.append(
            head + f"| {r['time_median_s']:.3g}{star} | {r['time_min_s']:.3g}–"
            f"{r['time_max_s']:.3g} | {r['repeats']} | {r['compile_s']:.1f} "
            f"| {r['steps_mean']:.1f}/{r['steps_max']} | {r['converged_frac']:.3f} "
            f"| {r['gtol_met_frac']:.3f} | {r['max_rel_obj_diff']:.1e} "
            f"| {'yes' if r['fixed_bit_identical'] else 'NO'} | {memory} |"
        )
    return lines


def notes(records) -> list[str]:
    env = records[0]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    gtols = sorted({(r["dtype"], r["gtol"]) for r in case_records(records)})
    lines = [
        f"- backend `{env['backend']}`, device `{env['device']}`, {env['host_cpus']} host "
        f"CPUs (BLAS threads for the NumPy loops: {env['blas_threads']}); tolerance "
        f"{', '.join(f'{d}: {g:g}' for d, g in gtols)} (max-norm of the projected gradient "
        f"on free entries), max_steps {env['max_steps']}; {versions}.",
        f"- Whole suite: {env['suite_wall_s'] / 60:.1f} min wall time.",
        "- Times are medians over calls interleaved across the methods of a case "
        "(A B C A B C ...) in one process; compiled methods were called once before "
        "(compile time apart: JAX's trace + lowering + XLA compile seconds). Only ratios "
        "are meaningful on a shared machine.",
        "- `*`: the per-row loops (and jaxopt, on large batches) solved the first rows "
        "only (rows are i.i.d.); the time is the measured one × B / rows "
        "(`extrapolated: true`, `measured_time_median_s` in the JSON). Quality columns "
        "cover the rows solved. For jaxopt this flatters it: under `vmap` a batch runs as "
        "long as its slowest row.",
        "- `converged`: as the method reports it; `gtol met`: the projected gradient at "
        "the returned x re-evaluated in NumPy float64; `max rel Δf`: max over the rows "
        "the reference solved of |f − f_ref| / max(|f_ref|, 1), f_ref from the scipy loop "
        "(least squares: scipy least_squares); `fixed exact`: every fixed entry "
        "bit-identical to x0 in the method's dtype; memory: XLA's analysis of the "
        "compiled program (arguments + outputs + temporaries), where the benchmark owns "
        "the `jit`.",
    ]
    method_notes = {}
    for r in case_records(records):
        for note in r.get("notes", []):
            if "extrapolated" not in note:
                method_notes.setdefault(r["method"], set()).add(note)
        if "skipped" in r:
            method_notes.setdefault(r["method"], set()).add(f"skipped: {r['skipped']}")
    lines += [f"- `{m}`: {'; '.join(sorted(n))}." for m, n in method_notes.items()]
    return lines


def markdown(records: Sequence[dict], title: str) -> str:
    """The whole report of a suite."""
    sections = [[f"# {title}", ""]]
    if case_records(records):
        sections += [
            [
                "## Minimization: speedups of fixedopt-mask (time of X / time of fixedopt)",
                "",
                f"Targets: ≥10x the scipy loop for n ≤ 64, ≥4x for n = 512; ≥{OPTAX_TARGET}x "
                "the optax recipe. `split / mask`, `chunk64 / mask`: the time of fixedopt with "
                '`strategy="split"`, with `chunk_size=64`, over that of fixedopt\'s defaults '
                "(below 1: the variant is faster).",
                "",
            ],
            minimize_table(records),
            ["", "## Least squares: speedups of fixedopt-lm", ""],
            least_squares_table(records),
            [
                "",
                "## Straggler: one ill-conditioned row in the batch",
                "",
                "The `quad` batch timed with and without its last row replaced by one that "
                "needs ~15x the L-BFGS steps, interleaved in one case. (A per-row loop pays only "
                "that row's own steps; its times here would be extrapolated from rows without "
                "it, so it is left out.)",
                "",
            ],
            straggler_table(records),
        ]
    sections += micro_tables.sections(records)
    if case_records(records):
        sections += [["", "## All measurements", ""], detail_table(records)]
    sections += [["", "## Notes", ""], notes(records)]
    return "\n".join(line for section in sections for line in section) + "\n"
