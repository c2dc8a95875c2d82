"""The one report generator: a run's markdown, from its JSON records alone.

Every record has a ``kind``; each kind has a section (:data:`SECTIONS`: title, text,
columns). Solver cases (``kind == "case"``) also get ratio tables built by case:
``time(other method) / time(fixedopt)`` from one interleaved case (above 1: fixedopt is
faster; ``*``: a time extrapolated from a subsample of rows). Regenerate a report with
``python -m benchmarks.report benchmarks/results/<file>.json``.
"""

from __future__ import annotations

import json
import pathlib
import sys

ANCHORS = (("scipy loop", "scipy-lbfgsb-loop"), ("jaxopt vmap", "jaxopt-lbfgsb-vmap"),
           ("optax vmap", "optax-lbfgs-vmap-mask"), ("TFP batch", "tfp-lbfgs-batch"))  # fmt: skip
LS_ANCHORS = (
    ("scipy least_squares loop", "scipy-least-squares-loop"),
    ("lmfit loop", "lmfit-loop"),
)
OPTAX_TARGET, COMPILE_TARGET_S = 1.5, 2.0
ENVIRONMENT = {"kind", "backend", "device", "device_count", "host_cpus", "blas_threads", "versions",
               "date", "suite", "quick", "suite_wall_s"}  # fmt: skip


def mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def yes(value) -> str:
    return "yes" if value else "NO"


def table(rows: list[dict], columns) -> list[str]:
    """A markdown table: ``columns`` are ``(header, format)``, a ``str.format`` template
    (right-aligned when it has a format spec) or a function of the row."""
    align = ["---:" if callable(f) or ":" in f else "---" for _, f in columns]
    rule = [a for (h, _), a in zip(columns, align) for _ in range(h.count(" | ") + 1)]
    cell = lambda f, r: f(r) if callable(f) else f.format(**r)
    return [
        "| " + " | ".join(h for h, _ in columns) + " |",
        "|" + "|".join(rule) + "|",
        *("| " + " | ".join(cell(f, r) for _, f in columns) + " |" for r in rows),
    ]


def seconds(r: dict | None) -> str:
    if r is None or "skipped" in r:
        return "—" if r is None else "skipped"
    return f"{r['time_median_s']:.3g}{'*' if r['extrapolated'] else ''}"


def ratio(other: dict | None, mine: dict) -> tuple[str, float | None]:
    """``time(other) / time(mine)`` as text, and as a number (None if not measured)."""
    if other is None or "skipped" in other:
        return seconds(other), None
    value = other["time_median_s"] / mine["time_median_s"]
    return f"{value:.3g}x{'*' if other['extrapolated'] else ''}", value


def by_case(records) -> dict[tuple, dict[str, dict]]:
    """``(problem, dtype, B, n, group) -> {method: record}`` of the solver cases."""
    cases: dict[tuple, dict[str, dict]] = {}
    for r in records:
        if r.get("kind") == "case":
            key = (r["problem"], r["dtype"], r["B"], r["n"], r["group"])
            cases.setdefault(key, {})[r["method"]] = r
    return cases


def minimize_rows(records) -> list[dict]:
    """fixedopt-mask against each anchor, with the targets, per minimization case."""
    rows = []
    for (problem, dtype, batch, n, group), methods in by_case(records).items():
        mine = methods.get("fixedopt-mask")
        if (
            group != problem
            or mine is None
            or "skipped" in mine
            or "scipy-lbfgsb-loop" not in methods
        ):
            continue
        row = {"case": f"{problem} | {dtype} | {batch} | {n}", "mine": seconds(mine)}
        for label, method in ANCHORS:
            text, value = ratio(methods.get(method), mine)
            target = (10.0 if n <= 64 else 4.0) if label == "scipy loop" else OPTAX_TARGET
            marked = value is not None and label in ("scipy loop", "optax vmap")
            row[label] = text + (f" {mark(value >= target)}" if marked else "")
        for variant in ("split", "mask-chunk64"):
            row[variant] = ratio(methods.get(f"fixedopt-{variant}"), mine)[0]
        rows.append(
            row
            | {
                "compile": f"{mine['compile_s']:.1f} {mark(mine['compile_s'] <= COMPILE_TARGET_S)}",
                "converged": mine["converged_frac"],
                "exact": yes(mine["fixed_bit_identical"]),
            }
        )
    return rows


def least_squares_rows(records) -> list[dict]:
    rows = []
    for (problem, dtype, batch, n, _), methods in by_case(records).items():
        mine = methods.get("fixedopt-lm")
        if mine is not None and "skipped" not in mine:
            rows.append(
                mine
                | {
                    "case": f"{problem} | {dtype} | {batch} | {n}",
                    "mine": seconds(mine),
                    "exact": yes(mine["fixed_bit_identical"]),
                    **{label: ratio(methods.get(m), mine)[0] for label, m in LS_ANCHORS},
                }
            )
    return rows


def straggler_rows(records) -> list[dict]:
    """Per method: the batch's time without and with the one ill-conditioned row."""
    timed = [r for r in records if r.get("kind") == "case" and "straggler" in r["group"]
             and "skipped" not in r and not r["extrapolated"]]  # fmt: skip
    bases = {(b["method"], b["B"], b["n"]): b for b in timed if b["problem"] == "quad"}
    rows = []
    for r in timed:
        base = bases.get((r["method"], r["B"], r["n"]))
        if r["problem"] == "straggler" and base is not None:
            rows.append(r | {"without": base["time_median_s"], "others_max": base["steps_max"],
                             "ratio": r["time_median_s"] / base["time_median_s"]})  # fmt: skip
    return rows


def detail(r: dict) -> str:
    """Every measurement of one case record, as the cells after the method's name."""
    if "skipped" in r:
        return f"skipped: {r['skipped']} |" + " |" * 10
    memory = "—" if r["memory_bytes"] is None else f"{r['memory_bytes'] / 2**20:.1f}"
    per_step = 1e6 * r["time_median_s"] / max(r["steps_max"], 1)
    return (
        f"{seconds(r)} | {r['time_min_s']:.3g}–{r['time_max_s']:.3g} | {r['repeats']} "
        f"| {r['time_vs_reference']:.2f}x | {r['compile_s']:.1f} "
        f"| {r['steps_mean']:.1f}/{r['steps_max']} | {per_step:.0f} | {r['converged_frac']:.3f} "
        f"| {r['gtol_met_frac']:.3f} | {r['max_rel_obj_diff']:.1e} "
        f"| {yes(r['fixed_bit_identical'])} | {memory}"
    )


CASE = "{problem} | {dtype} | {B} | {n}"
DETAIL_HEAD = ("median (s) | min–max (s) | rep | vs first | compile (s) | steps mean/max | µs/step "
               "| converged | gtol met | max rel Δf | fixed exact | memory (MB)")  # fmt: skip
SECTIONS = {  # kind: (title, text, columns)
    "minimize": ("Minimization: speedups of fixedopt-mask (time of X / time of fixedopt)",
                 "Targets: ≥10x the scipy loop for n ≤ 64, ≥4x for n = 512; ≥1.5x the optax "
                 "recipe; compile ≤2 s. `split`, `mask-chunk64`: fixedopt with "
                 '`strategy="split"`, with `chunk_size=64` (below 1: faster than the defaults).',
                 [("problem | dtype | B | n", "{case}"), ("fixedopt-mask (s)", "{mine}"),
                  *((f"vs {label}", f"{{{label}}}") for label, _ in ANCHORS),
                  ("split", "{split}"), ("chunk64", "{mask-chunk64}"), ("compile (s)", "{compile}"),
                  ("converged", "{converged:.3f}"), ("fixed exact", "{exact}")]),
    "least_squares": ("Least squares: speedups of fixedopt-lm", "",
                      [("problem | dtype | B | n", "{case}"), ("fixedopt-lm (s)", "{mine}"),
                       *((f"vs {label}", f"{{{label}}}") for label, _ in LS_ANCHORS),
                       ("compile (s)", "{compile_s:.1f}"), ("converged", "{converged_frac:.3f}"),
                       ("max rel Δf", "{max_rel_obj_diff:.1e}"), ("fixed exact", "{exact}")]),
    "straggler": ("Straggler: one ill-conditioned row in the batch",
                  "The `quad` batch timed with and without its last row replaced by an "
                  "ill-conditioned one, interleaved in one case (per-row loops, timed on "
                  "rows without it, are left out). Rows other steps: rows whose step count "
                  "differs from the case's first method.",
                  [("B", "{B}"), ("n", "{n}"), ("method", "{method}"),
                   ("without (s)", "{without:.4g}"), ("with straggler (s)", "{time_median_s:.4g}"),
                   ("with / without", "{ratio:.2f}x"),
                   ("steps max (others)", "{steps_max} ({others_max})"),
                   ("rows other steps", "{rows_other_steps:d}"),
                   ("compile (s)", "{compile_s:.2f}")]),
    "case": ("All measurements", "`vs first`: time over that of the case's first method; "
             "`max rel Δf` against it too.",
             [(CASE.replace("{", "").replace("}", ""), CASE), ("method", "{method}"),
              (DETAIL_HEAD, detail)]),
    "objective": ("Masked objective + gradient vs unmasked and index splitting",
                  "One batched `value_and_grad`, time relative to the unmasked objective. "
                  "`masked`: `fixedopt.fix(fun, fixed, values)`, the form the solvers evaluate; "
                  "`pinned to x`: `where(fixed, stop_gradient(x), x)`; `split`: free entries "
                  "packed, scattered into the full vector in the objective.",
                  [("problem", "{problem}"), ("B", "{B}"), ("n", "{n}"),
                   ("unmasked (ms)", lambda r: f"{1e3 * r['unmasked_s']:.3f}"),
                   ("masked", lambda r: f"{r['masked_vs_unmasked']:.3f}x "
                    f"{mark(r['masked_vs_unmasked'] <= r['target'])} (≤{r['target']}x)"),
                   ("pinned to x", "{pinned_vs_unmasked:.3f}x"),
                   ("split (width)", "{split_vs_unmasked:.3f}x ({split_width})")]),
    "keep_fixed": ("keep_fixed(optax.adam(1e-3)) vs optax.adam(1e-3), one step",
                   "Buffers donated. Reference: one elementwise pass reading and writing the "
                   "same buffers as Adam, the memory-bandwidth floor.", None),
    "strategy": ('strategy="split" vs strategy="mask": whole solves (public calls)',
                 "quad, LBFGS; split's time includes packing the indices from the concrete mask.",
                 None),
    "new_mask": ("Compilations when only the mask changes (must be 0)",
                 "`cache_growth`: programs compiled for fixedopt's solves "
                 "(`fixedopt.testing.compiled_solves`); `backend_compiles`: XLA compilations.",
                 None),
    "split_compiles": ('Compilations under strategy="split" per free count',
                       "A new free count compiles only for a new packed width.", None),
    "dispatch": ("Python overhead of the public call", "", None),
    "fusion": ("The fixed mask fused into the plain program's passes",
               "`ratio_median`: median of paired ratios (masked / plain), interleaved; "
               "`*_materialized`: arrays of at least `elements` entries the program writes.",
               None),
    "memory": ("Peak memory: XLA memory of the compiled batched solve (bytes)", "", None),
    "differentiation": ("Implicit vs unrolled gradient through a batched solve",
                        "`jax.grad` of `sum(sin(x*))` with respect to the linear term; the "
                        "unrolled gradient runs all max_steps (a scan); memory: XLA temp bytes.",
                        None),
    "units": ("The same fit in other units (4 rows: statuses; correct digits vs MINPACK)", "",
              None),
    "truth_summary": ("MGH least-squares problems from their standard starts",
                      "Accurate: relative error <= 100 sqrt(eps) in every parameter. "
                      "Truthful: CONVERGED exactly when accurate.", None),
    "truth": ("Every MGH row", "", None),
}  # fmt: skip
DERIVED = {"minimize": minimize_rows, "least_squares": least_squares_rows,
           "straggler": straggler_rows}  # fmt: skip


def cell(value) -> str:
    """A measurement as text: floats to 4 digits, booleans yes/NO, lists joined."""
    if isinstance(value, bool):
        return yes(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def section(kind: str, rows: list[dict]) -> list[str]:
    """A section; without curated columns, one column per measured field (JSON names)."""
    title, text, columns = SECTIONS[kind]
    fields = [k for k in rows[0] if k not in ENVIRONMENT]
    columns = columns or [(k, lambda r, k=k: cell(r.get(k, "—"))) for k in fields]
    return ["", f"## {title}", "", *([text, ""] if text else []), *table(rows, columns)]


def notes(records) -> list[str]:
    """Environment, how times were taken, and the notes of every method."""
    env = records[0]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    lines = ["", "## Notes", "",
             f"- backend `{env['backend']}`, device `{env['device']}`, {env['host_cpus']} host "
             f"CPUs (BLAS threads for the NumPy loops: {env['blas_threads']}); {versions}; "
             f"whole suite {env['suite_wall_s'] / 60:.1f} min.",
             "- Times are medians over calls interleaved across the methods of a case "
             "(A B C A B C ...) in one process, each blocked until ready; compile time apart "
             "(JAX's trace + lowering + XLA compile seconds). Only ratios are meaningful on a "
             "shared machine."]  # fmt: skip
    cases = [r for r in records if r.get("kind") == "case"]
    if cases:
        gtols = sorted({(r["dtype"], r["gtol"]) for r in cases})
        lines.append(
            f"- Tolerance {', '.join(f'{d}: {g:g}' for d, g in gtols)} (max-norm of the "
            "projected gradient on free entries). `converged`: as the method reports it; "
            "`gtol met`: re-evaluated in NumPy float64 at the returned x; `*`: the per-row "
            "loops (and jaxopt) solved the first rows only, time × B / rows."
        )
    for r in cases:
        if "new_mask_compiles" in r:
            c = r["new_mask_compiles"]
            lines.append(
                f"- {r['problem']} B={r['B']} n={r['n']}: a new mask compiled "
                f"{c['cache_growth']} programs, {c['backend_compiles']} XLA (both must be 0)."
            )
    method_notes: dict[str, set] = {}
    for r in cases:
        found = [n for n in r.get("notes", []) if "extrapolated" not in n]
        found += [f"skipped: {r['skipped']}"] if "skipped" in r else []
        method_notes.setdefault(r["method"], set()).update(found)
    return lines + [f"- `{m}`: {'; '.join(sorted(n))}." for m, n in method_notes.items() if n]


def markdown(records: list[dict], title: str) -> str:
    """The whole report of a run: derived tables, one section per kind, notes."""
    if records and records[0].get("kind") == "ase":
        r = records[0]
        return (f"# {title}\n\nASE BFGS vs one batched fixedopt solve, from `notebooks/"
                f"{r['notebook']}` (ase {r['ase']}, jax {r['versions']['jax']}, device "
                f"{r['device']}). One run: absolute times drift; the speedup compares times of "
                f"the same run.\n\n{r['table']}")  # fmt: skip
    lines = [f"# {title}"]
    for kind in SECTIONS:
        rows = (
            DERIVED[kind](records)
            if kind in DERIVED
            else [r for r in records if r.get("kind") == kind]
        )
        lines += section(kind, rows) if rows else []
    return "\n".join(lines + notes(records)) + "\n"


if __name__ == "__main__":
    source = pathlib.Path(sys.argv[1])
    print(markdown(json.loads(source.read_text()), title=source.stem), end="")
