"""``ModelResult.plot``: one fit's data, best fit, components and residuals, in lmfit's
arrangement (residuals above, data and fit below); matplotlib is imported only here."""

from __future__ import annotations

from typing import Any

import numpy as np


def plot(result: Any, row: int = 0, components: bool = True, initial: bool = False) -> Any:
    """A matplotlib ``Figure`` of fit ``row`` of ``result``: the residuals on top; the
    data, the best fit (and each component, and the initial curve, where asked) below.
    Needs matplotlib (``pip install matplotlib``)."""
    plt = _pyplot("plot")
    row, (name, x) = result.check_row(row), _independent(result, row)
    figure, (top, bottom) = plt.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 4]}, figsize=(6.4, 5.6)
    )
    top.plot(x, result.residual[row], "o", markersize=2)
    top.axhline(0.0, color="0.5", linewidth=0.8)
    top.set_ylabel("residual")
    _data_and_fits(bottom, result, row, x, initial)
    if components and len(result.model.components) > 1:
        for label, curve in result.eval_components(row=row).items():
            bottom.plot(x, np.broadcast_to(np.asarray(curve), x.shape), ":", label=label)
    bottom.set_xlabel(name)
    bottom.legend()
    top.set_title(f"{result.model!r}, fit {row}", fontsize="small")
    return figure


def plot_fit(result: Any, row: int = 0, ax: Any = None, show_init: bool = False) -> Any:
    """lmfit's ``plot_fit``: fit ``row``'s data and best fit (and its start, with
    ``show_init``) on ``ax`` (a new ``Axes`` if None), which it returns."""
    plt = _pyplot("plot_fit")
    row, (name, x) = result.check_row(row), _independent(result, row)
    ax = plt.figure().add_subplot() if ax is None else ax
    _data_and_fits(ax, result, row, x, show_init)
    ax.set_xlabel(name)
    ax.legend()
    return ax


def _pyplot(caller: str) -> Any:
    """``matplotlib.pyplot``, or an ``ImportError`` saying ``caller`` needs it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(f"{caller} needs matplotlib: pip install matplotlib") from None
    return plt


def _independent(result: Any, row: int) -> tuple[str, np.ndarray]:
    """The first independent variable's name and its points in fit ``row``."""
    (name, x), *_ = result.independent.items()
    return name, np.asarray(x[row] if np.ndim(x) == 2 else x)


def _data_and_fits(ax: Any, result: Any, row: int, x: np.ndarray, initial: bool) -> None:
    """Fit ``row``'s data, its initial curve (where asked) and its best fit on ``ax``."""
    ax.plot(x, result.data[row], "o", markersize=2, label="data")
    if initial:
        ax.plot(x, result.init_fit[row], "--", label="initial fit")
    ax.plot(x, result.best_fit[row], "-", label="best fit")
