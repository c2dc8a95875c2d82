"""PNG plots of a run's solver cases, from its JSON records: time vs B, time vs n, and
the speedup of every method over the scipy reference loop."""

from __future__ import annotations

import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

REFERENCES = ("scipy-lbfgsb-loop", "scipy-least-squares-loop")


def panels(records, fixed_key: str, axis_key: str) -> list[tuple[str, dict]]:
    """One panel per (problem, dtype, fixed size) with a series of >= 2 points."""
    series: dict[tuple, dict[str, list]] = {}
    for r in records:
        key = (r["problem"], r["dtype"], r[fixed_key])
        series.setdefault(key, {}).setdefault(r["method"], []).append(
            (r[axis_key], r["time_median_s"])
        )
    return [(f"{p} {d}, {fixed_key}={v}", {m: sorted(pts) for m, pts in s.items()})
            for (p, d, v), s in series.items() if max(map(len, s.values())) >= 2]  # fmt: skip


def time_plot(records, path: pathlib.Path, fixed_key: str, axis_key: str) -> bool:
    found = panels(records, fixed_key, axis_key)
    if not found:
        return False
    columns = min(3, len(found))
    figure, axes = plt.subplots(-(-len(found) // columns), columns, squeeze=False,
                                figsize=(5 * columns, 3.8 * -(-len(found) // columns)))  # fmt: skip
    for axis in axes.flat[len(found) :]:
        axis.set_visible(False)
    for axis, (title, series) in zip(axes.flat, found):
        for method, points in series.items():
            style = "--" if method in REFERENCES else "-"
            axis.plot(*zip(*points), marker="o", label=method, linestyle=style)
        axis.set(xscale="log", yscale="log", title=title, xlabel=axis_key, ylabel="median time (s)")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    figure.suptitle(f"time vs {axis_key} (loops and jaxopt: extrapolated on large batches)")
    return save(figure, path)


def speedup_plot(records, path: pathlib.Path) -> bool:
    """Bars: time of the reference loop / time of each method, per case."""
    cases: dict[tuple, dict[str, float]] = {}
    for r in records:
        cases.setdefault((r["problem"], r["dtype"], r["B"], r["n"]), {})[r["method"]] = r[
            "time_median_s"
        ]
    rows = [(case, {m: times[ref] / t for m, t in times.items() if m not in REFERENCES})
            for case, times in cases.items() for ref in REFERENCES if ref in times]  # fmt: skip
    if not rows:
        return False
    methods = list(dict.fromkeys(m for _, speedups in rows for m in speedups))
    figure, axis = plt.subplots(figsize=(min(20, max(8, 1.2 * len(rows))), 5.5))
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        xs = [i + j * width for i, (_, s) in enumerate(rows) if method in s]
        axis.bar(xs, [s[method] for _, s in rows if method in s], width, label=method)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
    axis.set_xticklabels([f"{p} {d[-2:]}\nB={b} n={n}" for (p, d, b, n), _ in rows], fontsize=7)
    axis.set(yscale="log", ylabel="speedup vs the scipy loop (×)",
             title="time of the scipy loop / time of each method (higher is faster)")  # fmt: skip
    axis.grid(True, axis="y", which="both", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    return save(figure, path)


def save(figure, path: pathlib.Path) -> bool:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def save_all(records, stem: pathlib.Path) -> list[pathlib.Path]:
    """Write ``<stem>-time-vs-B.png``, ``-time-vs-n.png``, ``-speedup.png`` from the
    solver cases that ran (not the straggler group); return those written."""
    timed = [r for r in records if r.get("kind") == "case" and "skipped" not in r
             and r["group"] == r["problem"]]  # fmt: skip
    draw = {"time-vs-B": lambda p: time_plot(timed, p, "n", "B"),
            "time-vs-n": lambda p: time_plot(timed, p, "B", "n"),
            "speedup": lambda p: speedup_plot(timed, p)}  # fmt: skip
    paths = {name: stem.with_name(f"{stem.name}-{name}.png") for name in draw}
    return [path for name, path in paths.items() if draw[name](path)]
