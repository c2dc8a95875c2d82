"""How named parameters become the arrays of one batched ``least_squares`` call.

A :class:`Layout` is the static part (hashable: a new batch with the same names and
ties reuses the compiled solve): which parameters are fitted (the vector ``p`` of each
fit) and which are tied, in the order their expressions must run. :func:`arrays` is the
traced part: the start, the fixed mask, the bounds and the tie codes, one row per fit.
A parameter tied in every fit is not in ``p``; one tied in some fits is, fixed in those
(its entry never moves) while its value there is its expression's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._models.expressions import Expression, parse
from fixedopt._models.parameters import Parameter, Parameters


@dataclasses.dataclass(frozen=True)
class Tie:
    """A tied parameter: its ``expressions`` (one per distinct ``expr``), and ``column``,
    its column of the tie codes (``None``: tied by ``expressions[0]`` in every fit)."""

    name: str
    expressions: tuple[Expression, ...]
    column: int | None


@dataclasses.dataclass(frozen=True)
class Layout:
    """The names of a fit: ``names`` (all, in order), ``vector`` (those fitted), and the
    ``ties`` in the order they are computed."""

    names: tuple[str, ...]
    vector: tuple[str, ...]
    ties: tuple[Tie, ...]

    def values(
        self, p: jax.Array, codes: jax.Array | None, only: frozenset[str] | None = None
    ) -> dict[str, jax.Array]:
        """Every parameter's value for ONE fit, from its vector ``p`` and tie codes (of
        the ties in ``only``, where given: the curve needs no derived ``fwhm``)."""
        values: dict[str, jax.Array] = {name: p[i] for i, name in enumerate(self.vector)}
        for tie in self.ties:
            if only is not None and tie.name not in only:
                continue
            tied = [jnp.asarray(e(values), p.dtype) for e in tie.expressions]
            if tie.column is None or codes is None:
                values[tie.name] = tied[0]
            else:
                code, own = codes[tie.column], values[tie.name]
                values[tie.name] = jnp.select([code == j + 1 for j in range(len(tied))], tied, own)
        return values

    def required(self, names: tuple[str, ...]) -> frozenset[str]:
        """``names`` and every parameter their ties read, directly or not."""
        need = set(names)
        for tie in reversed(self.ties):  # each tie comes after those it reads
            if tie.name in need:
                need.update(*(e.names for e in tie.expressions))
        return frozenset(need)

    @property
    def computed(self) -> tuple[str, ...]:
        """The names a tie computes (in every fit or in some), in the order of ``names``."""
        tied = {tie.name for tie in self.ties}
        return tuple(name for name in self.names if name in tied)


class Arrays(NamedTuple):
    """The traced part of a fit, one row per fit (``B`` rows, ``k`` fitted)."""

    p0: np.ndarray  # (B, k)
    fixed: np.ndarray  # (B, k) bool
    lower: np.ndarray  # (B, k)
    upper: np.ndarray  # (B, k)
    codes: np.ndarray | None  # (B, number of per-fit ties) int32; 0: not tied
    bounded: bool  # whether any bound is finite


def _row_exprs(parameter: Parameter, rows: int) -> tuple[str | None, ...]:
    expr = parameter.expr
    if isinstance(expr, tuple):
        return expr
    return (expr if isinstance(expr, str) else None,) * rows


def layout(params: Parameters, rows: int) -> Layout:
    """The :class:`Layout` of ``params`` for ``rows`` fits; a ``ValueError`` names a tie
    to an unknown parameter or a circle of ties."""
    names = tuple(params)
    vector, ties, column = [], {}, 0
    for name, parameter in params.items():
        exprs = _row_exprs(parameter, rows)
        distinct = tuple(dict.fromkeys(e for e in exprs if e is not None))
        everywhere = all(e is not None for e in exprs) and len(distinct) == 1
        if not everywhere:
            vector.append(name)
        if distinct:
            parsed = tuple(parse(e, name) for e in distinct)
            ties[name] = Tie(name, parsed, None if everywhere else column)
            column += 0 if everywhere else 1
    for tie in ties.values():
        for expression in tie.expressions:
            unknown = sorted(expression.names - set(names))
            if unknown:
                raise ValueError(
                    f"`expr` of {tie.name!r} ({expression.source!r}) names unknown "
                    f"parameters {unknown}; the parameters are {list(names)}"
                )
    return Layout(names, tuple(vector), _in_order(ties))


def _in_order(ties: dict[str, Tie]) -> tuple[Tie, ...]:
    """The ties, each after the ties its expressions read (a depth-first sort)."""
    done: dict[str, Tie] = {}
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in done or name not in ties:
            return
        if name in visiting:
            circle = " -> ".join([*visiting[visiting.index(name) :], name])
            raise ValueError(f"the ties (`expr`) form a circle: {circle}")
        visiting.append(name)
        for expression in ties[name].expressions:
            for other in sorted(expression.names):
                visit(other)
        visiting.pop()
        done[name] = ties[name]

    for name in ties:
        visit(name)
    return tuple(done.values())


def arrays(params: Parameters, plan: Layout, rows: int, dtype: Any) -> Arrays:
    """The start, fixed mask, bounds and tie codes of ``params`` for ``rows`` fits."""
    columns = [params[name] for name in plan.vector]

    def row(a: Any, kind: Any) -> np.ndarray:
        return np.broadcast_to(np.asarray(a, kind), (rows,))

    lower = np.stack([row(p.min, float) for p in columns], axis=1)
    upper = np.stack([row(p.max, float) for p in columns], axis=1)
    fixed = np.stack([~row(p.vary, bool) for p in columns], axis=1)
    held = fixed.copy()  # vary=False, where no tie computes the value
    codes = np.zeros((rows, sum(t.column is not None for t in plan.ties)), np.int32)
    for tie in plan.ties:
        if tie.column is not None:
            sources = [e.source for e in tie.expressions]
            exprs = _row_exprs(params[tie.name], rows)
            codes[:, tie.column] = [0 if e is None else sources.index(e) + 1 for e in exprs]
            fixed[:, plan.vector.index(tie.name)] |= codes[:, tie.column] > 0
            held[:, plan.vector.index(tie.name)] &= codes[:, tie.column] == 0
    values = np.stack([row(p.value, float) for p in columns], axis=1)
    _check_fixed_inside(values, held, lower, upper, plan.vector)
    p0 = np.clip(values, lower, upper)
    bounded = bool(np.isfinite(lower).any() or np.isfinite(upper).any())
    return Arrays(
        p0.astype(dtype), fixed, lower.astype(dtype), upper.astype(dtype),
        codes if codes.shape[1] else None, bounded,
    )  # fmt: skip


def _check_fixed_inside(
    values: np.ndarray, held: np.ndarray, lower: np.ndarray, upper: np.ndarray,
    names: tuple[str, ...],
) -> None:  # fmt: skip
    """A ``ValueError`` where a ``vary=False`` value lies outside its ``[min, max]``:
    it would be clipped onto the bound and reported as fitted (the core API refuses a
    fixed value outside its bounds the same way)."""
    outside = held & ((values < lower) | (values > upper))
    if np.any(outside):
        row, column = (int(i) for i in np.argwhere(outside)[0])
        where = f" (fit {row})" if values.shape[0] > 1 else ""
        raise ValueError(
            f"parameter {names[column]!r} has vary=False and value {float(values[row, column])} "
            f"outside its [min, max] = [{float(lower[row, column])}, {float(upper[row, column])}]"
            f"{where}: a fixed value is kept as given, never clipped; give a value inside "
            "the bounds, or widen min/max"
        )


def initial_values(params: Parameters, rows: int) -> Mapping[str, np.ndarray]:
    """Each parameter's ``value`` as given, one per fit (lmfit's ``init_values``)."""
    return {n: np.broadcast_to(np.asarray(p.value, float), (rows,)) for n, p in params.items()}
