"""PNG plots of a run's solver cases, from its JSON records: time vs B, time vs n, and
the speedup of every method over the scipy loop."""

from __future__ import annotations

import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def time_plot(records, axis_key: str, fixed_key: str):
    """One panel per (problem, dtype, other size) with a line of >= 2 points; None if none."""
    panels: dict[str, dict[str, list]] = {}
    for r in records:
        title = f"{r['problem']} {r['dtype']}, {fixed_key}={r[fixed_key]}"
        panels.setdefault(title, {}).setdefault(r["method"], []).append(
            (r[axis_key], r["time_median_s"])
        )
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


def save_all(records, stem: pathlib.Path) -> list[pathlib.Path]:
    """Write the plots of the solver cases (not the straggler groups); return their paths."""
    timed = [r for r in records if r.get("kind") == "case" and "skipped" not in r
             and r["group"] == r["problem"]]  # fmt: skip
    if not timed:
        return []
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
