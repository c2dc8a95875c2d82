"""``multistart``: K starts per row through one batched solve; each row keeps its best."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._inputs.notices import warn_if_float64_dropped
from fixedopt._inputs.validate import (
    PyTree,
    batch_size,
    check_params,
    fixed_arrays,
    normalize_bounds,
    normalize_values,
)
from fixedopt._objective.arguments import args_tuple, batched_args
from fixedopt._results.solution import Solution

ROW_DATA = ("sigma", "counts")  # least_squares' keywords that carry one array per row


def multistart(
    solve: Callable[..., Solution],
    fun: Callable[..., Any],
    x0: Any,
    fixed: Any,
    *,
    starts: int | PyTree = 8,
    key: int | jax.Array = 0,
    spread: float = 1.0,
    fixed_values: Any = None,
    bounds: Any = None,
    args: tuple[Any, ...] | list[Any] = (),
    batched: bool = False,
    args_axes: Any = None,
    return_all: bool = False,
    **options: Any,
) -> Solution | tuple[Solution, Solution, jax.Array]:
    """Solve from several starts per row in one batched solve; keep each row's best.

    ``solve`` is :func:`fixedopt.least_squares` or :func:`fixedopt.minimize`; the
    ``K * B`` problems (``K`` starts of ``B`` rows) go through ONE batched call of it,
    on the same lanes (a row that converges early frees its lane for another start),
    so K starts cost about K times the rows, not K compilations or K loops. Per-row
    ``args`` (and ``sigma``, ``counts``) are repeated for every start; shared ones stay
    shared. Fixed entries are the same bits in every start and in the result.

    Each row keeps the start with the lowest ``value`` among its ``CONVERGED`` starts,
    else the lowest finite ``value`` (values within ``sqrt(eps)``, relative, of the
    lowest are ties, won by the lowest start index: ``x0`` first), and reports that
    start's ``status``, ``reason`` and ``steps``: a row is ``CONVERGED`` only if the
    start it reports converged.

    The drawn starts (``starts`` an int), for each free entry of ``x0``:

    * both bounds finite: uniform in ``[lower, upper)``;
    * otherwise ``x0`` times ``10**v`` (with one finite bound: the bound plus, or
      minus, the distance of ``x0`` to it, 1 where ``x0`` is on it, times ``10**v``;
      with none and ``x0 == 0``: uniform in ``[-1, 1)``). The odd starts (1, 3, 5, ...)
      move the whole start by whole decades, ``v`` = -1, 1, -2, 2, ...: a guess is
      most often wrong in its orders of magnitude (units), all parameters together.
      The even ones scatter each entry on its own, ``v`` uniform in
      ``[-spread, spread)``. Signs are kept.

    Args:
      solve: :func:`fixedopt.least_squares` or :func:`fixedopt.minimize` (or a
        callable with their signature and keywords).
      fun: the objective (or residual function) of ONE problem, as for ``solve``.
      x0: the first start of every row (start 0): the solution of start 0 is what
        ``solve`` alone returns from ``x0``.
      fixed: the fixed mask, as for ``solve``.
      starts: an int ``K >= 1``: ``x0`` and ``K - 1`` starts drawn per row (above);
        or a tree like ``x0`` with a leading axis of ``K - 1`` more starts of your
        own (``(K - 1, B, ...)`` per leaf with ``batched=True``); their fixed entries
        are replaced by the fixed values.
      key: the seed of the draws, an int or a ``jax.random`` key.
      spread: decades either way of the scattered (even) starts' entries.
      fixed_values: as for ``solve`` (by default the entries of ``x0``).
      bounds: as for ``solve``; the drawn starts lie inside them.
      args: as for ``solve``.
      batched: as for ``solve``: ``False`` (the default) solves one problem from K
        starts.
      args_axes: as for ``solve``.
      return_all: also return the solutions of every start and the start each row kept.
      **options: every other keyword of ``solve`` (``solver``, ``max_steps``,
        ``lanes``, ``sigma``, ``loss``, ...).

    Returns:
      The best :class:`fixedopt.Solution` of each row, shaped as ``solve``'s. With
      ``return_all=True``, ``(best, every, chosen)``: ``every`` a ``Solution`` whose
      leaves have a leading axis of ``K`` (``every.x[k]`` solved from start ``k``),
      ``chosen`` the index of the start each row kept (``int32``, ``(B,)`` or ``()``).

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> t = jnp.linspace(0.0, 4.0, 9)
      >>> y = 5.0 * jnp.exp(-1.5 * t)
      >>> decay = lambda p: p[0] * jnp.exp(-p[1] * t) - y
      >>> x0 = jnp.array([1.0, -3.0])  # a growth rate: a bad start for a decay
      >>> best, every, chosen = fixedopt.multistart(
      ...     fixedopt.least_squares, decay, x0, False, starts=4, return_all=True)
      >>> print(best.x.round(4), bool(best.converged), every.x.shape)
      [5.  1.5] True (4, 2)
    """
    inputs = {"x0": x0, "fixed_values": fixed_values, "bounds": bounds, "args": args}
    warn_if_float64_dropped(inputs | {name: options.get(name) for name in ROW_DATA})
    check_params(x0, "x0")
    x0 = jax.tree.map(jnp.asarray, x0)
    args = args_tuple(args)
    if not batched:
        return _one_problem(solve, fun, x0, fixed, starts, key, spread, fixed_values,
                            bounds, args, return_all, options)  # fmt: skip
    batch = batch_size(x0)
    mask = fixed_arrays(fixed, x0)
    values = x0 if fixed_values is None else normalize_values(fixed_values, x0)
    limits = normalize_bounds(bounds, x0)
    more = _more_starts(starts, x0, limits, key, spread)
    count = 1 + jax.tree.leaves(more)[0].shape[0]
    begin, mask, values, limits = _begin(more, x0, mask, values, limits, count)
    flags = batched_args(args, args_axes, batch, {"x0": x0})
    every = solve(
        fun, begin, mask, fixed_values=values, bounds=limits,
        args=_repeat_args(args, flags, count), batched=True,
        args_axes=_axes(args, flags), **_repeat_row_data(options, count),
    )  # fmt: skip
    best, every, chosen = _choose(every, count)
    return (best, every, chosen) if return_all else best


def _one_problem(
    solve: Callable[..., Solution], fun: Callable[..., Any], x0: PyTree, fixed: Any,
    starts: Any, key: Any, spread: float, fixed_values: Any, bounds: Any,
    args: tuple[Any, ...], return_all: bool, options: dict[str, Any],
) -> Solution | tuple[Solution, Solution, jax.Array]:  # fmt: skip
    """``multistart`` of one problem: a batch of one row, all ``args`` shared."""

    def row(tree: PyTree) -> PyTree:
        return jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], tree)

    mask = fixed_arrays(fixed, x0)
    values = x0 if fixed_values is None else normalize_values(fixed_values, x0)
    limits = normalize_bounds(bounds, x0)
    given = starts if isinstance(starts, int) else jax.tree.map(lambda s: s[:, None], starts)
    options = {
        name: (value if name not in ROW_DATA or jnp.ndim(value) == 0 else row(value))
        for name, value in options.items()
    }
    result = multistart(
        solve, fun, row(x0), row(mask), starts=given, key=key, spread=spread,
        fixed_values=row(values), bounds=None if limits is None else row(limits), args=args,
        batched=True, args_axes=tuple(None for _ in args), return_all=True, **options,
    )  # fmt: skip
    best, every, chosen = _unrow(result)  # return_all=True: a tuple
    return (best, every, chosen) if return_all else best


@jax.jit
def _unrow(
    result: tuple[Solution, Solution, jax.Array],
) -> tuple[Solution, Solution, jax.Array]:
    """``(best, every, chosen)`` of a batch of one row, without the row axis (one
    program, not one a field)."""
    best, every, chosen = result
    best = jax.tree.map(lambda leaf: leaf[0], best)
    every = jax.tree.map(lambda leaf: leaf[:, 0], every)
    return best, every, chosen[0]


def best_start(value: jax.Array, converged: jax.Array) -> jax.Array:
    """Per row (axis 1), the start (axis 0) with the lowest ``value`` among the
    converged starts, else the lowest finite ``value``; 0 where no value is finite.
    Values within ``sqrt(eps)`` (relative) of the lowest are equal: the first of
    them wins, so that a start that found the same minimum again (at rounding level,
    or a permutation of it) does not displace ``x0``'s."""
    finite = jnp.isfinite(value)
    trusted = converged & finite
    pool = jnp.where(trusted.any(axis=0), trusted, finite)
    lowest = jnp.min(jnp.where(pool, value, jnp.inf), axis=0, keepdims=True)
    tolerance = jnp.sqrt(jnp.finfo(value.dtype).eps) * jnp.abs(lowest)
    equal = pool & (value <= lowest + tolerance)
    return jnp.argmax(equal, axis=0).astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=1)
def _choose(every: Solution, count: int) -> tuple[Solution, Solution, jax.Array]:
    """``(best, every, chosen)`` from the solutions of ``count`` starts of every row,
    start-major: one program, not one small program per operation and field (the
    choice is selects and comparisons, the same bits either way)."""
    every = jax.tree.map(lambda leaf: leaf.reshape(count, -1, *leaf.shape[1:]), every)
    chosen = best_start(every.value, every.converged)
    best = jax.tree.map(lambda leaf: _take(leaf, chosen), every)
    return best, every, chosen


def _take(leaf: jax.Array, chosen: jax.Array) -> jax.Array:
    """Each row's entry of ``leaf`` (``(K, B, ...)``) at its start ``chosen`` (``(B,)``)."""
    index = chosen.reshape(1, -1, *([1] * (leaf.ndim - 2)))
    return jnp.take_along_axis(leaf, index, axis=0)[0]


def _more_starts(starts: Any, x0: PyTree, bounds: Any, key: Any, spread: float) -> PyTree:
    """The starts after ``x0``, a tree like ``x0`` with a leading axis of ``K - 1``:
    the given ones, or drawn (:func:`draw_starts`, in one program)."""
    if isinstance(starts, bool) or not isinstance(starts, int):
        return jax.tree.map(lambda s, leaf: jnp.asarray(s, leaf.dtype), starts, x0)
    if starts < 1:
        raise ValueError(f"`starts` must be at least 1 (x0 itself), got {starts}")
    key = jax.random.key(key) if isinstance(key, int) else key
    return _draw_in_one_program(x0, bounds, starts - 1, key, spread)


@functools.partial(jax.jit, static_argnums=5)
def _begin(
    more: PyTree, x0: PyTree, mask: PyTree, values: PyTree, bounds: Any, count: int
) -> tuple[PyTree, PyTree, PyTree, Any]:
    """The batched solve's inputs, ``count * B`` start-major rows: every start (``x0``,
    then ``more``, their fixed entries the fixed values), the mask, the fixed values
    and the bounds repeated for every start. One program (copies and selects)."""

    def pin(s: jax.Array, leaf: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        return jnp.concatenate([leaf[None], jnp.where(m[None], v[None], s)])

    begin = _stack(jax.tree.map(pin, more, x0, mask, values))
    limits = None if bounds is None else _tile(bounds, count)
    return begin, _tile(mask, count), _tile(values, count), limits


def ladder(count: int) -> list[int]:
    """The whole-start decades of the first ``count`` drawn starts: -1, 1, -2, 2, ...
    for odd starts (1, 3, 5, ...); 0 (scattered entry by entry) for even ones."""
    return [
        0 if j % 2 == 0 else (1 if j % 4 == 3 else -1) * (j + 1) // 4 for j in range(1, count + 1)
    ]


@functools.partial(jax.jit, static_argnums=2)
def _draw_in_one_program(
    x0: PyTree, bounds: Any, count: int, key: jax.Array, spread: float
) -> PyTree:
    """:func:`draw_starts` compiled as one program (some 40 small ones eagerly);
    ``spread`` traced, as a user may give it as an array."""
    return draw_starts(x0, bounds, count, key, spread)


def draw_starts(x0: PyTree, bounds: Any, count: int, key: Any, spread: float) -> PyTree:
    """``count`` starts per row, a tree like ``x0`` with a leading axis of ``count``:
    uniform in a finite box; elsewhere ``x0`` (or its distance to its one bound)
    times ``10**v``: for the odd starts ``v`` is one whole number of decades for the
    whole start (-1, 1, -2, 2, ...: :func:`ladder`), for the even ones one per entry,
    uniform in ``[-spread, spread)``."""
    key = jax.random.key(key) if isinstance(key, int) else key
    leaves, tree = jax.tree.flatten(x0)
    if bounds is None:
        lower = upper = [None] * len(leaves)
    else:
        lower, upper = jax.tree.leaves(bounds[0]), jax.tree.leaves(bounds[1])
    keys = jax.random.split(key, len(leaves))
    decades = jnp.asarray(ladder(count))
    drawn = [_draw_leaf(*parts, decades, spread) for parts in zip(keys, leaves, lower, upper)]
    return jax.tree.unflatten(tree, drawn)


def _draw_leaf(
    key: jax.Array,
    leaf: jax.Array,
    lower: jax.Array | None,
    upper: jax.Array | None,
    decades: jax.Array,
    spread: float,
) -> jax.Array:
    lower = jnp.full_like(leaf, -jnp.inf) if lower is None else lower
    upper = jnp.full_like(leaf, jnp.inf) if upper is None else upper
    u = jax.random.uniform(key, (decades.shape[0], *leaf.shape), leaf.dtype)
    leaf, lower, upper = leaf[None], lower[None], upper[None]  # no implicit rank promotion
    whole = decades.reshape(-1, *([1] * (leaf.ndim - 1))).astype(leaf.dtype)
    scale = 10.0 ** jnp.where(whole == 0, spread * (2.0 * u - 1.0), whole)
    has_lower, has_upper = jnp.isfinite(lower), jnp.isfinite(upper)
    above = jnp.where(leaf > lower, leaf - lower, 1.0)  # the distance to the one bound
    below = jnp.where(leaf < upper, upper - leaf, 1.0)
    free = jnp.where(leaf == 0, 2.0 * u - 1.0, leaf * scale)
    one_sided = jnp.where(has_lower, lower + above * scale, upper - below * scale)
    box = lower + u * (upper - lower)
    return jnp.where(has_lower & has_upper, box, jnp.where(has_lower | has_upper, one_sided, free))


def _stack(starts: PyTree) -> PyTree:
    """``(K, B, ...)`` leaves as ``(K * B, ...)``: start-major rows."""
    return jax.tree.map(lambda leaf: leaf.reshape(-1, *leaf.shape[2:]), starts)


def _tile(tree: PyTree, count: int) -> PyTree:
    """Each leaf ``(B, ...)`` repeated ``count`` times along its leading axis."""
    return jax.tree.map(lambda leaf: jnp.concatenate([leaf] * count), tree)


def _repeat_args(args: tuple[Any, ...], flags: tuple[bool, ...], count: int) -> tuple[Any, ...]:
    """``args`` with each per-row leaf (``flags``) repeated ``count`` times."""
    leaves, tree = jax.tree.flatten(args)
    leaves = [jnp.concatenate([jnp.asarray(leaf)] * count) if flag else leaf
              for leaf, flag in zip(leaves, flags)]  # fmt: skip
    repeated: tuple[Any, ...] = jax.tree.unflatten(tree, leaves)
    return repeated


def _axes(args: tuple[Any, ...], flags: tuple[bool, ...]) -> PyTree:
    """The ``args_axes`` that ``flags`` mean: 0 per row, None shared (explicit, so
    that the repeated batch is not warned about again)."""
    return jax.tree.unflatten(jax.tree.structure(args), [0 if f else None for f in flags])


def _repeat_row_data(options: dict[str, Any], count: int) -> dict[str, Any]:
    """``options`` with ``sigma`` and ``counts`` (a scalar, or one entry per row)
    repeated ``count`` times."""
    repeated = dict(options)
    for name in ROW_DATA:
        value = options.get(name)
        if value is not None and jnp.ndim(value) > 0:
            repeated[name] = jnp.concatenate([jnp.asarray(value)] * count)
    return repeated
