"""The one report generator, from JSON records alone: markdown (a table per record kind, a
column per field; speedups of solver cases) and PNG plots (``python -m benchmarks.report``)."""

import json
import pathlib
import sys

try:  # the plots only: a machine without matplotlib (a lent TPU) still writes its tables
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

ENVIRONMENT = {"kind", "backend", "device", "device_count", "host_cpus", "blas_threads",
               "versions", "date", "suite", "quick", "suite_wall_s"}  # fmt: skip
HIDDEN = ENVIRONMENT | {"group", "gtol", "max_steps", "notes", "first_call_s"}
SECTIONS = {  # kind: (title, text)
    "speedup": ("Speedups over {}: its time / the time of each method",
                "Per case, one interleaved loop (above 1: faster than the case's first method; "
                "`*`: extrapolated from the first `rows_solved` rows)."),
    "case": ("All measurements", "`*_vs_reference`, `max_rel_obj_diff`, `rows_*`: against the "
             "case's first method; `time_vs_first_problem`: with / without the straggler row."),
    "strategy": ('strategy="split" vs strategy="mask": whole solves (public calls)',
                 "quad, LBFGS; split's time includes packing the indices from the concrete mask."),
    "memory": ("Peak memory: XLA memory of the compiled batched solve (bytes)", ""),
    "units": ("The same fit in other units (4 rows: statuses; correct digits vs MINPACK)", ""),
    "truth_summary": ("MGH least-squares problems from their standard starts", "Accurate: "
                      "relative error <= 100 sqrt(eps); truthful: CONVERGED exactly if accurate."),
    "truth": ("Every MGH row", ""),
    "deblur": ("Per-image deconvolution: scipy's L-BFGS-B loop vs fixedopt", "16 images 64x64, "
               "each its own 7x7 Gaussian blur, 10% of the pixels fixed, bounds [0, 1], stop at "
               "max |projected gradient| <= gtol (scipy: pgtol, ftol=0). `fixedopt-per-row`: "
               "`jax.scipy.signal.convolve2d` per row (vmapped); `fixedopt-vectorized`: "
               "`vectorized=True`, one grouped `lax.conv_general_dilated` over the lanes; "
               "`-shifted`: the blur as 49 shifted, scaled copies of the image (elementwise "
               "arithmetic), per row or over the lanes."),
    "curve_fit": ("fixedopt.curve_fit on the whole batch vs per-fit loops on a subsample",
                  "Decays (sd sqrt(mu), sigma given, background >= 0, tau2 fixed in half the "
                  "fits); fits/s from interleaved medians (loops: `fits_timed` fits). "
                  "Agreement on the loops' fits: free parameters and stderr vs scipy's. The loops "
                  "run in float64 in every row (`dtype`: fixedopt's)."),
    "crlb": ("Poisson maximum likelihood vs least squares on 2D spots: the Cramér–Rao bound",
             "7x7 pixels, 1000 photons, background 10/pixel, centres jittered U(-0.5, 0.5); "
             "spread: RMS error of the centres over sqrt(CRLB) from the true Fisher "
             "information; stderr: the fit's own error bars over it."),
    "tpu_gpufit": ("Gpufit's protocol on an accelerator, both precisions (tpu_peers)",
                   "As `tiny_fit`; `precision`: `profile`, fixedopt's default (float32 "
                   "products at \"highest\" on a TPU or GPU), or `default`, traded back "
                   "(`jax.default_matmul_precision(\"default\")`)."),
    "tpu_gpufit_mle": ("Gpufit's protocol by Poisson maximum likelihood (tpu_peers)",
                       "`least_squares(estimator=\"poisson\")`, Gpufit's options; "
                       "`rows_at_max_steps`: rows that took all `max_steps` (10)."),
    "tpu_keep_fixed": ("keep_fixed(adam) against plain adam (tpu_peers)", "100 steps in one "
                       "`fori_loop`, interleaved medians; `*_bytes_per_entry`: one donated "
                       "step by XLA's cost analysis of this backend's program (floor 28); "
                       "`loop_mask_bytes_per_entry`: what the mask adds to a loop step."),
    "tiny_published": ("Published reference figures (cited, NOT measured in this run)", ""),
    "tiny_fit": ("fixedopt fits", "Gpufit protocol (`options` gpufit): float32, ftol=1e-4 "
                 "(relative reduction of chi-square), max_steps=10, gtol=xtol=0 (Gpufit has no "
                 "such tests), default lanes. Decay: default options. "
                 "`program_bytes_per_row`: XLA's bytes accessed by the whole program per row (a "
                 "while body counted once); `rel_err_*`: median over fits vs the truth."),
    "tiny_loop": ("Per-fit loops on a subsample (float64 on the same data)", "`vs_fixedopt_*`: "
                  "max over free parameters of |x_loop - x_fixedopt| / |truth|, median and max "
                  "over fits; `evaluations_mean`: residual evaluations per fit."),
    "tiny_bytes": ("Bytes accessed per row by one step vs the floor", "The program of two "
                   "unrolled steps less the program of one (XLA's cost analysis); floor: the "
                   "row's data and parameters read and the parameters written once (float32)."),
    "minimize_summary": ("minimize (LBFGS: defaults, and scaling=\"hessian\") on "
                         "fixedopt.testing_problems.MINIMIZE: problem x start x dtype x "
                         "objective scale",
                         "Accurate: `f - f* <= sqrt(eps) max(|f*|, "
                         "eps (f(x0) - f*))`, `f*` from scipy's float64 polish of the returned "
                         "point; truthful: CONVERGED exactly if accurate."),
    "minimize_lie": ("minimize rows whose status does not tell the truth", ""),
    "minimize_truth": ("Every minimize row", ""),
    "family_summary": ("Status-truth families of issue 59 (benchmarks/status_families.py)",
                       "units_bounded: three bounded least-squares fits (a spectral unmixing "
                       "with its minimum on a bound, a linear fit in a box, a decay), starts "
                       "inside the box and on its bounds, residuals, parameters and both in "
                       "units 10^k (float64: k = -20..20, float32: -10..10), LM and GN; "
                       "underflow: x - t and a line (curve_fit) in units where |r|^2 "
                       "underflows; biexponential: 256 CSF-like voxels (T2 8-25 ms and "
                       "1000-2500 ms, echoes 10-320 ms, Rician noise, bounds). Accurate: "
                       "parameters within 100 sqrt(eps) of scipy's float64 trf polish, or "
                       "the cost within sqrt(eps) of its minimum; truthful: CONVERGED "
                       "exactly if accurate."),
    "units_invariance": ("Bounded fits: the verdicts across units (one: invariant)", ""),
    "units_bounded": ("Every bounded fit in other units", ""),
    "underflow": ("Every fit whose cost underflows", ""),
    "biexponential": ("Every bi-exponential voxel", ""),
}  # fmt: skip


def cell(value) -> str:
    """A measurement as text: floats to 4 digits, booleans yes/NO, lists joined, None —."""
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return "—" if value is None else str(value)


def table(rows: list[dict]) -> list[str]:
    """A markdown table, one column per field of any row (in order of appearance)."""
    columns = list(dict.fromkeys(k for r in rows for k in r if k not in HIDDEN))
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
        *("| " + " | ".join(cell(r.get(k)) for k in columns) + " |" for r in rows),
    ]


def speedup_tables(records) -> list[tuple[list[dict], str]]:
    """Speedup rows per case, one table per reference (straggler cases apart)."""
    cases: dict[tuple, list[dict]] = {}
    for r in records:
        if r.get("kind") == "case":
            cases.setdefault((r["group"], r["problem"], r["dtype"], r["B"], r["n"]), []).append(r)
    tables: dict[tuple, list[dict]] = {}
    star = lambda r: "*" if r["rows_solved"] < r["B"] else ""  # extrapolated
    for (group, problem, dtype, batch, n), methods in cases.items():
        reference = methods[0]
        if "skipped" in reference:
            continue
        seconds = reference["time_median_s"]
        row = {"problem": problem, "dtype": dtype, "B": batch, "n": n,
               f"{reference['method']} (s)": f"{seconds:.3g}{star(reference)}"}  # fmt: skip
        for r in methods[1:]:
            row[r["method"]] = "skipped"
            if "skipped" not in r:
                ratio = seconds / r["time_median_s"]
                row[r["method"]] = f"{ratio:.3g}x{star(r) or star(reference)}"
        tables.setdefault((reference["method"], "+" in group), []).append(row)
    return [(rows, reference) for (reference, _), rows in tables.items()]


def section(kind: str, rows: list[dict], reference="") -> list[str]:
    title, text = SECTIONS[kind]
    title = title.format(reference)
    return ["", f"## {title}", "", *([text, ""] if text else []), *table(rows)]


def notes(records) -> list[str]:
    """Environment, how times were taken, and the notes of every method."""
    env = records[0]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    lines = ["", "## Notes", "",
             f"- backend `{env['backend']}`, device `{env['device']}`, {env['host_cpus']} host "
             f"CPUs (BLAS threads: {env['blas_threads']}); {versions}; whole suite "
             f"{env['suite_wall_s'] / 60:.1f} min.",
             "- Times: medians of calls interleaved across methods (A B C A B C ...), each "
             "blocked until ready; compile time apart. Only ratios mean much on a shared "
             "machine."]  # fmt: skip
    cases = [r for r in records if r.get("kind") == "case"]
    if cases:
        gtols = ", ".join(sorted({f"{r['dtype']}: {r['gtol']:g}" for r in cases}))
        lines.append(f"- Tolerance {gtols} (max-norm of the projected gradient on free entries). "
                     "`converged_frac`: as the method reports it; `gtol_met_frac`: re-evaluated "
                     "in NumPy float64; `fixed_bit_identical`: every fixed entry has its exact "
                     "starting bits.")  # fmt: skip
    method_notes: dict[str, set] = {}
    for r in cases:
        method_notes.setdefault(r["method"], set()).update(r.get("notes", []))
    return lines + [f"- `{m}`: {'; '.join(sorted(n))}." for m, n in method_notes.items() if n]


def markdown(records: list[dict], title: str) -> str:
    """The whole report of a run: speedups, one section per kind, notes."""
    if records and records[0].get("kind") == "ase":
        r = records[0]
        return (f"# {title}\n\nASE BFGS vs one batched fixedopt solve, from `notebooks/"
                f"{r['notebook']}` (ase {r['ase']}, jax {r['versions']['jax']}, device "
                f"{r['device']}). One run: absolute times drift; the speedup compares times of "
                f"the same run.\n\n{r['table']}")  # fmt: skip
    lines = [f"# {title}"]
    for table_and_reference in speedup_tables(records):
        lines += section("speedup", *table_and_reference)
    for kind in list(SECTIONS)[1:]:
        rows = [r for r in records if r.get("kind") == kind]
        lines += section(kind, rows) if rows else []
    return "\n".join(lines + notes(records)) + "\n"


def time_plot(records, axis_key: str, fixed_key: str):
    """One panel per (problem, dtype, other size) with a line of >= 2 points; None if none."""
    panels: dict[str, dict[str, list]] = {}
    for r in records:
        title = f"{r['problem']} {r['dtype']}, {fixed_key}={r[fixed_key]}"
        line = panels.setdefault(title, {}).setdefault(r["method"], [])
        line.append((r[axis_key], r["time_median_s"]))
    panels = {t: lines for t, lines in panels.items() if max(map(len, lines.values())) >= 2}
    if not panels:
        return None
    columns, rows = min(3, len(panels)), -(-len(panels) // 3)
    figure, axes = plt.subplots(rows, columns, squeeze=False, figsize=(5 * columns, 4 * rows))
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (title, lines) in zip(axes.flat, panels.items()):
        for method, points in lines.items():
            axis.plot(*zip(*sorted(points)), marker="o", label=method)
        axis.set(xscale="log", yscale="log", title=title, xlabel=axis_key, ylabel="median time (s)")
        axis.legend(fontsize=7)
    figure.suptitle(f"time vs {axis_key} (loops and jaxopt: extrapolated on large batches)")
    return figure


def speedup_plot(records):
    """Bars: time of the scipy loop / time of each other method, per case it ran in."""
    cases: dict[tuple, dict[str, float]] = {}
    for r in records:
        key = (r["problem"], r["dtype"][-2:], r["B"], r["n"])
        cases.setdefault(key, {})[r["method"]] = r["time_median_s"]
    cases = {key: t for key, t in cases.items() if next(iter(t)).startswith("scipy")}
    if not cases:
        return None
    figure, axis = plt.subplots(figsize=(min(20, max(8, 1.2 * len(cases))), 5.5))
    methods = list(dict.fromkeys(m for times in cases.values() for m in list(times)[1:]))
    width = 0.8 / max(len(methods), 1)
    for j, method in enumerate(methods):
        bars = [(i + j * width, next(iter(t.values())) / t[method])
                for i, t in enumerate(cases.values()) if method in t]  # fmt: skip
        axis.bar(*zip(*bars), width, label=method)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))])
    axis.set_xticklabels([f"{p} {d}\nB={b} n={n}" for p, d, b, n in cases], fontsize=7)
    axis.set(yscale="log", ylabel="speedup vs the scipy loop (×)",
             title="time of the scipy loop / time of each method (higher is faster)")  # fmt: skip
    axis.legend(fontsize=7, ncol=2)
    return figure


def save_plots(records, stem: pathlib.Path) -> list[pathlib.Path]:
    """Write the plots of the solver cases (not the straggler groups); return their paths
    (none without matplotlib)."""
    if plt is None:
        return []
    timed = [r for r in records if r.get("kind") == "case" and "skipped" not in r
             and r["group"] == r["problem"]]  # fmt: skip
    figures = {"time-vs-B": time_plot(timed, "B", "n"), "time-vs-n": time_plot(timed, "n", "B"),
               "speedup": speedup_plot(timed)}  # fmt: skip
    written = []
    for name, figure in figures.items():
        if figure is not None:
            written.append(stem.with_name(f"{stem.name}-{name}.png"))
            figure.tight_layout()
            figure.savefig(written[-1], dpi=110)
            plt.close(figure)
    return written


if __name__ == "__main__":
    source = pathlib.Path(sys.argv[1])
    print(markdown(json.loads(source.read_text()), title=source.stem), end="")
