"""The compiled core of ``minimize`` / ``least_squares``: one row's setup, the loop,
and the way back to the user's pytree, with the implicit derivative attached."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._implicit import implicit_solution, with_derivative
from fixedopt._lanes import Report, iterate_lanes
from fixedopt._loop import LoopState, Stopping, iterate
from fixedopt._losses import Loss
from fixedopt._mask import active_set, unravel_mask
from fixedopt._problem import (
    DifferentiableObjective,
    Objective,
    RowData,
    differentiable_objective,
    flatten_row,
    vectorized_objective,
)
from fixedopt._problem import objective as make_objective
from fixedopt._progress import Progress
from fixedopt._reparam import expand
from fixedopt._solution import Solution
from fixedopt._solver import Solver
from fixedopt._status import Status
from fixedopt._validate import Bounds, PyTree

Result = tuple[PyTree, jax.Array, jax.Array, PyTree]  # (x, value, grad_norm, at_bound) of a row


class Plan(NamedTuple):
    """The static choices of a solve: each distinct plan is one compiled program."""

    least_squares: bool | Loss  # False for minimize; True or a robust Loss
    batched_args: tuple[bool, ...] | None  # None: one problem; else per args leaf
    lanes: int | None = None  # a batch: rows the loop advances at a time (None: default)
    backend: str = "cpu"  # the platform compiled for: it sets the default lanes
    vectorized: bool = False  # fun takes the lane batch (see fixedopt._vectorized)
    unroll_length: int | None = None  # None: implicit differentiation
    progress: Progress | None = None  # None: no progress callback


class Inputs(NamedTuple):
    """The traced data of a solve, validated; with a batch, every leaf has the batch axis
    (but the shared leaves of ``args``)."""

    x0: PyTree
    fixed: PyTree  # the normalized mask, boolean arrays like x0
    fixed_values: PyTree
    bounds: Bounds | None  # normalized (lower, upper) trees like x0
    args: tuple[Any, ...]
    split_index: jax.Array | None  # strategy="split": each row's packed free positions


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def run(
    fun: Callable[..., Any], solver: Solver[Any], plan: Plan, inputs: Inputs, stopping: Stopping
) -> Solution:
    """Compiled once per (fun, solver, plan, shapes); masks and values are data.

    ``plan.batched_args`` is None for one problem, else one flag per leaf of ``args``:
    True for a per-row array, False for a value shared by all rows. The solution's
    ``fixed`` and ``bounds`` are left None for the caller to attach: the inputs
    themselves (a compiled program would return copies of them).
    """
    objective, rows = _set_up(fun, plan, inputs)
    finish = functools.partial(_finish, objective)
    if plan.batched_args is None:
        start = objective.start(rows)
        final = iterate(solver, objective.problem(rows), start, stopping, plan.unroll_length)
        return _solution(final, finish(rows, final))

    start = jax.vmap(objective.start)(rows)
    rows_final: LoopState | Report
    if plan.unroll_length is None:
        rows_final = iterate_lanes(
            solver,
            objective.problem,
            rows,
            start,
            stopping,
            plan.lanes,
            plan.backend,
            plan.progress,
        )
    else:

        def one(row: RowData, x: jax.Array) -> LoopState:
            return iterate(solver, objective.problem(row), x, stopping, plan.unroll_length)

        rows_final = jax.vmap(one)(rows, start)
    return _solution(rows_final, jax.vmap(finish)(rows, rows_final))


def _set_up(fun: Callable[..., Any], plan: Plan, inputs: Inputs) -> tuple[Objective, RowData]:
    """Each row set up once: the rows' flat :class:`~fixedopt._problem.RowData` and one
    :class:`~fixedopt._problem.Objective` (``fun``'s output checked once), which makes
    a row's Problem from its data wherever the loop needs it. Shared ``args`` leaves
    stay unbatched: the objective closes over them."""
    x0, mask, values, bounds, args, split_index = inputs
    leaves, treedef = jax.tree.flatten(args)
    batched = plan.batched_args is not None
    per_row = plan.batched_args or (False,) * len(leaves)
    row_leaves = [leaf for leaf, row in zip(leaves, per_row) if row]
    shared = [leaf for leaf, row in zip(leaves, per_row) if not row]
    data = (x0, mask, values, bounds, split_index, row_leaves)
    rows: RowData = jax.vmap(flatten_row)(*data) if batched else flatten_row(*data)

    def merge_args(row_args: tuple[Any, ...], shared: tuple[Any, ...]) -> tuple[Any, ...]:
        row_leaves, shared_leaves = iter(row_args), iter(shared)
        merged = [next(row_leaves if row else shared_leaves) for row in per_row]
        return tuple(jax.tree.unflatten(treedef, merged))

    def args_of(row_args: tuple[Any, ...]) -> tuple[Any, ...]:
        return merge_args(row_args, tuple(shared))

    one_row = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[batched:], a.dtype), rows)
    # One row's structure, for unravel (shapes only: a batch may have no rows).
    x0_row = jax.tree.map(lambda a: jnp.zeros(a.shape[1:], a.dtype), x0) if batched else x0
    unroll = plan.unroll_length is not None
    if plan.vectorized:
        objective = vectorized_objective(
            fun, plan.least_squares, x0_row, unroll, one_row, tuple(shared), merge_args
        )
    else:
        objective = make_objective(fun, plan.least_squares, x0_row, args_of, unroll, one_row)
    return objective, rows


def _finish(objective: Objective, data: RowData, final: LoopState | Report) -> Result:
    """``(x, value, grad_norm, at_bound)`` of a row's final loop state, in the user's
    pytree; ``at_bound`` is the row's :func:`~fixedopt._mask.active_set` at ``x``,
    from the loop's last gradient.

    Implicit differentiation: the solver ran on stopped inputs, and the true
    derivatives are attached here (see :func:`_differentiable_result`). Unrolled:
    nothing was stopped and the loops were scans, so the loop's own outputs carry
    their derivatives.
    """
    flat_x, grad = final.x, final.grad
    if data.split_index is not None:  # packed variables: back to the full vector
        values = jax.lax.stop_gradient(data.fixed_values)
        flat_x = expand(flat_x, values, data.split_index)
        grad = expand(grad, jnp.zeros_like(values), data.split_index)
    active = jnp.zeros_like(data.fixed)
    if data.lower is not None and data.upper is not None:
        active = active_set(flat_x, grad, data.fixed, data.lower, data.upper)
    x, value, grad_norm = flat_x, final.value, final.grad_norm
    if not objective.unroll:
        x, value, grad_norm = _differentiable_result(objective, data, flat_x, active, final)
    tree = objective.unravel(x)
    return tree, value, grad_norm, unravel_mask(active, tree)


def _differentiable_result(
    objective: Objective,
    data: RowData,
    flat_x: jax.Array,
    active: jax.Array,
    final: LoopState | Report,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(x, value, grad_norm)`` with their true derivatives, computed only when
    differentiated.

    ``x`` gets the implicit derivative with respect to the fixed values, ``args``
    and the bounds: bound-active entries are held like fixed ones, at their
    bound, so ``dx/dbound`` is 1 there and the free block responds to it. ``value``
    and ``grad_norm`` are differentiated as the objective and the projected
    gradient's max-norm at that ``x`` (the envelope theorem, for ``value``).
    ``active`` is the row's active set at ``x``.
    """
    fixed, values = data.fixed, data.fixed_values
    has_bounds = data.lower is not None and data.upper is not None
    active_lower = active_upper = jnp.zeros_like(fixed)
    lower, upper = values, values  # unused without bounds
    if data.lower is not None and data.upper is not None:
        lower, upper = data.lower, data.upper
        active_lower = active & (flat_x <= jax.lax.stop_gradient(lower))
        active_upper = active & (flat_x >= jax.lax.stop_gradient(upper))
    held = fixed | active_lower | active_upper
    at_bound = jnp.where(active_lower, lower, jnp.where(active_upper, upper, 0.0))
    held_values = jnp.where(fixed, values, at_bound)
    function = differentiable_objective(
        objective.fun, objective.least_squares, objective.unravel, objective.vectorized
    )
    row_args = data.row_args
    if objective.vectorized:  # fun sees this row as a batch of one
        row_args = jax.tree.map(lambda a: a[None], row_args)
    args = objective.args_of(row_args)
    x = implicit_solution(function, flat_x, held, held, held_values, args)
    value = with_derivative(function, final.value, x, held, held_values, args)
    grad_norm_of = functools.partial(_projected_grad_norm, function, has_bounds)
    grad_norm = with_derivative(
        grad_norm_of, final.grad_norm, x, held, held_values, args, fixed, lower, upper
    )
    return x, value, grad_norm


def _projected_grad_norm(
    objective: DifferentiableObjective,
    has_bounds: bool,
    x: jax.Array,
    held: jax.Array,
    held_values: jax.Array,
    args: tuple[Any, ...],
    fixed: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
) -> jax.Array:
    """The max-norm of the projected gradient over free entries (differentiable)."""
    grad = jax.grad(objective)(x, held, held_values, args)
    if has_bounds:
        grad = x - jnp.clip(x - grad, lower, upper)
    return jnp.max(jnp.abs(jnp.where(fixed, 0.0, grad)), initial=0.0)


def _solution(final: LoopState | Report, result: Result) -> Solution:
    x, value, grad_norm, at_bound = result
    return Solution(
        x=x,
        value=value,
        grad_norm=grad_norm,
        steps=final.steps,
        converged=final.status == Status.CONVERGED,
        status=final.status,
        reason=final.reason,
        fixed=None,  # attached by the caller (see run)
        bounds=None,
        at_bound=at_bound,
    )
