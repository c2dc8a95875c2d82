"""The compiled core of ``minimize`` / ``least_squares``: one row's setup, the loop,
and the way back to the user's pytree, with the implicit derivative attached."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt._implicit import implicit_solution, with_derivative
from fixedopt._loop import iterate, iterate_batch
from fixedopt._problem import differentiable_objective, row_problem
from fixedopt._progress import Progress
from fixedopt._reparam import split
from fixedopt._solution import Solution, Status


class Plan(NamedTuple):
    """The static choices of a solve: each distinct plan is one compiled program."""

    least_squares: bool
    batched_args: tuple[bool, ...] | None  # None: one problem; else per args leaf
    compact: bool = False
    unroll_length: int | None = None  # None: implicit differentiation
    chunk_size: int | None = None
    progress: Progress | None = None  # None: no progress callback


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def run(fun, solver, plan: Plan, x0, mask, values, bounds, args, index, stopping) -> Solution:
    """Compiled once per (fun, solver, plan, shapes); masks and values are data.

    ``plan.batched_args`` is None for one problem, else one flag per leaf of ``args``:
    True for a per-row array, False for a value shared by all rows. ``index`` is None
    for ``strategy="mask"``, else each row's packed free positions.
    """

    def setup(row, args):
        return _setup_row(fun, plan.least_squares, plan.unroll_length, row, args)

    if plan.batched_args is None:
        problem, start, finish = setup((x0, mask, values, bounds, index), args)
        final = iterate(solver, problem, start, stopping, plan.unroll_length)
        return _solution(final, finish(final))

    leaves, treedef = jax.tree.flatten(args)
    per_row = [leaf for leaf, row in zip(leaves, plan.batched_args) if row]
    shared = [leaf for leaf, row in zip(leaves, plan.batched_args) if not row]

    def setup_row(row):
        *row, row_leaves = row
        row_leaves, shared_leaves = iter(row_leaves), iter(shared)
        merged = [next(row_leaves if row else shared_leaves) for row in plan.batched_args]
        return setup(row, treedef.unflatten(merged))

    def solve_rows(rows):
        start = jax.vmap(lambda row: setup_row(row)[1])(rows)
        if plan.unroll_length is not None:
            return jax.vmap(
                lambda row, x: iterate(solver, setup_row(row)[0], x, stopping, plan.unroll_length)
            )(rows, start)
        problem_of = lambda row: setup_row(row)[0]
        return iterate_batch(solver, problem_of, rows, start, stopping, plan.compact, plan.progress)

    rows = (x0, mask, values, bounds, index, per_row)
    final = in_chunks(solve_rows, rows, plan.chunk_size)
    return _solution(final, jax.vmap(lambda row, final: setup_row(row)[2](final))(rows, final))


def in_chunks(solve_rows, rows, chunk_size: int | None):
    """``solve_rows(rows)``, or the same over chunks of ``chunk_size`` rows in turn.

    ``lax.map`` runs one chunk at a time, so the solver's working memory is that of
    one chunk. The last chunk is padded with copies of the first row, whose results
    are dropped.
    """
    batch = jax.tree.leaves(rows)[0].shape[0]
    if chunk_size is None or chunk_size >= batch:
        return solve_rows(rows)
    chunks = -(-batch // chunk_size)
    padding = chunks * chunk_size - batch

    def to_chunks(a):
        a = jnp.concatenate([a, jnp.repeat(a[:1], padding, axis=0)]) if padding else a
        return a.reshape(chunks, chunk_size, *a.shape[1:])

    results = jax.lax.map(solve_rows, jax.tree.map(to_chunks, rows))
    return jax.tree.map(lambda a: a.reshape(chunks * chunk_size, *a.shape[2:])[:batch], results)


def _setup_row(fun, least_squares, unroll_length, row, args):
    """One row: its Problem, its start in solver variables, and ``finish``.

    ``finish(final) -> (x, value, grad_norm)`` maps the final loop state back to the
    user's pytree. Implicit differentiation (``unroll_length`` None): the solver runs
    on stopped inputs and ``finish`` attaches the true derivatives (see
    :func:`_differentiable_result`). Unrolled: nothing is stopped and the loops are
    scans, so the loop's own outputs carry their derivatives.
    """
    x0, mask, values, bounds, index = row
    unrolled = unroll_length is not None
    inputs = (
        (x0, values, bounds, args)
        if unrolled
        else jax.lax.stop_gradient((x0, values, bounds, args))
    )
    full, flat_x0, unravel = row_problem(fun, least_squares, inputs[0], mask, *inputs[1:])
    full = full._replace(unroll=unrolled)
    problem, start, to_x = full, flat_x0, lambda z: z
    if index is not None:
        problem, pack, to_x = split(full, index)
        start = pack(flat_x0)

    def finish(final):
        flat_x = to_x(final.x)
        if unrolled:
            return unravel(flat_x), final.value, final.grad_norm
        objective = differentiable_objective(fun, least_squares, unravel)
        # The loop's last gradient is in the solver's variables: the full vector for
        # strategy="mask", the packed one for "split" (evaluated anew there).
        grad = final.grad if index is None else None
        x, value, grad_norm = _differentiable_result(
            objective, full, flat_x, grad, final, ravel_pytree(values)[0], bounds, args
        )
        return unravel(x), value, grad_norm

    return problem, start, finish


def _differentiable_result(objective, problem, flat_x, grad, final, flat_values, bounds, args):
    """``(x, value, grad_norm)`` with their true derivatives, computed only when
    differentiated.

    ``x`` gets the implicit derivative with respect to the fixed values, ``args``
    and the bounds: bound-active entries are held like fixed ones, at their
    bound, so ``dx/dbound`` is 1 there and the free block responds to it. ``value``
    and ``grad_norm`` are differentiated as the objective and the projected
    gradient's max-norm at that ``x`` (the envelope theorem, for ``value``).
    """
    active_lower = active_upper = jnp.zeros_like(problem.fixed)
    lower = upper = flat_values
    if problem.has_bounds:
        grad = problem.value_and_grad(flat_x)[1] if grad is None else grad
        active = problem.at_bound(flat_x, grad, 0.0)
        active_lower = active & (flat_x <= problem.lower)
        active_upper = active & (flat_x >= problem.upper)
        lower, upper = (ravel_pytree(b)[0] for b in bounds)
    held = problem.fixed | active_lower | active_upper
    held_values = jnp.where(
        problem.fixed,
        flat_values,
        jnp.where(active_lower, lower, jnp.where(active_upper, upper, 0.0)),
    )
    x = implicit_solution(objective, flat_x, held, held, held_values, args)
    value = with_derivative(objective, final.value, x, held, held_values, args)

    grad_norm_of = functools.partial(_projected_grad_norm, objective, problem.has_bounds)
    grad_norm = with_derivative(
        grad_norm_of, final.grad_norm, x, held, held_values, args, problem.fixed, lower, upper
    )
    return x, value, grad_norm


def _projected_grad_norm(objective, has_bounds, x, held, held_values, args, fixed, lower, upper):
    """The max-norm of the projected gradient over free entries (differentiable)."""
    grad = jax.grad(objective)(x, held, held_values, args)
    if has_bounds:
        grad = x - jnp.clip(x - grad, lower, upper)
    return jnp.max(jnp.abs(jnp.where(fixed, 0.0, grad)), initial=0.0)


def _solution(final, result) -> Solution:
    x, value, grad_norm = result
    return Solution(
        x=x,
        value=value,
        grad_norm=grad_norm,
        steps=final.steps,
        converged=final.status == Status.CONVERGED,
        status=final.status,
        reason=final.reason,
    )
