"""Objectives written for the whole lane batch (``vectorized=True``).

With ``vectorized=True``, ``fun(x, *args)`` receives the rows of a batch at once: every
leaf of ``x`` and every per-row argument with a leading axis of rows, and returns one
value per row (``(rows,)``; residuals ``(rows, ...)`` for ``least_squares``). Users
then batch their own operations (a grouped convolution, an FFT, a network forward
pass), which XLA runs far better than the ``vmap`` of a per-row kernel.

The solver loop still describes ONE row: each row's ``value_and_grad`` (and
``residual_and_jacobian``) is a ``jax.custom_batching.custom_vmap`` function whose
batching rule calls ``fun`` once on the whole lane batch, so when the lanes ``vmap`` a
step, ``fun`` runs once per evaluation on all lanes. Unbatched (one row alone: the
implicit derivative, a row's own check) it calls ``fun`` on a batch of one row. The
rows must not interact: :func:`check_rows_independent` tests that where it is cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.solver import Problem
from fixedopt._objective.call_note import count, rows_at_once_note
from fixedopt._objective.losses import flat_counts, split_data

BatchFunction = Callable[..., tuple[jax.Array, jax.Array]]


def _lane_function(batch_function: BatchFunction) -> Callable[..., tuple[jax.Array, jax.Array]]:
    """``batch_function(x, fixed, values, row_args, shared)`` (per-row operands on a
    leading axis of rows, ``shared`` as is) as a function of ONE row whose ``vmap``
    calls ``batch_function`` once on all rows."""

    @jax.custom_batching.custom_vmap
    def one_row(*operands: Any) -> tuple[jax.Array, jax.Array]:
        *per_row, shared = operands
        batch = jax.tree.map(lambda a: a[None], tuple(per_row))
        first, second = batch_function(*batch, shared)
        return first[0], second[0]

    @one_row.def_vmap
    def all_rows(
        axis_size: int, in_batched: Sequence[Any], *operands: Any
    ) -> tuple[tuple[jax.Array, jax.Array], tuple[bool, bool]]:
        *per_row, shared = operands
        if any(jax.tree.leaves(in_batched[-1])):  # a vmap over the solve itself: row by row
            return jax.vmap(one_row, in_axes=_axes(in_batched))(*operands), (True, True)

        def broadcast(a: jax.Array, batched: bool) -> jax.Array:
            return a if batched else jnp.broadcast_to(a, (axis_size, *jnp.shape(a)))

        leaves, treedef = jax.tree.flatten(tuple(per_row))
        flags = jax.tree.leaves(tuple(in_batched[:-1]))
        broadcast_leaves = [broadcast(a, batched) for a, batched in zip(leaves, flags)]
        per_row = list(jax.tree.unflatten(treedef, broadcast_leaves))
        return batch_function(*per_row, shared), (True, True)

    return one_row


def _axes(in_batched: Sequence[Any]) -> tuple[Any, ...]:
    """``vmap`` in_axes from custom_vmap's batched flags (0 or None per leaf)."""
    return tuple(
        jax.tree.map(lambda batched: 0 if batched else None, flags) for flags in in_batched
    )


def lane_problem(objective: Any, data: Any, residual_output: Callable[..., Any] | None) -> Problem:
    """The :class:`~fixedopt._contract.solver.Problem` of one row of a vectorized objective.

    ``objective`` is the row's :class:`~fixedopt._objective.problem.Objective` (its ``fun`` takes
    the lane batch), ``data`` its :class:`~fixedopt._objective.problem.RowData`;
    ``residual_output(r, jacobian, data)`` turns one row's flat residuals and Jacobian
    into ``(value, residual, jacobian)`` (a robust loss rescales them; the Poisson
    likelihood reads its counts, ``data``), None for minimize.
    """
    data = objective.differentiate.stop(data)
    unravel_rows = jax.vmap(objective.unravel)

    def fun_args(row_args: Any, shared: Any) -> tuple[Any, ...]:
        """``fun``'s args (without the Poisson counts, which ``fun`` does not get)."""
        return split_data(objective.loss, objective.merge_args(row_args, shared))[0]

    def outputs(
        x: jax.Array, fixed: jax.Array, values: jax.Array, row_args: Any, shared: Any
    ) -> jax.Array:
        rows = unravel_rows(jnp.where(fixed, values, x))
        try:
            out = objective.fun(rows, *fun_args(row_args, shared))
        except Exception as error:  # the user's function failed while tracing
            how = f"the lane batch of {count(x.shape[0], 'row')}"
            error.add_note(rows_at_once_note(objective.fun, rows, how))
            raise
        return jnp.asarray(out).astype(x.dtype).reshape(x.shape[0], -1)

    def value_and_grad(x: jax.Array, *rest: Any) -> tuple[jax.Array, jax.Array]:
        values, pullback = jax.vjp(lambda x: outputs(x, *rest)[:, 0], x)
        return values, pullback(jnp.ones_like(values))[0]

    def residual_and_jacobian(x: jax.Array, *rest: Any) -> tuple[jax.Array, jax.Array]:
        residual, tangent = jax.linearize(lambda x: outputs(x, *rest), x)
        basis = jnp.broadcast_to(jnp.eye(x.shape[1], dtype=x.dtype), (*x.shape, x.shape[1]))
        return residual, jax.vmap(tangent, in_axes=2, out_axes=2)(basis)

    shared = objective.differentiate.stop(objective.shared_args)
    operands = (data.fixed, data.fixed_values, data.row_args, shared)
    if residual_output is None:
        evaluate = _lane_function(value_and_grad)
        return Problem(
            lambda x: evaluate(x, *operands), data.fixed, data.fixed_values, data.lower,
            data.upper, differentiate=objective.differentiate, hessian_products=False,
        )  # fmt: skip
    evaluate = _lane_function(residual_and_jacobian)
    counts = split_data(objective.loss, objective.merge_args(data.row_args, shared))[1]
    counts = flat_counts(counts, objective.output_shape)  # raveled as the residuals are

    def row_value_and_grad(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        value, residual, jacobian = residual_output(*evaluate(x, *operands), counts)
        return value, jacobian.T @ residual

    def row_residual_and_jacobian(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        _, residual, jacobian = residual_output(*evaluate(x, *operands), counts)
        return residual, jacobian

    return Problem(
        row_value_and_grad, data.fixed, data.fixed_values, data.lower, data.upper,
        residual_and_jacobian=row_residual_and_jacobian, differentiate=objective.differentiate,
        robust=residual_output is not _plain_residuals, hessian_products=False,
        likelihood=objective.loss is not None and objective.loss.likelihood,
    )  # fmt: skip


def _plain_residuals(
    residual: jax.Array, jacobian: jax.Array, data: None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    return 0.5 * jnp.dot(residual, residual), residual, jacobian


def residual_output(loss: Any) -> Callable[..., tuple[jax.Array, jax.Array, jax.Array]]:
    """``(r, J, data) -> (value, r', J')`` for ``loss`` (None: the half sum of squares;
    ``data``: the Poisson likelihood's counts, else None)."""
    if loss is None:
        return _plain_residuals
    rescale: Callable[..., tuple[jax.Array, jax.Array, jax.Array]] = loss.rescale
    return rescale


CHECKED_ROWS = 16  # rows of the independence check: a row mixed with one up to 15 away


def check_rows_independent(fun: Callable[..., Any], x0: Any, args: tuple[Any, ...],
                           per_row: Sequence[bool]) -> None:  # fmt: skip
    """ValueError unless ``fun`` treats rows independently, checked on the first
    :data:`CHECKED_ROWS` rows (or all, if fewer): row 0 replaced by row 1 plus 1 must
    leave the outputs of rows 2 and after bit for bit unchanged. A check, not a
    proof: a ``fun`` that mixes rows only farther apart passes it (documented).
    ``per_row`` flags the leaves of ``args`` that have the batch axis. Skipped for
    fewer than three rows or traced inputs (under an outer ``jit``)."""
    leaves, treedef = jax.tree.flatten(args)
    concrete = [leaf for leaf in (*jax.tree.leaves(x0), *leaves) if isinstance(leaf, jax.Array)]
    if any(isinstance(leaf, jax.core.Tracer) for leaf in concrete):
        return
    batch = min((np.shape(leaf)[0] for leaf in jax.tree.leaves(x0)), default=0)
    if batch < 3:
        return

    def rows(index: list[int], shift: float = 0.0) -> tuple[Any, tuple[Any, ...]]:
        def take(a: Any) -> jax.Array:
            return jnp.asarray(a)[jnp.asarray(index)]

        picked = [take(leaf) if row else leaf for leaf, row in zip(leaves, per_row)]
        x = jax.tree.map(lambda a: take(a).at[0].add(shift), x0)
        return x, tuple(jax.tree.unflatten(treedef, picked))

    count = min(batch, CHECKED_ROWS)
    calls = rows(list(range(count))), rows([1, *range(1, count)], shift=1.0)
    try:
        first, second = (fun(*_call(call)) for call in calls)
    except Exception as error:  # the user's function failed: say how it was called
        how = (f"the first {count} rows of a batch of {batch}, to check that the rows are "
               "independent")  # fmt: skip
        error.add_note(rows_at_once_note(fun, calls[0][0], how))
        raise
    first, second = np.asarray(first), np.asarray(second)
    changed: int | None = 2
    if first.shape[:1] == (count,):
        same = [np.array_equal(a, b, equal_nan=True) for a, b in zip(first[2:], second[2:])]
        changed = next((row + 2 for row, kept in enumerate(same) if not kept), None)
    if changed is not None:
        raise ValueError(
            "with vectorized=True, `fun` must return one output per row along the leading "
            f"axis and treat the rows independently: changing row 0 changed row {changed}'s "
            f"output (output shape {first.shape} for {count} rows)"
        )


def _call(rows: tuple[Any, tuple[Any, ...]]) -> tuple[Any, ...]:
    x, args = rows
    return (x, *args)
