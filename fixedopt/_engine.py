"""The compiled core of ``minimize`` / ``least_squares``: one row's setup, the loop,
and the way back to the user's pytree, with the implicit derivative attached."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt._implicit import implicit_solution
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
        return _solution(final, finish)

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
    return _solution(final, jax.vmap(lambda row, z: setup_row(row)[2](z)), rows)


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
    """One row: its Problem, its start in solver variables, and ``finish: z -> x``.

    Implicit differentiation (``unroll_length`` None): the solver runs on stopped
    inputs and ``finish`` attaches the implicit derivative with respect to the fixed
    values and ``args``. Unrolled: nothing is stopped and the loops are scans.
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

    def finish(z):
        flat_x = to_x(z)
        if unrolled:
            return unravel(flat_x)
        frozen = full.fixed
        if full.has_bounds:
            frozen = frozen | full.at_bound(flat_x, full.value_and_grad(flat_x)[1], 0.0)
        objective = differentiable_objective(fun, least_squares, unravel)
        flat_values = ravel_pytree(values)[0]
        return unravel(implicit_solution(objective, flat_x, full.fixed, frozen, flat_values, args))

    return problem, start, finish


def _solution(final, finish, *rows) -> Solution:
    return Solution(
        x=finish(*rows, final.x),
        value=jax.lax.stop_gradient(final.value),
        grad_norm=jax.lax.stop_gradient(final.grad_norm),
        steps=final.steps,
        converged=final.status == Status.CONVERGED,
        status=final.status,
    )
