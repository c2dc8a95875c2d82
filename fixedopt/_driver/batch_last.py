"""Levenberg–Marquardt with the batch last, by construction: a whole batch of small
least-squares rows stepped together on an accelerator (issue 61).

A TPU holds an array in tiles of 8 x 128 over its last two axes: rows stored
``(B, n)`` put Gpufit's 5 parameters on the 128-wide axis, most of each tile padding.
Here every array of the loop has the batch last, as ``(B / 128, 128)``: parameters
``(n, *B)``, residuals ``(m, *B)``, the Jacobian ``(n, m, *B)``, ``J^T J``
``(n, n, *B)``, a row's scalars ``(*B)``. The normal sums, the unrolled Cholesky solve
and the tests are elementwise arithmetic with the formulas of
:class:`~fixedopt._solvers.levenberg_marquardt.LevenbergMarquardt` and of the driver
(:mod:`fixedopt._driver.batch_last_step`). Only the user's row function is mapped over
the batch (``vmap(in_axes=-1, out_axes=-1)``), its Jacobian's columns the forward-mode
products of that map (``jax.linearize``, the ``n`` products one ``vmap``).

The whole batch is one ``while`` loop that ends when no row runs; a stopped row keeps
its state (the step computed for it is dropped). A row's result depends on its own
data only. Chosen by the machine profile (``Schedule.batch_last``), never by the user.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem
from fixedopt._contract.status import CLAIMED, RUNNING, Status, busy
from fixedopt._driver import batch_last_step as steps
from fixedopt._driver.batch_last_step import Carry, Evaluate
from fixedopt._driver.lanes import LastState
from fixedopt._driver.loop import Resume, Stopping, to_certify
from fixedopt._numerics import reduce, scaled
from fixedopt._objective.losses import flat_counts, split_data
from fixedopt._objective.problem import Objective, RowData, _cast_floating
from fixedopt._solvers.levenberg_marquardt import LevenbergMarquardt
from fixedopt._solvers.normal_equations import norm_of_sums

# The most rows one loop holds: a larger batch runs in chunks of equal size, one
# after the other (a row's loop state, data and Jacobian: about 1 kB for the spot).
CHUNK = 1 << 21
# The batch's last two axes: ``(B // TILE, TILE)``, so that a row's scalar is a TPU's
# (8, 128) tiles and a row's entry ``x[i]`` a slice of the leading axis; the rows padded
# to whole tiles (TILE_ROWS of TILE): at 1e6 rows padded to 7,813 rows of 128 (the last
# (8, 128) tile part padding) Poisson fits went NONFINITE and LSE fits took other steps
# on a TPU v5e (docs/decisions.md, "The batch-last step in tiles, its sums in one reduce").
TILE = 128
TILE_ROWS = 8


def iterate_batch_last(
    solver: LevenbergMarquardt,
    objective: Objective,
    rows: RowData,
    x: jax.Array,
    stopping: Stopping,
    count: jax.Array | None = None,
    resume: Resume | None = None,
    normal: bool = False,
) -> LastState:
    """Run every row (``rows`` and ``x``, ``(B, n)``: rows first, as the lanes take them)
    until each stops; the :class:`LastState` of every row, rows first (with ``J^T J``
    where ``normal``). ``count``: the rows to solve (the others, a padding, stop at
    their start); ``resume``: where each row goes on from, its claims leaving the loop
    CLAIMED (``fixedopt._driver.after_loop``)."""
    total = x.shape[0]
    solving = jnp.asarray(total if count is None else count)
    claims = resume is not None
    if resume is None:
        nothing = jnp.zeros((total,), x.dtype)
        resume = Resume(nothing.astype(jnp.int32), nothing + jnp.inf, nothing + jnp.nan)
    chunks = max(-(-total // CHUNK), 1)
    per_chunk, whole = -(-total // chunks), TILE * TILE_ROWS
    if per_chunk >= 2 * JOBS * whole:  # in JOBS jobs of whole tiles (a third padding at most)
        whole *= JOBS
    size = -(-per_chunk // whole) * whole
    data = (rows, x, resume)

    def part_solved(first: jax.Array, part: Any) -> LastState:
        rows, x, resume = jax.tree.map(_batch_last, part)
        index = first + jnp.arange(size, dtype=jnp.int32).reshape(x.shape[1:])
        final = _solve_part(solver, objective, rows, x, stopping, resume, index >= solving, claims)
        reported = LastState(*(_rows_first(a) for a in final[:7]))
        return reported._replace(normal=_rows_first(final.solver.normal) if normal else None)

    grown = jax.tree.map(lambda a: _chunked(a, chunks, size), data)
    if chunks == 1:
        found = part_solved(jnp.zeros((), jnp.int32), jax.tree.map(lambda a: a[0], grown))
        one: LastState = jax.tree.map(lambda a: a[:total], found)
        return one
    starts = jnp.arange(chunks, dtype=jnp.int32) * size
    found = jax.lax.map(lambda c: part_solved(*c), (starts, grown))
    every: LastState = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:])[:total], found)
    return every


def _batch_last(a: jax.Array) -> jax.Array:
    """``a`` (``(B, ...)``) with the batch last: ``(..., B // TILE, TILE)``."""
    moved = jnp.moveaxis(a, 0, -1)
    return moved.reshape(*moved.shape[:-1], moved.shape[-1] // TILE, TILE)


def _rows_first(a: jax.Array) -> jax.Array:
    """:func:`_batch_last` undone: ``(B, ...)``."""
    return jnp.moveaxis(a.reshape(*a.shape[:-2], -1), -1, 0)


def _chunked(a: jax.Array, chunks: int, size: int) -> jax.Array:
    """``a`` (``(B, ...)``) padded with copies of row 0 to ``chunks * size`` rows, as
    ``(chunks, size, ...)``."""
    extra = chunks * size - a.shape[0]
    if extra:
        a = jnp.concatenate([a, jnp.broadcast_to(a[:1], (extra, *a.shape[1:]))])
    return a.reshape(chunks, size, *a.shape[1:])


# A part's rows may run in JOBS jobs (whole tiles), one after the other, each until at
# most 1/LEFT_OVER of its rows run; then the rows still running, gathered from every
# job, run in jobs of that size to their end, so that a trip costs the rows it holds,
# not the whole batch until its slowest row stops (Gpufit's spots: 3.4 steps on average,
# 10 at most in 1e6). Off (one job, one loop): on a TPU v5e at 1e6 spots the jobs ran
# 7.8M fits/s against 11.1M for the one loop and compiled in 40 s against 16 s
# (docs/decisions.md, "Batch-last Levenberg-Marquardt on today's driver").
JOBS = 1
LEFT_OVER = 1 << 40
# The Jacobian's n forward-mode products as one vmap (traced once), not one by one.
JACOBIAN_MAPPED = True


def _solve_part(
    solver: LevenbergMarquardt, objective: Objective, rows: RowData, x: jax.Array,
    stopping: Stopping, resume: Resume, padded: jax.Array, claims: bool,
) -> Carry:  # fmt: skip
    """Every row of a batch-last part (``x`` ``(n, T, TILE)``) to its end, in jobs; the
    rows' data and states packed, one array per dtype, so that a job takes and puts
    back a few arrays."""
    tiles = x.shape[-2]
    jobs = JOBS if tiles % (JOBS * TILE_ROWS) == 0 else 1
    if jobs == 1 and tiles * TILE < LEFT_OVER:  # one loop to the end, no jobs around it
        return _trips(solver, objective, (rows, x, resume, padded), stopping, claims, None,
                      False, 0)  # fmt: skip
    job_tiles = tiles // jobs
    size = job_tiles * TILE
    data = (rows, x, resume, padded)
    data_packing = _Packing(data)
    packed_data = data_packing.pack(data)
    shape = jax.eval_shape(lambda d: _trips(solver, objective, d, stopping, claims, None, True, 0),
                           _sliced(data, 0, job_tiles))  # fmt: skip
    states = _Packing(shape)
    blank = jax.tree.map(lambda a: jnp.zeros((*a.shape[:-2], tiles, TILE), a.dtype), shape)

    def job(state: tuple[tuple[jax.Array, ...], jax.Array]) -> Any:
        full, number = state
        fresh = number < jobs
        running = busy(states.unpack(full).status).reshape(-1)
        index = first_rows(running, size)
        first = number * job_tiles

        def take(packed: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            return jax.lax.cond(fresh, lambda: _sliced(packed, first, job_tiles),  # type: ignore[no-any-return]
                                lambda: _gathered(packed, index, job_tiles))  # fmt: skip

        part: Carry = states.unpack(take(full))
        absent = (index >= running.shape[0]).reshape(job_tiles, TILE) & ~fresh
        part = part._replace(status=jnp.where(absent, Status.CONVERGED, part.status))
        left = jnp.where(fresh, size // LEFT_OVER, 0)
        part_data = data_packing.unpack(take(packed_data))
        final = states.pack(_trips(solver, objective, part_data, stopping, claims, part, ~fresh,
                                   left))  # fmt: skip
        full = jax.lax.cond(fresh, lambda: _placed(full, final, first),
                            lambda: _scattered(full, final, index))  # fmt: skip
        return full, number + 1

    def going(state: tuple[tuple[jax.Array, ...], jax.Array]) -> jax.Array:
        return (state[1] < jobs) | jnp.any(busy(states.unpack(state[0]).status))

    start = (states.pack(blank), jnp.zeros((), jnp.int32))
    ended = jax.lax.while_loop(going, job, start)
    final: Carry = states.unpack(ended[0])
    return final


class _Packing:
    """The leaves of a tree of batch-last arrays (their last two axes the batch's) as
    one ``(k, *batch)`` array per dtype, and back."""

    def __init__(self, tree: Any) -> None:
        leaves, self.treedef = jax.tree.flatten(tree)
        self.shapes = [tuple(a.shape[:-2]) for a in leaves]
        self.dtypes = sorted({jnp.dtype(a.dtype).name for a in leaves})
        self.group = [self.dtypes.index(jnp.dtype(a.dtype).name) for a in leaves]

    def pack(self, tree: Any) -> tuple[jax.Array, ...]:
        """One array per dtype."""
        leaves = jax.tree.leaves(tree)
        groups: list[list[jax.Array]] = [[] for _ in self.dtypes]
        for leaf, group in zip(leaves, self.group):
            groups[group].append(leaf.reshape(-1, *leaf.shape[-2:]))
        return tuple(jnp.concatenate(g) for g in groups)

    def unpack(self, packed: tuple[jax.Array, ...]) -> Any:
        """The tree of :meth:`pack`'s arrays."""
        offsets = [0] * len(self.dtypes)
        leaves = []
        for shape, group in zip(self.shapes, self.group):
            count = math.prod(shape)
            array = packed[group][offsets[group] : offsets[group] + count]
            leaves.append(array.reshape(*shape, *array.shape[-2:]))
            offsets[group] += count
        return jax.tree.unflatten(self.treedef, leaves)


def first_rows(mask: jax.Array, count: int) -> jax.Array:
    """The indices of the first ``count`` True entries of ``mask`` (``(N,)``), padded
    with ``N`` (``lane_checks.first_true``'s scatter of the ranks)."""
    width = mask.shape[0]
    rank = jnp.cumsum(mask, dtype=jnp.int32) - 1
    target = jnp.where(mask & (rank < count), rank, count)
    positions = jnp.arange(width, dtype=jnp.int32)
    return jnp.full((count,), width, jnp.int32).at[target].set(positions, mode="drop")


def _sliced(tree: Any, first: Any, tiles: int) -> Any:
    """The ``tiles`` tiles of every batch-last array of ``tree`` from tile ``first``."""
    return jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, first, tiles, a.ndim - 2), tree)


def _gathered(tree: Any, index: jax.Array, tiles: int) -> Any:
    """The rows ``index`` (into the flat batch; beyond it: the last row) of every
    batch-last array of ``tree``, as ``tiles`` tiles."""

    def take(a: jax.Array) -> jax.Array:
        flat = a.reshape(*a.shape[:-2], -1)
        return jnp.take(flat, index, axis=-1, mode="clip").reshape(*a.shape[:-2], tiles, TILE)

    return jax.tree.map(take, tree)


def _placed(full: Any, part: Any, first: Any) -> Any:
    """``full`` with ``part``'s tiles written from tile ``first``."""
    return jax.tree.map(
        lambda a, b: jax.lax.dynamic_update_slice_in_dim(a, b, first, a.ndim - 2), full, part
    )


def _scattered(full: Any, part: Any, index: jax.Array) -> Any:
    """``full`` with ``part``'s rows written at ``index`` (beyond the batch: dropped)."""

    def put(a: jax.Array, b: jax.Array) -> jax.Array:
        flat = a.reshape(*a.shape[:-2], -1)
        rows = b.reshape(*b.shape[:-2], -1)
        return flat.at[..., index].set(rows, mode="drop").reshape(a.shape)

    return jax.tree.map(put, full, part)


def _trips(
    solver: LevenbergMarquardt, objective: Objective, data: Any, stopping: Stopping,
    claims: bool, carry: Carry | None, begun: Any, left: Any,
) -> Carry:  # fmt: skip
    """The loop on batch-last ``data`` (``rows``, ``x`` ``(n, *B)``, ``resume``,
    ``padded``) from ``carry`` (None: blank) until at most ``left`` rows run; where not
    ``begun``, the loop's first trip is the rows' start, on that trip's evaluation, so
    that the program holds one evaluation."""
    rows, x, resume, padded = data
    evaluate = _evaluation(objective, rows, x.shape[0])
    problem = Problem(None, rows.fixed, rows.fixed_values, rows.lower, rows.upper)  # type: ignore[arg-type]
    robust = objective.loss is not None
    start_x = problem.project(x)

    def started(evaluation: tuple[jax.Array, ...]) -> Carry:
        first = steps.start(solver, problem, evaluation, x, stopping, resume)
        if claims:
            first = _claim(solver, first)
        return first._replace(status=jnp.where(padded, Status.CONVERGED, first.status))

    def trip(state: tuple[Carry, jax.Array]) -> tuple[Carry, jax.Array]:
        carry, begun = state
        evaluated: list[Any] = []

        def shared(x_trial: jax.Array) -> Any:
            evaluated.append(evaluate(jnp.where(begun, x_trial, start_x)))
            return evaluated[0]

        running = carry.status == RUNNING
        new = steps.advance(solver, problem, shared, robust, carry, stopping)
        if claims:
            new = _claim(solver, new)
        new = jax.tree.map(lambda a, b: steps._where(running, a, b), new, carry)
        first = started(evaluated[0])
        merged: Carry = jax.tree.map(lambda a, b: jnp.where(begun, a, b), new, first)
        return merged, jnp.ones((), bool)

    def going(state: tuple[Carry, jax.Array]) -> jax.Array:
        running: jax.Array = jnp.sum(busy(state[0].status), dtype=jnp.int32) > left
        return ~state[1] | running

    if carry is None:
        carry = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype),
                             jax.eval_shape(lambda: started(evaluate(start_x))))  # fmt: skip
    begun = jnp.asarray(begun, bool)
    ended: tuple[Carry, jax.Array] = jax.lax.while_loop(going, trip, (carry, begun))
    return ended[0]


def _claim(solver: LevenbergMarquardt, carry: Carry) -> Carry:
    """``loop.claim``: CLAIMED where the verdict is one the driver checks after the loop."""
    claimed = to_certify(solver, carry)  # type: ignore[arg-type]  # its verdict's fields
    return carry._replace(status=jnp.where(claimed, CLAIMED, carry.status))


def _evaluation(objective: Objective, rows: RowData, n: int) -> Evaluate:
    """The rows' evaluation at ``x`` (``(n, *B)``): the cost, ``|r|``, ``J^T r`` and
    ``J^T J`` of (rescaled, for the Poisson likelihood) residuals and Jacobian."""
    rows = objective.differentiate.stop(rows)
    loss = objective.loss

    def residual(row: RowData, x: jax.Array) -> tuple[jax.Array, Any]:
        args, counts = split_data(loss, objective.args_of(row.row_args))
        out = objective.fun(objective.unravel(jnp.where(row.fixed, row.fixed_values, x)), *args)
        return jnp.ravel(_cast_floating(out, x.dtype)), flat_counts(counts, objective.output_shape)

    def evaluate(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        mapped = _over_batch(residual, x.ndim - 1)
        (r, counts), linear = jax.linearize(lambda x: mapped(rows, x), x)
        units = jnp.eye(n, dtype=x.dtype).reshape(n, n, *(1,) * (x.ndim - 1))
        if JACOBIAN_MAPPED:
            jacobian = jax.vmap(lambda u: linear(jnp.broadcast_to(u, x.shape))[0])(units)
        else:
            jacobian = jnp.stack([linear(jnp.broadcast_to(units[j], x.shape))[0]
                                  for j in range(n)])  # fmt: skip
        if loss is not None:  # the Poisson likelihood: Fisher scoring's r and J
            mu = r
            root = jnp.sqrt(jnp.where(mu > 0, mu, 1.0))
            r, jacobian = (mu - counts) / root, jacobian / root[None]
            value = _over_batch(loss.cost, mu.ndim - 1)(mu, counts)
        normal, grad, squared, norm = _normal_sums(jacobian, r)
        if loss is None:
            value = 0.5 * squared
        return value, norm, grad, normal

    return evaluate


def _normal_sums(
    jacobian: jax.Array, r: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``J^T J`` (in float32 at least), ``J^T r``, ``|r|^2`` and ``|r|``
    (``normal_equations.residual_sums``) of ``jacobian`` (``(n, m, *B)``) and ``r``
    (``(m, *B)``), in one variadic reduce (``reduce.together``), so that the Jacobian is
    computed once, not again in each sum's fusion."""
    n = jacobian.shape[0]
    wide = jnp.promote_types(r.dtype, jnp.float32)
    columns = [jacobian[j].astype(wide) for j in range(n)]
    wide_r = r.astype(wide)
    pairs = [(i, j) for i in range(n) for j in range(i + 1)]
    terms = [columns[i] * columns[j] for i, j in pairs] + [c * wide_r for c in columns]
    terms += [wide_r * wide_r, *scaled.magnified(((wide_r, wide_r),))]
    sums = reduce.together(tuple(terms))
    lower = dict(zip(pairs, sums))
    normal = jnp.stack([jnp.stack([lower[max(i, j), min(i, j)] for j in range(n)])
                        for i in range(n)])  # fmt: skip
    grad = jnp.stack(sums[len(pairs) : len(pairs) + n]).astype(r.dtype)
    wide_squared, magnified = sums[-2], sums[-1]
    squared = wide_squared.astype(r.dtype)
    return normal, grad, squared, norm_of_sums(squared, wide_squared, magnified)


def _over_batch(fun: Any, axes: int) -> Any:
    """``fun`` of one row mapped over the last ``axes`` axes of its arguments."""
    for _ in range(axes):
        fun = jax.vmap(fun, in_axes=-1, out_axes=-1)
    return fun
