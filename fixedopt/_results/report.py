"""``fixedopt.report``: a batch at a glance, or one fit lmfit-style; text and HTML."""

from __future__ import annotations

import enum
import html
from typing import NamedTuple, SupportsFloat

import jax
import numpy as np
from jax.typing import ArrayLike

from fixedopt._contract.status import Reason, Status
from fixedopt._inputs import validate as _validate
from fixedopt._inputs.validate import Mask, PyTree
from fixedopt._results.covariance import Covariance
from fixedopt._results.records import flat_names, flat_rows, rows_of, written_order
from fixedopt._results.solution_fields import SolutionFields

FlatBounds = tuple[ArrayLike, ArrayLike]  # (lower, upper), broadcastable to a row's (n,)


class Report(NamedTuple):
    """A fit report: plain text with ``str()``, a table in a notebook.

    Attributes:
      title: the first line.
      facts: ``(label, text)`` pairs.
      header: the column names of ``table``.
      table: rows of cells (strings).
    """

    title: str
    facts: list[tuple[str, str]]
    header: tuple[str, ...]
    table: list[tuple[str, ...]]

    def __str__(self) -> str:
        lines = [self.title]
        width = max((len(label) for label, _ in self.facts), default=0)
        lines += [f"  {label:<{width}}  {text}" for label, text in self.facts]
        if self.table:
            cells = [self.header, *self.table]
            widths = [max(len(row[k]) for row in cells) for k in range(len(self.header))]
            for row in cells:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        escape = html.escape
        parts = [f"<b>{escape(self.title)}</b>", "<table>"]
        parts += [f"<tr><th>{escape(a)}</th><td>{escape(b)}</td></tr>" for a, b in self.facts]
        parts.append("</table>")
        if self.table:
            head = "".join(f"<th>{escape(h)}</th>" for h in self.header)
            parts.append(f"<table><tr>{head}</tr>")
            for row in self.table:
                parts.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
            parts.append("</table>")
        return "\n".join(parts)


def report(
    sol: SolutionFields,
    row: int | None = None,
    *,
    covariance: Covariance | None = None,
    fixed: Mask | None = None,
    bounds: FlatBounds | None = None,
    names: list[str] | PyTree | None = None,
) -> Report:
    """A report of a solve: the whole batch, or one fit with its parameters.

    Without ``row`` (and for a batched ``sol``): the rows by status and by
    ``reason``, steps (median and max), the largest projected gradient and its row,
    and the distribution of the objective value (the cost, for least squares). With
    ``row`` (or for an unbatched ``sol``): each parameter with its value, standard
    error and "fixed" or "at bound" (the solve's own mask and bound-active entries,
    ``sol.fixed`` and ``sol.at_bound``).

    Args:
      sol: a :class:`fixedopt.Solution`.
      row: the row to report on, for a batched ``sol``.
      covariance: a :class:`fixedopt.Covariance` of ``sol``: standard errors, fixed
        and at-bound flags come from it.
      fixed: accepted for compatibility (without ``covariance``): the solve's mask,
        which ``sol`` holds. A report describes its solve, so a mask that differs
        from ``sol.fixed`` for the row raises ``ValueError``; flags of another mask
        come with ``covariance=fixedopt.covariance(sol, fun, fixed)``.
      bounds: accepted for compatibility (without ``covariance``): ``(lower, upper)``
        broadcastable to one row's flat parameters; bounds that differ from the
        solve's (``sol.bounds``) for the row raise ``ValueError``, as ``fixed``.
      names: one name per parameter, in ``ravel_pytree`` order; or a parameter tree
        as you wrote it (the ``x0`` of the call): the parameters are then listed by
        their paths (``A1``, ``peak.width[0]``), dicts in their own key order (JAX
        sorts dict keys: ``sol.x`` has lost it). Default: the paths in sorted order.

    Returns:
      A :class:`Report`; ``print`` it, or let a notebook render it.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> t = jnp.linspace(0.0, 1.0, 6)
      >>> y = jnp.array([[1.0, 1.5, 1.9, 2.6, 3.0, 3.4], [0.1, 0.3, 0.4, 0.7, 0.8, 1.1]])
      >>> line = lambda p, y: p[0] * t + p[1] - y
      >>> fixed = jnp.array([[False, False], [False, True]])
      >>> sol = fixedopt.least_squares(line, jnp.zeros((2, 2)), fixed, args=(y,), batched=True)

    Step counts and gradients depend on the tolerances, hence the ``...``:

      >>> print(fixedopt.report(sol))  # doctest: +NORMALIZE_WHITESPACE +ELLIPSIS
      fixedopt report: 2 rows
        CONVERGED  2 rows...
        steps      median ..., max ...
        grad_norm  largest ... (row ...)
        value      min 0.0126, median 0.0131, max 0.0135
      >>> cov = fixedopt.covariance(sol, line, args=(y,))
      >>> print(fixedopt.report(sol, 1, covariance=cov, names=["slope", "intercept"]))
      ... # doctest: +NORMALIZE_WHITESPACE +ELLIPSIS
      fixedopt report: row 1, CONVERGED after ... steps
        value      0.0126
        grad_norm  ...
        parameter  value   stderr  note
        slope      1.0818  0.0479
        intercept  0       0       fixed
    """
    batch = rows_of(sol)
    if batch is not None and row is None:
        return _batch_report(sol, batch)
    if batch is not None and not (isinstance(row, (int, np.integer)) and -batch <= row < batch):
        raise ValueError(f"`row` must be an int in [-{batch}, {batch}), got {row!r}")
    return _row_report(sol, row, batch is not None, covariance, fixed, bounds, names)


def _g(value: SupportsFloat) -> str:
    return f"{float(value):.3g}"


def _code_name(codes: type[enum.IntEnum], code: int) -> str:
    try:
        return codes(code).name
    except ValueError:
        return str(code)


def _batch_report(sol: SolutionFields, batch: int) -> Report:
    status = np.asarray(sol.status)
    reason = np.asarray(sol.reason)
    facts = []
    for code in np.unique(status):
        label, chosen = _code_name(Status, int(code)), status == code
        facts.append((label, f"{int(chosen.sum())} rows"))
        for why in np.unique(reason[chosen]):
            count = int(np.sum(chosen & (reason == why)))
            facts.append((f"  {_code_name(Reason, int(why))}", f"{count} rows"))
    steps, grad_norm, value = (np.asarray(a) for a in (sol.steps, sol.grad_norm, sol.value))
    facts.append(("steps", f"median {np.median(steps):.3g}, max {int(steps.max())}"))
    facts += _finite_facts(grad_norm, value)
    return Report(f"fixedopt report: {batch} rows", facts, (), [])


def _finite_facts(grad_norm: np.ndarray, value: np.ndarray) -> list[tuple[str, str]]:
    """The worst gradient and the values of the finite rows, and apart from them the
    count of rows whose value or gradient is NaN/Inf (one such row must not hide the
    worst gradient of the others)."""
    finite = np.isfinite(grad_norm) & np.isfinite(value)
    if not np.any(finite):
        facts = [("grad_norm", "no finite row"), ("value", "no finite row")]
    else:
        worst = int(np.argmax(np.where(finite, grad_norm, -np.inf)))
        low, median, high = np.percentile(value[finite], [0, 50, 100])
        facts = [
            ("grad_norm", f"largest {_g(grad_norm[worst])} (row {worst})"),
            ("value", f"min {_g(low)}, median {_g(median)}, max {_g(high)}"),
        ]
    if not np.all(finite):
        rows = np.flatnonzero(~finite)
        shown = ", ".join(map(str, rows[:5])) + (", ..." if rows.size > 5 else "")
        facts.append(("non-finite", f"{rows.size} rows (value or grad_norm NaN/Inf: {shown})"))
    return facts


def _row_report(
    sol: SolutionFields,
    row: int | None,
    batched: bool,
    covariance: Covariance | None,
    fixed: Mask | None,
    bounds: FlatBounds | None,
    names: list[str] | PyTree | None,
) -> Report:
    def pick(field: jax.Array) -> np.ndarray:  # the row's entry of a per-row field
        return np.asarray(field)[row] if batched else np.asarray(field)

    x = flat_rows(sol.x, batched)[row if batched else 0]
    names, order = _names_and_order(names, sol.x, batched)
    if len(names) != x.size:
        raise ValueError(f"`names` must name each of the {x.size} parameters, got {len(names)}")
    stderr, is_fixed, at_bound = _flags(covariance, fixed, bounds, sol, x, row, batched)
    table: list[tuple[str, ...]] = []
    for k in order:
        name = names[k]
        note = "fixed" if is_fixed[k] else ("at bound" if at_bound[k] else "")
        error = "" if stderr is None else f"{stderr[k]:.3g}"
        table.append((name, f"{x[k]:.5g}", error, note))
    header = ("parameter", "value", "stderr", "note")
    status = _code_name(Status, int(pick(sol.status)))
    where = f"row {row}, " if batched else ""
    title = f"fixedopt report: {where}{status} after {int(pick(sol.steps))} steps"
    facts = [("value", _g(pick(sol.value))), ("grad_norm", _g(pick(sol.grad_norm)))]
    return Report(title, facts, header, table)


def _names_and_order(
    names: list[str] | PyTree | None, tree: PyTree, batched: bool
) -> tuple[list[str], list[int]]:
    """The parameters' names (in ``ravel_pytree`` order) and the order to list them
    in: as given for a list of names; the paths, in a written tree's key order."""
    if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names):
        return list(names), list(range(len(names)))
    order = None if names is None else written_order(names, tree, batched)
    paths = flat_names(tree, batched)
    return paths, list(range(len(paths))) if order is None else order


def _flags(
    covariance: Covariance | None,
    fixed: Mask | None,
    bounds: FlatBounds | None,
    sol: SolutionFields,
    x: np.ndarray,
    row: int | None,
    batched: bool,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Standard errors (None without ``covariance``), fixed and at-bound flags of one
    row's flat ``(n,)`` parameters ``x``: the covariance's, or else the solve's."""
    index = row if batched and row is not None else 0
    if covariance is not None:
        stderr = flat_rows(covariance.stderr, batched)[index]
        is_fixed = flat_rows(covariance.fixed, batched)[index].astype(bool)
        at_bound = flat_rows(covariance.at_bound, batched)[index].astype(bool)
        return stderr, is_fixed, at_bound
    is_fixed = flat_rows(sol.fixed, batched)[index].astype(bool)
    at_bound = flat_rows(sol.at_bound, batched)[index].astype(bool)
    _check_as_solved(fixed, bounds, sol, x, is_fixed, index, batched)
    return None, is_fixed, at_bound


def _check_as_solved(
    fixed: Mask | None,
    bounds: FlatBounds | None,
    sol: SolutionFields,
    x: np.ndarray,
    is_fixed: np.ndarray,
    index: int,
    batched: bool,
) -> None:
    """Raise ValueError unless ``fixed`` and ``bounds``, where given, are the solve's
    own for the row (``is_fixed``, ``sol.bounds``)."""
    hint = "a report describes its solve: leave it out, or pass `covariance=` for other flags"
    if fixed is not None:
        mask = _validate.normalize_fixed(fixed, sol.x)
        given = flat_rows(_broadcast(mask, sol.x), batched)[index].astype(bool)
        if not np.array_equal(given, is_fixed):
            raise ValueError(f"`fixed` differs from the solve's mask (sol.fixed): {hint}")
    if bounds is not None:
        given = [np.broadcast_to(np.asarray(b, x.dtype), x.shape) for b in bounds]
        solved = [np.full(x.shape, -np.inf, x.dtype), np.full(x.shape, np.inf, x.dtype)]
        if sol.bounds is not None:
            solved = [flat_rows(b, batched)[index] for b in sol.bounds]
        if not all(np.array_equal(a, b) for a, b in zip(given, solved)):
            raise ValueError(f"`bounds` differ from the solve's (sol.bounds): {hint}")


def _broadcast(mask: Mask, tree: PyTree) -> PyTree:
    return jax.tree.map(lambda m, leaf: np.broadcast_to(np.asarray(m), np.shape(leaf)), mask, tree)
