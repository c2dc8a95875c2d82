"""Uncertainties of a least-squares fit on its free block, per row.

At a least-squares solution ``x`` with residuals ``r`` (``m`` of them) and Jacobian
``J``, the covariance of the free parameters ``F`` is

    cov_FF = s^2 (J_F^T J_F)^{-1},      s^2 = sum(r^2) / (m - n_F),

as ``scipy.optimize.curve_fit`` and lmfit compute it (``s^2 = 1`` with
``absolute_sigma=True``). Fixed parameters get exactly 0 variance and 0 covariance:
they do not vary within the model. A bound-active parameter (on a bound that the
gradient pushes against: :func:`fixedopt._fixing.mask.active_set`, the solve's
``Solution.at_bound``) is flagged; with ``at_bound="free"`` (the default,
``curve_fit``'s and lmfit's convention) it stays in ``F``, with ``at_bound="fixed"`` it
is held like a fixed one (the covariance conditional on the bound). For a small block
the inverse comes from the normal equations ``J_F^T J_F`` (summed in float64 for float32
under x64; :mod:`fixedopt._results.normal_inverse`) where its row is certified full rank
and accurate, else from a Householder QR written elementwise where that certifies the
rank, else (and for a large block) from LAPACK's QR and SVD
(:mod:`fixedopt._results.row_covariance`; the order: :mod:`fixedopt._results.covariance_program`);
all differentiable. On a TPU (its machine profile, which the callers pass in:
``fixedopt._driver.machine.covariance_on_device``) a small block takes the QR on the
chip at any height, and the rows it does not certify LAPACK's on the host's CPU
(:mod:`fixedopt._results.covariance_batches`). Each row's choice and
its sums are its own: a row's covariance has the same bits alone, in
any batch and in any order (on the CPU at the top level; its programs' reductions do not
depend on the batch's size, ``cpu_compiler.ROW_WISE_OPTIONS``).
The rank is counted as ``curve_fit`` does, singular values above
``eps * max(m, n) * s_max``, but of ``J_F`` with unit columns, so that it does not
depend on the units of the parameters; when fewer than the free parameters pass, the row is
flagged ``rank_deficient`` and its free block is scipy's pseudo-inverse, but for the
parameters the data cannot determine (a zero column, collinear columns), whose
rows and columns are ``inf`` whatever ``s^2``; ``pseudo_inverse=False``: ``inf``
on the whole free block, as ``leastsq``. The free block is NaN for a row whose
residuals are not finite at ``x`` (NaN data, a model that turned non-finite), and, from a
:class:`fixedopt.Solution`, of a row whose solve failed (``NONFINITE``: it stopped
at the last finite iterate before a NaN wall, no fit; ``INFEASIBLE``: empty bounds,
the start returned).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._inputs import arrays
from fixedopt._inputs.checks import boolean, one_of
from fixedopt._inputs.validate import Bounds, Mask, PyTree, batch_size
from fixedopt._numerics import buckets
from fixedopt._objective.arguments import args_tuple
from fixedopt._results import covariance_batches as batches
from fixedopt._results.covariance_fields import Covariance as Covariance
from fixedopt._results.covariance_program import EITHER, EXACT, ON_DEVICE, Derived, paths
from fixedopt._results.covariance_program import compiled as _compiled
from fixedopt._results.free_block import (
    Constraints,
    ResidualFun,
    args_in_axes,
    flat_index,
    solved_problem,
    solved_types,
)
from fixedopt._results.row_covariance import Rule
from fixedopt._results.solution_fields import SolutionFields

AT_BOUND = ("free", "fixed")
AT_BOUND_DEFAULT = "free"  # measured: docs/decisions.md, "Error bars with a bound active"


def covariance_and(
    derived: Derived | None,
    sol: SolutionFields | PyTree,
    residual_fun: ResidualFun,
    fixed: Mask | None = None,
    *,
    args: tuple[Any, ...] = (),
    batched: bool | None = None,
    bounds: Bounds | None = None,
    sigma: ArrayLike | None = None,
    absolute_sigma: bool = False,
    at_bound: str = AT_BOUND_DEFAULT,
    args_axes: Any = None,
    pseudo_inverse: bool = True,
    on_device: bool = False,
) -> tuple[Covariance, PyTree]:
    """:func:`fixedopt.covariance` (its arguments, checked here), and ``derived(x,
    args)`` of each row (one row's ``x`` and ``args``), computed in the same compiled
    program: a model fit's tied and derived parameters with their derivatives
    (:mod:`fixedopt._models.fit`), which a program of their own would compile apart
    (0.1-0.2 s of a spectra fit's first call, issue 44). ``derived`` is static
    (hashable); None computes nothing (None in its place). ``on_device``: the machine
    profile's choice where the call runs (``fixedopt._driver.machine.covariance_on_device``:
    a small block by the QR on the device, the rows it does not certify by LAPACK's on
    the host's CPU)."""
    x, constraints, batched = solved_problem(sol, fixed, bounds, batched)
    absolute_sigma = boolean("absolute_sigma", absolute_sigma)
    batch = batch_size(x, "sol.x") if batched else None
    args = args_tuple(args)
    one_of("at_bound", at_bound, AT_BOUND)
    axes = args_in_axes(args, args_axes, batch) if batch is not None else None
    if sigma is not None:
        sigma = _check_sigma(sigma, batch)
    rule = Rule(absolute_sigma, at_bound == "fixed", boolean("pseudo_inverse", pseudo_inverse))
    data = (x, constraints, sigma, args)
    result, extra = _computed(residual_fun, batched, rule, axes, derived, data, on_device)
    row = jax.tree.map(arrays.one_row, x) if batched else x
    return result._replace(index=flat_index(row)), extra


def early_on_device(
    residual_fun: ResidualFun,
    x: jax.Array,
    bounded: bool,
    sigma: jax.Array | None,
    args: tuple[Any, ...],
    args_axes: Any,
    *,
    absolute_sigma: bool,
    at_bound: str,
    pseudo_inverse: bool,
    derived: Derived | None = None,
) -> tuple[Any, Callable[[], Any]] | None:
    """The program that :func:`covariance_and` with ``on_device`` (these keywords and
    ``derived``) runs first for a batched solve's :class:`fixedopt.Solution` from ``x``
    (its start, ``(B, n)``; ``bounded``: whether it has bounds; ``sigma`` and ``args``
    checked) where its rows do not run in chunks (an accelerator): the device path's
    (a small block), or the whole batch's in one call (a larger one: LAPACK's, as
    ``Model.fit``'s spectra of 10 parameters), as ``(key, lower)``: ``lower()`` traces
    and lowers it for the types the solution's fields will have, before the solve has
    run: the same ``jit``, so that the ``compile()`` of what it returns is the call's
    own (``fixedopt._driver.ahead.soon``; ``curve_fit`` and ``Model.fit`` on a TPU,
    ``fixedopt._driver.machine.covariance_compiled_ahead``). None where the rows run in
    chunks here."""
    if np.ndim(x) != 2:
        return None
    batch, n = np.shape(x)

    def rows(shape: tuple[int, ...], kind: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((batch, *shape), kind)

    start, constraints = solved_types(rows, n, jnp.result_type(x), bounded)
    if sigma is not None:  # as _check_sigma makes it
        sigma = jax.ShapeDtypeStruct(np.shape(sigma), jnp.result_type(sigma))  # type: ignore[assignment]
    data = (start, constraints, sigma, args_tuple(args))
    leaves = jax.tree.leaves(data)
    if buckets.chunks_here(leaves):
        return None
    several = len(paths(start, True)) > 1  # as _computed chooses
    device = several and batches.device_here(True, leaves)
    path = ON_DEVICE if device else EITHER if several else EXACT
    rule = Rule(absolute_sigma, at_bound == "fixed", pseudo_inverse)
    axes = args_in_axes(data[3], args_axes, batch)
    types = tuple((np.shape(leaf), jnp.result_type(leaf)) for leaf in leaves)
    precision = jax.config.jax_default_matmul_precision  # type: ignore[attr-defined]
    axes_leaves, axes_tree = jax.tree.flatten(axes, is_leaf=lambda axis: axis is None)
    key = ("covariance-on-device", residual_fun, rule, tuple(axes_leaves), axes_tree,
           jax.tree.structure(data), types, precision, derived, path)  # fmt: skip
    static = (residual_fun, True, rule, axes, derived, path)
    return key, functools.partial(_lowered_at, precision, *static, *data)


def _lowered_at(precision: str | None, *arguments: Any) -> Any:
    """``_compiled.lower(*arguments)`` at matmul ``precision``, the one in effect when
    :func:`early_on_device` ran (None: JAX's setting, untouched): it is lowered later
    (``fixedopt._driver.ahead.soon``, once the solve's arguments are checked), outside
    the caller's context (``fixedopt._driver.machine.covariance_precision``), and must
    be the program the call itself then lowers."""
    if precision is None:
        return _compiled.lower(*arguments)
    with jax.default_matmul_precision(precision):
        return _compiled.lower(*arguments)


def _check_sigma(value: ArrayLike, batch: int | None) -> jax.Array:
    sigma = jnp.asarray(value)
    if not jnp.issubdtype(sigma.dtype, jnp.floating):
        raise TypeError(f"`sigma` must be a floating-point array, got {sigma.dtype}")
    if batch is not None and (sigma.ndim == 0 or sigma.shape[0] != batch):
        raise ValueError(
            f"`sigma` must have the leading batch axis of size {batch} (batched=True), "
            f"got shape {tuple(sigma.shape)}"
        )
    return sigma


def _computed(
    residual_fun: ResidualFun,
    batched: bool,
    rule: Rule,
    axes: PyTree,
    derived: Derived | None,
    data: tuple[PyTree, Constraints, jax.Array | None, tuple[Any, ...]],
    on_device: bool,
) -> tuple[Covariance, PyTree]:
    """The compiled covariance (``fixedopt._results.covariance_program.compiled``) of
    ``data`` (``x, constraints, sigma, args``). A batch called at the top level on the
    CPU is computed in chunks of a fixed number of rows
    (:func:`fixedopt._numerics.buckets.in_chunks`), so that a new batch size compiles
    nothing new: a small free block's rows by the first of its paths, and those it does
    not certify again by the next (``covariance_batches.on_host``); ``on_device``, by
    the quick paths on the device and LAPACK's on the host's CPU
    (``covariance_batches.on_device``, for one fit ``one_on_device``); elsewhere in one
    call, each row by the first path that certifies it (``EITHER``)."""
    compute = functools.partial(_compiled, residual_fun, batched, rule, axes, derived)
    several = len(paths(data[0], batched)) > 1
    leaves, treedef = jax.tree.flatten(data)

    def run(path: str) -> Callable[[tuple[Any, ...], int], Any]:
        return lambda chunk, _: compute(path, *jax.tree.unflatten(treedef, chunk))

    device = several and batches.device_here(on_device, leaves)
    if not batched:
        if device:
            return batches.one_on_device(run, tuple(leaves))
        found, _, extra = compute(EITHER if several else EXACT, *data)
        return found, extra
    # Every leaf has the batch axis but the shared leaves of args (axis None).
    shared = jax.tree.leaves(axes, is_leaf=lambda axis: axis is None)
    flags = (True,) * (len(leaves) - len(shared)) + tuple(a == 0 for a in shared)
    batch = batch_size(data[0], "sol.x")
    if buckets.chunks_here(leaves):
        size = batches.chunk_rows(tuple(leaves), flags, batch)
        return batches.on_host(run, tuple(leaves), flags, batch, paths(data[0], batched), size)
    if device:
        return batches.on_device(run, tuple(leaves), flags)
    found, _, extra = compute(EITHER if several else EXACT, *data)
    return found, extra
