"""PNG plots of a run, from its JSON records: time vs B, time vs n, speedup vs scipy.

``python -m benchmarks.plots benchmarks/results/<file>.json`` redraws them next to it.
"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

REFERENCES = {"scipy-lbfgsb-loop", "scipy-least-squares-loop"}


def _timed(records: Sequence[dict]) -> list[dict]:
    """Records of solver cases that ran (not skipped, not micro, not the straggler group)."""
    return [
        r for r in records if "micro" not in r and "skipped" not in r and r["group"] == r["problem"]
    ]


def _series(records, problem, dtype, fixed_key, fixed_value, axis_key):
    """``{method: [(axis value, time), ...]}`` for one problem at one fixed size."""
    series: dict[str, list] = {}
    for r in records:
        if (r["problem"], r["dtype"], r[fixed_key]) == (problem, dtype, fixed_value):
            series.setdefault(r["method"], []).append((r[axis_key], r["time_median_s"]))
    return {m: sorted(points) for m, points in series.items()}


def _panels(records, fixed_key, axis_key):
    """One panel per (problem, dtype, fixed size) whose series has >= 2 points."""
    keys = dict.fromkeys((r["problem"], r["dtype"], r[fixed_key]) for r in records)
    panels = []
    for problem, dtype, value in keys:
        series = _series(records, problem, dtype, fixed_key, value, axis_key)
        if max((len(p) for p in series.values()), default=0) >= 2:
            panels.append((f"{problem} {dtype}, {fixed_key}={value}", series))
    return panels


def _grid(count: int):
    columns = min(3, max(count, 1))
    rows = -(-max(count, 1) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), squeeze=False)
    for axis in axes.flat[count:]:
        axis.set_visible(False)
    return figure, axes.flat


def time_plot(records, path: pathlib.Path, fixed_key: str, axis_key: str) -> bool:
    panels = _panels(records, fixed_key, axis_key)
    if not panels:
        return False
    figure, axes = _grid(len(panels))
    for axis, (title, series) in zip(axes, panels):
        for method, points in series.items():
            xs, ys = zip(*points)
            axis.plot(
                xs, ys, marker="o", label=method, linestyle="--" if method in REFERENCES else "-"
            )
        axis.set(xscale="log", yscale="log", title=title, xlabel=axis_key, ylabel="median time (s)")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    figure.suptitle(
        f"time vs {axis_key} (the per-row loops and jaxopt: extrapolated from a "
        "subsample of rows on large batches; see the table)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def speedup_plot(records, path: pathlib.Path) -> bool:
    """Bars: time of the reference loop / time of each method, per case."""
    cases = list(dict.fromkeys((r["problem"], r["dtype"], r["B"], r["n"]) for r in records))
    rows = []
    for case in cases:
        by_method = {
            r["method"]: r for r in records if (r["problem"], r["dtype"], r["B"], r["n"]) == case
        }
        reference = next((by_method[m] for m in REFERENCES if m in by_method), None)
        if reference is not None:
            rows.append(
                (
                    case,
                    {
                        m: reference["time_median_s"] / r["time_median_s"]
                        for m, r in by_method.items()
                        if m not in REFERENCES
                    },
                )
            )
    if not rows:
        return False
    methods = list(dict.fromkeys(m for _, speedups in rows for m in speedups))
    figure, axis = plt.subplots(figsize=(min(20, max(8, 1.2 * len(rows))), 5.5))
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        xs = [i + j * width for i, (_, s) in enumerate(rows) if method in s]
        ys = [s[method] for _, s in rows if method in s]
        axis.bar(xs, ys, width, label=method)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
    axis.set_xticklabels([f"{p} {d[-2:]}\nB={b} n={n}" for (p, d, b, n), _ in rows], fontsize=7)
    axis.set(
        yscale="log",
        ylabel="speedup vs the scipy loop (×)",
        title="time of the scipy loop / time of each method (higher is faster)",
    )
    axis.grid(True, axis="y", which="both", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def save(records: Sequence[dict], stem: pathlib.Path) -> list[pathlib.Path]:
    """Write ``<stem>-time-vs-B.png``, ``-time-vs-n.png``, ``-speedup.png``; return those
    written (a plot with nothing to show is skipped)."""
    records = _timed(records)
    plots = {
        stem.with_name(f"{stem.name}-time-vs-B.png"): lambda p: time_plot(records, p, "n", "B"),
        stem.with_name(f"{stem.name}-time-vs-n.png"): lambda p: time_plot(records, p, "B", "n"),
        stem.with_name(f"{stem.name}-speedup.png"): lambda p: speedup_plot(records, p),
    }
    return [path for path, draw in plots.items() if draw(path)]


if __name__ == "__main__":
    source = pathlib.Path(sys.argv[1])
    for written in save(json.loads(source.read_text()), source.with_suffix("")):
        print(written)
