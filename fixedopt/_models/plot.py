"""``ModelResult.plot``: one fit's data, best fit, components and residuals, in lmfit's
arrangement (residuals above, data and fit below); matplotlib is imported only here."""

from __future__ import annotations

from typing import Any

import numpy as np


def plot(result: Any, row: int = 0, components: bool = True, initial: bool = False) -> Any:
    """A matplotlib ``Figure`` of fit ``row`` of ``result``: the residuals on top; the
    data, the best fit (and each component, and the initial curve, where asked) below.
    Needs matplotlib (``pip install matplotlib``)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plot needs matplotlib: pip install matplotlib") from None
    row = result.check_row(row)
    (name, x), *_ = result.independent.items()
    x = np.asarray(x[row] if np.ndim(x) == 2 else x)
    figure, (top, bottom) = plt.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 4]}, figsize=(6.4, 5.6)
    )
    top.plot(x, result.residual[row], "o", markersize=2)
    top.axhline(0.0, color="0.5", linewidth=0.8)
    top.set_ylabel("residual")
    bottom.plot(x, result.data[row], "o", markersize=2, label="data")
    if initial:
        bottom.plot(x, result.init_fit[row], "--", label="initial fit")
    bottom.plot(x, result.best_fit[row], "-", label="best fit")
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
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plot_fit needs matplotlib: pip install matplotlib") from None
    row = result.check_row(row)
    (name, x), *_ = result.independent.items()
    x = np.asarray(x[row] if np.ndim(x) == 2 else x)
    ax = plt.figure().add_subplot() if ax is None else ax
    ax.plot(x, result.data[row], "o", markersize=2, label="data")
    if show_init:
        ax.plot(x, result.init_fit[row], "--", label="initial fit")
    ax.plot(x, result.best_fit[row], "-", label="best fit")
    ax.set_xlabel(name)
    ax.legend()
    return ax
