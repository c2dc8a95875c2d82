"""``curve_fit``'s covariance from its solver's normal equations: ``J^T J`` at the
solution as the Levenberg–Marquardt state holds it (``Solution.normal``, reported where
``curve_fit`` asks), so that the Jacobian is not evaluated again.

The matrix is the one the solver's last accepted evaluation formed at the returned
``x`` (a stopped row's later steps keep it: ``Solver.normal_matrix``), of the same
weighted residuals (``sigma``; no robust loss or Poisson likelihood: those solves do
not report it), summed in the solver's dtype. Its columns are scaled to unit norm and
it is inverted as :mod:`fixedopt._results.normal_inverse` inverts the one it forms
from ``J``, with the same certificates of rank and accuracy, read with the dtype the
solver summed in: so only where that dtype is float64 (:func:`pays`; a float32 solve
sums in float32, whose ``eps cond(J)^2`` certifies almost no row). ``s^2`` is
``2 value / dof`` (``Solution.value`` is half the weighted residuals' sum of squares).
A row not certified (rank-deficient, ill-conditioned, not finite) is computed again
by :func:`fixedopt._results.covariance.covariance_and` from its residuals, on its own:
each row's choice and sums are its own (``ROW_WISE_OPTIONS``), as there.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from fixedopt._numerics import buckets, cpu_compiler
from fixedopt._results import small_inverse
from fixedopt._results.covariance import covariance_and
from fixedopt._results.covariance_batches import chunk_rows
from fixedopt._results.covariance_fields import Covariance
from fixedopt._results.free_block import (
    Constraints,
    ResidualFun,
    args_in_axes,
    flat_index,
    held_entries,
    solved_problem,
    solved_types,
    summed_variance,
)
from fixedopt._results.normal_inverse import inverse_of_normal
from fixedopt._results.row_covariance import Inverse, Pieces, Rule, scaled
from fixedopt._results.solution_fields import SolutionFields

# Switched off (False) by an A/B measurement only: every row then takes covariance().
ENABLED = True
# Switched off (False) by an A/B measurement only: early() then finds nothing, and the
# covariance program compiles in the call, after the solve, as before.
EARLY = True


def pays(dtype: Any, n: int) -> bool:
    """Whether a solve of ``n`` parameters of ``dtype`` should report its normal matrix
    for the covariance: a small block (:func:`fixedopt._results.small_inverse.is_small`)
    whose solver sums in float64 (float64 parameters); the caller asks the machine
    profile too (``Backend.normal_covariance``: the CPU)."""
    small = small_inverse.is_small(n) and jnp.dtype(dtype) == jnp.float64
    return ENABLED and small


def fit_covariance(
    solution: SolutionFields,
    residual_fun: ResidualFun,
    *,
    args: tuple[Any, ...],
    sigma: jax.Array | None,
    absolute_sigma: bool,
    at_bound: str,
    args_axes: Any,
    pseudo_inverse: bool,
    on_device: bool,
) -> Covariance:
    """:func:`fixedopt.covariance` of a fit's ``solution`` (its arguments as there,
    checked by the caller; ``on_device``: the machine profile's choice,
    ``fixedopt._driver.machine.covariance_on_device``), from ``solution.normal`` where
    it has one and runs in chunks here (at the top level on the CPU; one fit as a batch
    of one); the rows it does not certify, and every other call, by
    :func:`~fixedopt._results.covariance.covariance_and`."""
    plain = solution._replace(normal=None)
    options = dict(absolute_sigma=absolute_sigma, at_bound=at_bound,
                   pseudo_inverse=pseudo_inverse)  # fmt: skip

    def again(sol: SolutionFields, args: tuple[Any, ...], sigma: jax.Array | None) -> Covariance:
        found, _ = covariance_and(None, sol, residual_fun, args=args, sigma=sigma,
                                  args_axes=args_axes, on_device=on_device,
                                  **options)  # type: ignore[arg-type]  # fmt: skip
        return found

    leaves = jax.tree.leaves((plain, solution.normal, sigma))
    if solution.normal is None or not buckets.chunks_here(leaves):
        return again(plain, args, sigma)
    rule = Rule(absolute_sigma, at_bound == "fixed", pseudo_inverse)
    if jnp.ndim(solution.value) == 0:  # one fit: a batch of one
        shape = _residual_shape(residual_fun, _avals((solution.x, args)), None)
        one = jax.tree.map(lambda a: np.asarray(a)[None], solution)
        found, certified = _from_normal(rule, one, shape, None if sigma is None else
                                        np.asarray(sigma)[None])  # fmt: skip
        if not certified[0]:
            return again(plain, args, sigma)
        alone: Covariance = jax.tree.map(lambda a: a[0], found)
        return alone._replace(index=flat_index(solution.x))
    batch = int(np.shape(solution.value)[0])
    axes = args_in_axes(args, args_axes, batch)
    flat_axes, axes_tree = jax.tree.flatten(axes, is_leaf=lambda axis: axis is None)
    shape = _residual_shape(residual_fun, _avals((solution.x, args)), (axes_tree, *flat_axes))
    found, certified = _from_normal(rule, solution, shape, sigma)
    # one row's, not batched: from shapes (indexing the array would lower programs)
    index = flat_index(
        jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a)[1:], a.dtype), solution.x)
    )
    redo = np.flatnonzero(~certified)
    if redo.size == 0:
        return found._replace(index=index)

    def take(a: Any) -> Any:
        return None if a is None else np.asarray(a)[redo]

    rows = jax.tree.map(take, plain)
    row_args = tuple(jax.tree.map(lambda a, axis: a if axis is None else take(a), args, axes))
    redone = again(rows, row_args, take(sigma))._replace(index=None)

    def put(every: Any, some: Any) -> Any:
        host = np.array(every)
        host[redo] = np.asarray(some)
        return jax.device_put(host)

    joined: Covariance = jax.tree.map(put, found, redone)
    return joined._replace(index=index)


def early(
    x: Any, bounded: bool, *, absolute_sigma: bool, at_bound: str, pseudo_inverse: bool
) -> tuple[Any, Callable[[], Any]] | None:
    """The covariance program that :func:`fit_covariance` (these keywords) of a batched
    fit from ``x`` (its start, ``(B, n)``; ``bounded``: whether it has bounds) calls,
    if the fit's solve reports its normal
    matrix (the caller knows: :func:`pays`, the machine, a plain loss), as ``(key,
    lower)``: ``lower()`` traces and lowers it (its export made or read) for the types
    its chunks will have, before the solve has run: the same ``jit``, export and
    options, so that the ``compile()`` of what it returns is the fit's own call's
    (``fixedopt._driver.ahead.soon``). It reads nothing of the model. None where the
    fit would not run it in chunks here."""
    if not EARLY or np.ndim(x) != 2 or not buckets.chunks_here([]):
        return None
    batch, n = np.shape(x)
    dtype = jnp.result_type(x)
    if not pays(dtype, n):
        return None
    rule = Rule(absolute_sigma, at_bound == "fixed", pseudo_inverse)

    def rows(shape: tuple[int, ...], kind: Any) -> np.ndarray:  # no memory: a view
        return np.broadcast_to(np.zeros((), kind), (batch, *shape))

    start, constraints = solved_types(rows, n, dtype, bounded)
    data = (start, constraints, rows((n, n), dtype), rows((), dtype), rows((), np.int32),
            rows((), np.int32))  # fmt: skip  # as _from_normal's
    flat, treedef = jax.tree.flatten(data)
    size = chunk_rows(tuple(flat), (True,) * len(flat), batch) or buckets.chunk_size(batch)
    zeros = [np.zeros((size, *np.shape(leaf)[1:]), leaf.dtype) for leaf in flat]
    key = ("covariance", rule, treedef, tuple((z.shape, z.dtype.str) for z in zeros))
    lower = _compiled.lower
    return key, functools.partial(lower, rule, *jax.tree.unflatten(treedef, zeros))


def _avals(tree: Any) -> tuple[Any, tuple[jax.ShapeDtypeStruct, ...]]:
    """``tree``'s structure and its leaves' shapes and dtypes (hashable)."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple(jax.ShapeDtypeStruct(np.shape(a), jnp.result_type(a)) for a in leaves)


@functools.lru_cache(maxsize=64)
def _residual_shape(
    residual_fun: ResidualFun, avals: tuple[Any, tuple[Any, ...]], axes: tuple[Any, ...] | None
) -> tuple[int, ...]:
    """One row's residuals' shape, of ``(x, args)`` of these ``avals`` (batched: with
    ``args``' ``axes``, their structure then leaves): traced once per model and shapes
    (a trace of the model was most of a small batch's covariance)."""
    x, args = jax.tree.unflatten(*avals)
    if axes is None:
        return tuple(jax.eval_shape(lambda x, a: residual_fun(x, *a), x, args).shape)
    in_axes = jax.tree.unflatten(axes[0], axes[1:])
    one_row = jax.vmap(lambda x, a: residual_fun(x, *a), in_axes=(0, in_axes))
    return tuple(jax.eval_shape(one_row, x, args).shape[1:])


def _from_normal(
    rule: Rule, solution: SolutionFields, shape: tuple[int, ...], sigma: Any
) -> tuple[Covariance, np.ndarray]:
    """Each row's covariance (``index`` None) from a batched ``solution``'s normal
    matrices, in chunks, and whether it is certified (on the host); ``shape`` is one
    row's residuals'."""
    x, constraints, _ = solved_problem(solution._replace(normal=None), None, None, True)
    batch = int(np.shape(solution.value)[0])
    residuals = math.prod(shape)
    points = np.full(batch, residuals, np.int32)
    if sigma is not None:
        finite = np.isfinite(np.broadcast_to(np.asarray(sigma), (batch, *shape)))
        points = finite.reshape(batch, -1).sum(axis=1).astype(np.int32)
    # The number of residuals is data: one program for every model of n parameters.
    data = (x, constraints, solution.normal, solution.value, points,
            np.full(batch, residuals, np.int32))  # fmt: skip
    flat, treedef = jax.tree.flatten(data)
    flags = (True,) * len(flat)

    def run(chunk: tuple[Any, ...], _: int) -> tuple[Covariance, jax.Array]:
        rows = jax.tree.unflatten(treedef, chunk)
        found: tuple[Covariance, jax.Array] = _compiled(rule, *rows)
        return found

    found: Covariance
    size = chunk_rows(tuple(flat), flags, batch)
    found, certified = buckets.in_chunks(run, tuple(flat), flags, batch, size)
    return found, np.asarray(certified)


def _rows(rule: Rule, *rows: Any) -> tuple[Covariance, jax.Array]:
    """Each row's :func:`_row` (``index`` left None), ``rows`` batched along axis 0."""
    found: tuple[Covariance, jax.Array] = jax.vmap(functools.partial(_row, rule))(*rows)
    return found


def _row(
    rule: Rule,
    x: Any,
    constraints: Constraints,
    normal: jax.Array,
    value: jax.Array,
    points: jax.Array,
    residuals: jax.Array,
) -> tuple[Covariance, jax.Array]:
    """One row's covariance from its ``normal`` matrix, ``value`` and ``points`` (of
    finite sigma) of its ``residuals``, and whether it is certified."""
    flat_x = ravel_pytree(x)[0]
    n = flat_x.shape[0]
    at_bound, frozen = held_entries(flat_x, constraints, rule.hold, _no_gradient)
    diagonal = jnp.where(frozen, 0.0, jnp.diagonal(normal))
    column_scale = jnp.sqrt(jnp.where(diagonal > 0, diagonal, 1.0))
    zero = (diagonal == 0) & ~frozen  # a free parameter the residuals do not depend on
    held = frozen | zero
    off = held[:, None] | held[None, :]
    unit = jnp.where(off, 0.0, normal / (column_scale[:, None] * column_scale[None, :]))
    unit = jnp.where(jnp.eye(n, dtype=bool) & held[:, None], 1.0, unit)
    unscaled, certified = inverse_of_normal(unit, held, residuals, flat_x.dtype)
    n_free = jnp.sum(~frozen)
    found = Pieces(jnp.zeros((0,), flat_x.dtype), jnp.zeros((0, n), flat_x.dtype),
                   column_scale.astype(flat_x.dtype), at_bound, frozen, zero, n_free,
                   points - n_free)  # fmt: skip
    inverse = Inverse(jnp.where(off, 0.0, unscaled), n_free - jnp.sum(zero), zero)
    variance = summed_variance(rule.absolute_sigma, 2.0 * value, found.dof)
    finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(flat_x)) & jnp.all(jnp.isfinite(normal))
    return scaled(rule, x, constraints, found, inverse, variance, finite), certified & finite


def _no_gradient() -> jax.Array:
    raise AssertionError("a Solution brings its active set")  # pragma: no cover


# A function of its arguments alone: a new process runs its export, untraced.
_compiled = cpu_compiler.jit_for_cpu(_rows, (0,), cpu_compiler.SERIAL_ROW_WISE_OPTIONS, stored=True)
