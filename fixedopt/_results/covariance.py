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
(:mod:`fixedopt._results.row_covariance`); all differentiable. On a TPU (its machine
profile: :data:`DEVICE_QR`) a small block takes the QR on the chip at any height, and
the rows it does not certify LAPACK's on the host's CPU. Each row's choice and
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
from fixedopt._numerics import buckets, cpu_compiler
from fixedopt._numerics.trace_state import at_top_level
from fixedopt._objective.arguments import args_tuple
from fixedopt._results import normal_inverse, small_inverse
from fixedopt._results.covariance_fields import Covariance as Covariance
from fixedopt._results.free_block import (
    Constraints,
    ResidualFun,
    args_in_axes,
    flat_index,
    solved_problem,
)
from fixedopt._results.row_covariance import (
    Inverse,
    Pieces,
    Rule,
    exact_inverse,
    finished,
    pieces,
    quick_inverse,
    select,
)
from fixedopt._results.solution_fields import SolutionFields

AT_BOUND = ("free", "fixed")
AT_BOUND_DEFAULT = "free"  # measured: docs/decisions.md, "Error bars with a bound active"
# ``(x, args) -> anything``: of one row, computed beside its covariance (covariance_and).
Derived = Callable[[PyTree, tuple[Any, ...]], PyTree]


def covariance(
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
) -> Covariance:
    """Covariance and standard errors of the free parameters of a least-squares fit.

    Per row: ``s^2 (J_F^T J_F)^{-1}`` on the free block ``F`` (not fixed; with
    ``at_bound="fixed"``, not bound-active either), ``s^2 = sum(r^2) / (m - n_F)``,
    where ``r = residual_fun(x, *args) / sigma``; the convention of
    ``scipy.optimize.curve_fit`` (``pcov``) and of lmfit (``vary=False`` parameters
    excluded). Fixed parameters get 0 variance and 0 covariance. A
    :class:`fixedopt.Solution` brings its fit's mask, bounds and bound-active
    entries, and whether it is batched: only the residuals and their ``args`` are
    needed.

    Args:
      sol: a :class:`fixedopt.Solution` of :func:`fixedopt.least_squares` (or its
        ``x`` alone, with ``fixed``). With a robust ``loss``, this is still the plain
        least-squares covariance at ``sol.x``.
      residual_fun: the residual function of the fit, ``residual_fun(x, *args)``.
      fixed: the fixed mask (any form ``least_squares`` accepts); by default
        ``sol.fixed``. Given, it is the mask used, even where it differs from the
        solve's: under ``jit`` the two cannot be compared, and a larger mask is a
        question worth asking (the error bars with more parameters held at their
        fitted values). Required when ``sol`` is an ``x`` alone.
      args: the fit's ``args`` (with ``batched=True``, arrays have the batch axis).
      batched: ``sol`` holds one fit per row; each row gets its own free set. By
        default, whether the ``Solution`` is batched (``False`` for an ``x`` alone).
      bounds: the bounds whose active entries are flagged; by default the solve's,
        with its own active set (``sol.at_bound``, the entries its implicit
        derivative holds). Given (or with an ``x`` alone), they are used instead, and
        the active set is found as the solve finds it, from the gradient ``J^T r`` at
        ``x``: the free entries on a bound that the gradient pushes against.
      sigma: the standard deviations of the residuals, an array broadcastable to
        ``residual_fun``'s output (with ``batched=True``, with the batch axis), as
        ``curve_fit``'s 1-D ``sigma``; fit the same weighted residuals.
      absolute_sigma: ``sigma`` is absolute: no rescaling by ``s^2``.
      at_bound: how a bound-active parameter enters (``Covariance.at_bound`` flags it
        either way). ``"free"`` (the default): like any free parameter, its
        Jacobian column stays in ``J_F``, as ``curve_fit`` and lmfit compute it; the
        error bars of the other parameters include its correlation with them.
        ``"fixed"``: held like a fixed parameter (0 variance, out of ``J_F``, not
        counted in ``dof``): the covariance of the fit conditional on the bound,
        whose other error bars are smaller. The default is measured:
        ``docs/decisions.md``, "Error bars with a bound active".
      args_axes: with ``batched=True``, which ``args`` are per row (as in
        :func:`fixedopt.least_squares`; by default the arrays).
      pseudo_inverse: how a rank-deficient row's free block is computed. True (the
        default; ``scipy.optimize.curve_fit``'s convention with ``least_squares``):
        the pseudo-inverse of ``J_F^T J_F`` for the parameters the data determine: a
        parameter the model does not depend on (a zero Jacobian column) leaves the
        others' as they are without it; collinear columns, the pseudo-inverse of the
        column-normalized Jacobian (units-invariant, unlike scipy's; held constant
        under ``jax.grad``). The parameters the data cannot determine (a zero column,
        or one of collinear columns) get ``inf`` variance and covariances, where
        scipy's pseudo-inverse gives 0 (an error bar of 0 for a parameter no data
        constrain; issue 63).
        False (``curve_fit``'s convention with ``leastsq``, its ``method="lm"``):
        ``inf`` on the free block of a rank-deficient row (``leastsq`` gives ``inf``
        where ``R`` is exactly singular, and numbers of no meaning where it is singular
        to rounding: here both are ``inf``).

    Returns:
      A :class:`fixedopt.Covariance`.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> t = jnp.linspace(0.0, 1.0, 5)
      >>> y = jnp.array([1.0, 1.6, 1.9, 2.6, 3.0])
      >>> line = lambda p: p[0] * t + p[1] + p[2] - y   # p[2] is known: 0
      >>> sol = fixedopt.least_squares(line, jnp.zeros(3), jnp.array([False, False, True]))
      >>> print(fixedopt.covariance(sol, line).stderr.round(4))
      [0.1222 0.0748 0.    ]
    """
    found, _ = covariance_and(
        None, sol, residual_fun, fixed, args=args, batched=batched, bounds=bounds, sigma=sigma,
        absolute_sigma=absolute_sigma, at_bound=at_bound, args_axes=args_axes,
        pseudo_inverse=pseudo_inverse,
    )  # fmt: skip
    return found


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
) -> tuple[Covariance, PyTree]:
    """:func:`covariance`, and ``derived(x, args)`` of each row (one row's ``x`` and
    ``args``), computed in the same compiled program: a model fit's tied and derived
    parameters with their derivatives (:mod:`fixedopt._models.fit`), which a program of
    their own would compile apart (0.1-0.2 s of a spectra fit's first call, issue 44).
    ``derived`` is static (hashable); None computes nothing (None in its place)."""
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
    result, extra = _computed(residual_fun, batched, rule, axes, derived, data)
    row = jax.tree.map(arrays.one_row, x) if batched else x
    return result._replace(index=flat_index(row)), extra


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
) -> tuple[Covariance, PyTree]:
    """:func:`_compiled` of ``data`` (``x, constraints, sigma, args``). A batch called
    at the top level on the CPU is computed in chunks of a fixed number of rows
    (:func:`fixedopt._numerics.buckets.in_chunks`), so that a new batch size compiles
    nothing new: a small free block's rows by the first of its :func:`_paths`, and those
    it does not certify again by the next (:func:`_on_host`); elsewhere in one call,
    each row by the first path that certifies it (:data:`EITHER`)."""
    compute = functools.partial(_compiled, residual_fun, batched, rule, axes, derived)
    paths = _paths(data[0], batched)
    if not batched:
        found, _, extra = compute(EITHER if len(paths) > 1 else EXACT, *data)
        return found, extra
    # Every leaf has the batch axis but the shared leaves of args (axis None).
    shared = jax.tree.leaves(axes, is_leaf=lambda axis: axis is None)
    flags = (True,) * (len(jax.tree.leaves(data)) - len(shared)) + tuple(a == 0 for a in shared)
    batch = batch_size(data[0], "sol.x")
    leaves, treedef = jax.tree.flatten(data)

    def run(path: str) -> Callable[[tuple[Any, ...], int], Any]:
        return lambda chunk, _: compute(path, *jax.tree.unflatten(treedef, chunk))

    if buckets.chunks_here(leaves):
        size = chunk_rows(tuple(leaves), flags, batch)
        return _on_host(run, tuple(leaves), flags, batch, paths, size)
    if len(paths) > 1 and _device_qr(leaves):
        return _on_device(run, tuple(leaves), flags)
    found, _, extra = compute(EITHER if len(paths) > 1 else EXACT, *data)
    return found, extra


# The backends whose covariance takes a small block's quick paths on the device, the QR
# whatever the block's height, and LAPACK's on the host's CPU for the rows they do not
# certify: a TPU's, where an SVD and a QR compile for seconds. The machine profile's
# choice (``fixedopt._driver.machine.Backend.device_qr_covariance``), named here by it.
DEVICE_QR: set[str] = set()


def _device_qr(leaves: list[Any]) -> bool:
    """Whether a batch with these leaves takes :func:`_on_device`: on a backend of
    :data:`DEVICE_QR`, called at the top level, no weakly typed leaf."""
    weak = any(getattr(leaf, "weak_type", False) for leaf in leaves)
    return cpu_compiler.platform() in DEVICE_QR and at_top_level() and not weak


def _on_device(
    run: Callable[[str], Callable[[tuple[Any, ...], int], Any]],
    leaves: tuple[Any, ...],
    flags: tuple[bool, ...],
) -> tuple[Covariance, PyTree]:
    """Every row by the quick paths (:data:`ON_DEVICE`) in one call on the device, and
    the rows they do not certify again by LAPACK's on the host's CPU, in chunks, as a
    CPU computes them (its program compiles only for a batch that has such a row)."""
    found, certified, extra = run(ON_DEVICE)(leaves, 0)
    redo = np.flatnonzero(~np.asarray(certified))
    if redo.size == 0:
        return found, extra
    rows = tuple(np.asarray(leaf)[redo] if flag else np.asarray(leaf)
                 for leaf, flag in zip(leaves, flags))  # fmt: skip
    with jax.default_device(jax.devices("cpu")[0]):
        again, _ = _on_host(run, rows, flags, redo.size, (EXACT,), None)
    return _put_back(found, again, redo), extra


def _on_host(
    run: Callable[[str], Callable[[tuple[Any, ...], int], Any]],
    leaves: tuple[Any, ...],
    flags: tuple[bool, ...],
    batch: int,
    paths: tuple[str, ...],
    size: int | None,
) -> tuple[Covariance, PyTree]:
    """Every row by the first of ``paths``, and the rows it did not certify again by
    the next ones, gathered on the host: each row's covariance is its own, whatever the
    rows around it (a choice for a whole chunk changed a row's last bits with its
    neighbours: docs/decisions.md, "Why the covariance was slow"), and a later path's
    program compiles only for a batch that needs it."""
    found, certified, extra = buckets.in_chunks(run(paths[0]), leaves, flags, batch, size)
    redo = np.flatnonzero(~np.asarray(certified)) if len(paths) > 1 else np.zeros(0, int)
    if redo.size == 0:
        return found, extra
    rows = tuple(np.asarray(leaf)[redo] if flag else leaf for leaf, flag in zip(leaves, flags))
    again, _ = _on_host(run, rows, flags, redo.size, paths[1:], None)
    return _put_back(found, again, redo), extra


def _put_back(found: Covariance, again: Covariance, redo: np.ndarray) -> Covariance:
    """``found`` with its rows ``redo`` those of ``again``, on the default device."""

    def put(every: jax.Array, some: jax.Array) -> jax.Array:
        host = np.array(every)
        host[redo] = np.asarray(some)
        put_back: jax.Array = jax.device_put(host)
        return put_back

    joined: Covariance = jax.tree.map(put, found, again)
    return joined


# A large batch runs in chunks of up to this many bytes of its rows' inputs, of at most
# LARGE_ROWS rows, where it has four of them or more: a call's overhead costs more than
# small rows do (Gpufit's spot, 100,000 fits: 391 calls of 256 rows took 1.5x the time of
# 49 of 2048, measured under load by an earlier try). A row's result is the same in any
# chunk: the programs' sums do not depend on the batch's size (ROW_WISE_OPTIONS).
LARGE_BYTES = 1 << 22
LARGE_ROWS = 4096


def chunk_rows(leaves: tuple[Any, ...], flags: tuple[bool, ...], batch: int) -> int | None:
    """Rows per chunk of a large batch (None: :func:`buckets.in_chunks`' own)."""
    row_bytes = sum(np.dtype(leaf.dtype).itemsize * int(np.prod(np.shape(leaf)[1:]))
                    for leaf, flag in zip(leaves, flags) if flag)  # fmt: skip
    rows = min(LARGE_ROWS, 1 << max(LARGE_BYTES // max(row_bytes, 1), 1).bit_length() - 1)
    return rows if rows > buckets.CHUNK_ROWS and batch >= 4 * rows else None


def _row_size(x: PyTree, batched: bool) -> int:
    """The number of entries of one row of ``x``."""
    return sum(int(np.prod(jnp.shape(leaf)[1 if batched else 0 :])) for leaf in jax.tree.leaves(x))


# The inverses a program takes: from the normal equations, by the elementwise QR (each
# with its rows' certificates), LAPACK's (exact), or each row's first certified one;
# on a device, each row's first certified by the quick paths, the QR for any height.
NORMAL, QUICK, EXACT, EITHER = "normal", "quick", "exact", "either"
ON_DEVICE = "on-device"


def _paths(x: PyTree, batched: bool) -> tuple[str, ...]:
    """The inverses a row of ``x`` may take, in order: the normal equations where they
    pay (:func:`fixedopt._results.normal_inverse.pays`), the QR for a small block, and
    LAPACK's always (a program's own shapes may send a path on to the next:
    :func:`_inverse`)."""
    n = _row_size(x, batched)
    dtype = jnp.result_type(*jax.tree.leaves(x)) if jax.tree.leaves(x) else jnp.float32
    small = (QUICK,) if small_inverse.is_small(n) else ()
    normal = (NORMAL,) if normal_inverse.pays(dtype, n) else ()
    return normal + small + (EXACT,)


def _row_covariances(
    residual_fun: ResidualFun,
    batched: bool,
    rule: Rule,
    axes: PyTree,
    derived: Derived | None,
    path: str,
    x: PyTree,
    constraints: Constraints,
    sigma: jax.Array | None,
    args: tuple[Any, ...],
) -> tuple[Covariance, jax.Array | None, PyTree]:
    """The covariance of one row (of each row, ``batched``), ``index`` left None, by
    the inverse ``path`` names (:func:`_inverse`); the rows' certificates (None for
    :data:`EXACT`); and ``derived`` of each row (on every path: a row computed again by
    a later path has it computed twice, and dropped). ``axes`` are the ``vmap`` axes of
    ``args``."""
    with_derived = derived is not None

    def one(
        x: PyTree, constraints: Constraints, sigma: jax.Array | None, args: PyTree
    ) -> tuple[Pieces, PyTree]:
        found = pieces(residual_fun, rule, x, constraints, sigma, args)
        return found, (derived(x, args) if with_derived and derived is not None else None)

    def over_rows(f: Callable[..., Any]) -> Callable[..., Any]:
        return jax.vmap(f) if batched else f

    if batched:
        sigma_axis = None if sigma is None else 0
        found, extra = jax.vmap(one, in_axes=(0, 0, sigma_axis, axes))(x, constraints, sigma, args)
    else:
        found, extra = one(x, constraints, sigma, args)
    paths = _paths(x, batched)
    if path == ON_DEVICE:
        chain = tuple(p for p in paths if p != EXACT)
    else:
        chain = paths if path == EITHER else paths[paths.index(path) :]
    inverse, certified = _inverse(rule, over_rows, found, chain, path in (EITHER, ON_DEVICE),
                                  path == ON_DEVICE)  # fmt: skip
    covariances = over_rows(functools.partial(finished, rule))(x, constraints, found, inverse)
    return covariances, (None if path == EXACT else certified), extra


def _inverse(
    rule: Rule,
    over_rows: Callable[..., Any],
    found: Pieces,
    chain: tuple[str, ...],
    on: bool,
    device: bool = False,
) -> tuple[Inverse, jax.Array]:
    """The rows' inverses by ``chain[0]`` and their certificates; with ``on``, the rows
    it does not certify by the rest of the chain (a ``cond`` on the batch, each row then
    picking its own: a vmapped ``cond`` would run both). A path whose shapes do not pay
    (the QR of a tall block) hands its rows on; the last (LAPACK's) certifies all.
    ``device``: a chain of quick paths alone, the QR at any height, the certificates
    any of them gave (:data:`ON_DEVICE`)."""
    path, rest = chain[0], chain[1:]
    if path == QUICK and not device and not small_inverse.pays(*found.jacobian.shape[-2:]):
        path, rest = rest[0], rest[1:]  # a tall block: LAPACK's, certified alike
    if path == EXACT:
        inverse: Inverse = over_rows(functools.partial(exact_inverse, rule.pseudo_inverse))(found)
        return inverse, jnp.ones(found.n_free.shape, bool)
    quick, certified = over_rows(functools.partial(quick_inverse, normal=path == NORMAL))(found)
    if not on or not rest:
        return quick, certified
    if device:

        def next_ones() -> tuple[Inverse, jax.Array]:
            inverse, more = _inverse(rule, over_rows, found, rest, True, True)
            return select(certified, quick, inverse), certified | more

        both: tuple[Inverse, jax.Array] = jax.lax.cond(
            jnp.all(certified), lambda: (quick, certified), next_ones
        )
        return both
    later = lambda: select(certified, quick, _inverse(rule, over_rows, found, rest, True)[0])
    chosen: Inverse = jax.lax.cond(jnp.all(certified), lambda: quick, later)
    return chosen, certified


# Compiled with XLA:CPU's elemental emitter at the top level, its reductions the same for
# every batch size (fixedopt._numerics.cpu_compiler.ROW_WISE_OPTIONS).
_compiled = cpu_compiler.jit_for_cpu(
    _row_covariances, (0, 1, 2, 3, 4, 5), cpu_compiler.ROW_WISE_OPTIONS
)
