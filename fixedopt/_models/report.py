"""``fit_report``: one fit of a batch, in lmfit's layout (its sections, labels and
order; numbers with ``%.10g``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fixedopt._contract.status import Status


def _number(value: float) -> str:
    return f"{value:.10g}"


def _statistics(result: Any, row: int) -> list[str]:
    return [
        "[[Fit Statistics]]",
        f"    # fitting method   = {result.estimator} (fixedopt)",
        f"    # function evals   = {int(result.nfev[row])}",
        f"    # data points      = {int(result.ndata[row])}",
        f"    # variables        = {int(result.nvarys[row])}",
        f"    chi-square         = {_number(result.chisqr[row])}",
        f"    reduced chi-square = {_number(result.redchi[row])}",
        f"    Akaike info crit   = {_number(result.aic[row])}",
        f"    Bayesian info crit = {_number(result.bic[row])}",
        f"    status             = {Status(int(result.status[row])).name}",
        *_undetermined(result, row),
    ]


def _undetermined(result: Any, row: int) -> list[str]:
    """lmfit's warning where a fit's uncertainties could not be estimated, naming the
    fitted parameters with no error (the data do not determine them) and those on a
    bound, as lmfit's report does."""
    if result.errorbars[row]:
        return []
    width = max(len(name) for name in result.varying[row]) if result.varying[row] else 0
    lines = ["##  Warning: uncertainties could not be estimated:"]
    for name in result.varying[row]:
        if np.isinf(result.stderr[name][row]):  # undetermined (NaN: the fit failed)
            lines.append(f"    {name}:{' ' * (width - len(name))}  not determined by the data")
        if result.best_values[name][row] in _bounds(result, name, row):
            lines.append(f"    {name}:{' ' * (width - len(name))}  at boundary")
    return lines


def _bounds(result: Any, name: str, row: int) -> tuple[Any, Any]:
    """``(min, max)`` of parameter ``name`` in fit ``row``, in the fit's dtype (a float32
    fit's value on the bound 0.1 is float32's 0.1)."""
    dtype, rows = result.values.dtype, result.nvarys.shape
    parameter = result.init_params[name]
    lower, upper = (np.broadcast_to(np.asarray(b, dtype), rows)[row]
                    for b in (parameter.min, parameter.max))  # fmt: skip
    return lower, upper


def _variable(result: Any, row: int, name: str, width: int) -> str:
    value = result.best_values[name][row]
    error = result.stderr[name][row]
    expr = result.init_params[name].expr
    expr = expr[row] if isinstance(expr, tuple) else expr
    line = f"    {name + ':':<{width}} {_number(value)}"
    if expr is None and name not in result.varying[row]:
        return line + " (fixed)"
    if np.isfinite(error):  # inf: undetermined by the data; NaN: the fit failed
        relative = f" ({100 * abs(error / value):.2f}%)" if value != 0 else ""
        line += f" +/- {_number(error)}{relative}"
    if expr is not None:
        return line + f" == '{expr}'"
    return line + f" (init = {_number(result.init_values[name][row])})"


def _correlations(result: Any, row: int, min_correl: float) -> list[str]:
    names = result.varying[row]
    pairs = [
        (abs(c), a, b, c)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if np.isfinite(c := float(result.correlation(a, b)[row])) and abs(c) > min_correl
    ]
    if not pairs:
        return []
    width = max(len(f"C({a}, {b})") for _, a, b, _ in pairs)
    lines = [f"[[Correlations]] (unreported correlations are < {min_correl:.3f})"]
    for _, a, b, c in sorted(pairs, reverse=True):
        lines.append(f"    {f'C({a}, {b})':<{width}} = {c:+.4f}")
    return lines


def fit_report(result: Any, row: int = 0, min_correl: float = 0.1) -> str:
    """The report of fit ``row`` of ``result`` (a ``ModelResult``)."""
    row = result.check_row(row)
    width = max(len(name) for name in result.names) + 2
    lines = ["[[Model]]", f"    {result.model!r}", *_statistics(result, row), "[[Variables]]"]
    lines += [_variable(result, row, name, width) for name in result.names]
    lines += _correlations(result, row, min_correl)
    return "\n".join(lines)


def ci_report(rows: dict[str, list[tuple[float, float]]], with_offset: bool, ndigits: int) -> str:
    """lmfit's ``ci_report`` of one fit's ``{name: [(probability, limit), ...]}``."""
    width = max(len(name) for name in rows)
    header = [" " * (width + 1)]
    header += [("_BEST_" if p < 1e-2 else f"{100 * p:.2f}%").rjust(ndigits + 5)
               for p, _ in next(iter(rows.values()))]  # fmt: skip
    lines = ["".join(header)]
    for name, pairs in rows.items():
        best = next(value for p, value in pairs if p < 1e-2)
        offset = best if with_offset else 0.0
        cells = [f" {name.ljust(width)}:"]
        for p, value in pairs:
            text = (
                f"{value:.{ndigits}f}"
                if p < 1e-2
                else f"{value - offset:{'+' if with_offset else ''}.{ndigits}f}"
            )
            cells.append(text.rjust(ndigits + 5))
        lines.append("".join(cells))
    return "\n".join(lines)
