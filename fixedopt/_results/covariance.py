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
is held like a fixed one (the covariance conditional on the bound). The inverse comes
from a QR factorization of ``J`` (differentiable; see ``inverse_normal_matrix``).
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
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.typing import ArrayLike

from fixedopt._fixing.mask import unravel_mask
from fixedopt._inputs import arrays
from fixedopt._inputs.checks import boolean, one_of
from fixedopt._inputs.validate import Bounds, Mask, PyTree, batch_size
from fixedopt._numerics import buckets, cpu_compiler
from fixedopt._objective.arguments import args_tuple
from fixedopt._results.free_block import (
    Constraints,
    ResidualFun,
    args_in_axes,
    flat_index,
    held_entries,
    inverse_normal_matrix,
    no_fit,
    npoints,
    numerical_rank,
    residual_variance,
    solved_problem,
)
from fixedopt._results.solution_fields import SolutionFields

AT_BOUND = ("free", "fixed")
AT_BOUND_DEFAULT = "free"  # measured: docs/decisions.md, "Error bars with a bound active"
# ``(x, args) -> anything``: of one row, computed beside its covariance (covariance_and).
Derived = Callable[[PyTree, tuple[Any, ...]], PyTree]


class Covariance(NamedTuple):
    """What :func:`fixedopt.covariance` returns; a pytree (works under ``jit``).

    With ``batched=True`` every field but ``index`` has the leading batch axis.

    Attributes:
      covariance: ``(n, n)``, over the flat parameter vector ``ravel_pytree(x)``
        (leaves in ``jax.tree.leaves`` order, each raveled in C order): entry
        ``[index[a], index[b]]`` couples parameters ``a`` and ``b``. Rows and columns
        of fixed parameters (and, with ``at_bound="fixed"``, bound-active ones) are
        exactly 0.
      stderr: the standard errors, a tree like ``x``; 0 where ``covariance``'s
        diagonal is (fixed parameters), ``inf`` for a free parameter the data cannot
        determine (a rank-deficient row), NaN on the free block of a row whose
        residuals are not finite at ``x``, and of a :class:`fixedopt.Solution`'s row
        whose solve failed (status ``NONFINITE`` or ``INFEASIBLE``).
      rank_deficient: ``J_F`` has numerical rank below the number of free
        parameters (its covariance does not exist): the row's free block is the
        pseudo-inverse, ``inf`` for the parameters the data cannot determine (see
        ``pseudo_inverse``).
      dof: degrees of freedom ``m - n_free`` (``n_free`` counts the parameters in
        ``F``: neither fixed nor, with ``at_bound="fixed"``, bound-active ones; ``m``
        the residuals, less those of infinite ``sigma``, which weigh 0).
        With ``dof <= 0`` and ``absolute_sigma=False`` the free block is ``inf``,
        as in ``curve_fit``.
      residual_variance: ``s^2``, the factor applied to ``(J_F^T J_F)^{-1}`` (1 with
        ``absolute_sigma=True``).
      fixed: the fixed mask, a tree of booleans like ``x``.
      at_bound: the bound-active free entries (on a bound that the gradient pushes
        against), flagged with either ``at_bound`` option (with ``"fixed"``, held like
        fixed ones).
      index: a tree like one row of ``x`` (no batch axis) of ``int32`` positions in
        the flat vector.
    """

    covariance: jax.Array
    stderr: PyTree
    rank_deficient: jax.Array
    dof: jax.Array
    residual_variance: jax.Array
    fixed: Mask
    at_bound: PyTree
    index: PyTree

    def correlation(self) -> jax.Array:
        """``covariance / outer(stderr, stderr)``; 0 where a standard error is 0."""
        flat = jax.vmap(lambda t: ravel_pytree(t)[0]) if self.covariance.ndim == 3 else None
        sd = flat(self.stderr) if flat else ravel_pytree(self.stderr)[0]
        outer = sd[..., :, None] * sd[..., None, :]
        return jnp.where(outer == 0, 0.0, self.covariance / jnp.where(outer == 0, 1.0, outer))


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
    rule = _Rule(absolute_sigma, at_bound == "fixed", boolean("pseudo_inverse", pseudo_inverse))
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


class _Rule(NamedTuple):
    """The static choices of a covariance: ``absolute_sigma``; ``hold`` bound-active
    entries (``at_bound="fixed"``); ``pseudo_inverse`` for a rank-deficient row."""

    absolute_sigma: bool
    hold: bool
    pseudo_inverse: bool


def _computed(
    residual_fun: ResidualFun,
    batched: bool,
    rule: _Rule,
    axes: PyTree,
    derived: Derived | None,
    data: tuple[PyTree, Constraints, jax.Array | None, tuple[Any, ...]],
) -> tuple[Covariance, PyTree]:
    """:func:`_compiled` of ``data`` (``x, constraints, sigma, args``). A batch called
    at the top level on the CPU is computed in chunks of a fixed number of rows
    (:func:`fixedopt._numerics.buckets.in_chunks`), so that a new batch size compiles
    nothing new."""
    compute = functools.partial(_compiled, residual_fun, batched, rule, axes, derived)
    if not batched:
        result: tuple[Covariance, PyTree] = compute(*data)
        return result
    # Every leaf has the batch axis but the shared leaves of args (axis None).
    shared = jax.tree.leaves(axes, is_leaf=lambda axis: axis is None)
    flags = (True,) * (len(jax.tree.leaves(data)) - len(shared)) + tuple(a == 0 for a in shared)
    chunked: tuple[Covariance, PyTree] = buckets.map_in_chunks(
        compute, data, flags, batch_size(data[0], "sol.x")
    )
    return chunked


def _row_covariances(
    residual_fun: ResidualFun,
    batched: bool,
    rule: _Rule,
    axes: PyTree,
    derived: Derived | None,
    x: PyTree,
    constraints: Constraints,
    sigma: jax.Array | None,
    args: tuple[Any, ...],
) -> tuple[Covariance, PyTree]:
    """The covariance of one row (of each row, ``batched``), ``index`` left None, and
    ``derived`` of it; ``axes`` are the ``vmap`` axes of ``args``."""

    def one(
        x: PyTree, constraints: Constraints, sigma: jax.Array | None, args: PyTree
    ) -> tuple[Covariance, PyTree]:
        found = _row(residual_fun, rule, x, constraints, sigma, args)
        return found, (None if derived is None else derived(x, args))

    if not batched:
        return one(x, constraints, sigma, args)
    sigma_axis = None if sigma is None else 0
    return jax.vmap(one, in_axes=(0, 0, sigma_axis, axes))(x, constraints, sigma, args)


# Compiled with XLA:CPU's elemental emitter at the top level (fixedopt._numerics.cpu_compiler).
_compiled = cpu_compiler.jit_for_cpu(_row_covariances, static_argnums=(0, 1, 2, 3, 4))


def _unknowable(
    block: jax.Array, undetermined: jax.Array, residual: jax.Array, constraints: Constraints
) -> jax.Array:
    """``block`` with what the row cannot know: a parameter the data cannot determine
    has no finite error, whatever s^2 (0 for data fitted exactly: an all-zero signal),
    and its covariances with the others neither (inf); a row whose residuals are not
    finite at x (NaN data, a model that turned non-finite) has no covariance, even where
    the variance is taken as 1 (absolute_sigma: the Poisson Fisher information reads the
    model alone), nor has a row whose solve failed, at the finite point it stopped at
    (NaN)."""
    block = jnp.where(undetermined[:, None] | undetermined[None, :], jnp.inf, block)
    finite = jnp.all(jnp.isfinite(residual))
    return jnp.where(~finite | no_fit(constraints), jnp.nan, block)


def _row(
    residual_fun: ResidualFun,
    rule: _Rule,
    x: PyTree,
    constraints: Constraints,
    sigma: jax.Array | None,
    args: PyTree,
) -> Covariance:
    flat_x, unravel = ravel_pytree(x)
    fixed = ravel_pytree(constraints.fixed)[0]

    # Fixed entries read a constant: exact zero Jacobian columns. An infinite sigma
    # (curve_fit's nan_policy="omit" in a batch) weighs its residual 0. Twice: jacfwd
    # (has_aux=True) gives the residuals with their Jacobian, from one trace.
    def weighted(flat: jax.Array) -> tuple[jax.Array, jax.Array]:
        r = residual_fun(unravel(jnp.where(fixed, flat_x, flat)), *args)
        r = jnp.ravel(r if sigma is None else jnp.where(jnp.isinf(sigma), 0.0, r / sigma))
        return r, r

    jacobian, residual = jax.jacfwd(weighted, has_aux=True)(flat_x)
    at_bound, frozen = held_entries(flat_x, constraints, rule.hold, lambda: residual @ jacobian)
    jacobian = jnp.where(frozen[None, :], 0.0, jacobian)  # held: zero columns too
    points = residual.size if sigma is None else npoints(sigma, residual_fun, flat_x, unravel, args)
    n_free = jnp.sum(~frozen)
    dof = points - n_free
    # Unit columns: the rank test and the inverse then do not depend on the units of
    # the parameters (in float32, columns 1e6 apart passed for rank-deficient).
    squared = jnp.sum(jacobian**2, axis=0)  # 0 at frozen columns: kept off the sqrt,
    column_scale = jnp.sqrt(jnp.where(squared > 0, squared, 1.0))  # whose slope is inf
    jacobian = jacobian / column_scale[None, :]
    zero = (squared == 0) & ~frozen  # a free parameter the residuals do not depend on
    rank, largest, pseudo, undetermined = numerical_rank(jax.lax.stop_gradient(jacobian))
    undetermined = (undetermined | zero) & ~frozen & (rank < n_free)
    rank_deficient = rank < n_free
    # The QR reads the SVD's largest singular value, so it runs after the SVD: jaxlib
    # 0.10's CPU LAPACK kernels deadlock when two run side by side on a 2-core pool (seen:
    # gesdd and geqrf, both in ParallelBatchMap; an optimization_barrier did not order
    # them). tests/test_hlo.py checks the dependency. Zero columns are held out of the
    # QR (the pseudo-inverse of a zero column is 0; leastsq's R is singular there).
    unscaled = inverse_normal_matrix(jacobian, frozen | zero, largest)
    unscaled = jnp.where(zero[:, None] | zero[None, :], 0.0, unscaled)
    if rule.pseudo_inverse:  # collinear columns beyond the zero ones: the SVD's
        collinear = rank < n_free - jnp.sum(zero)
        unscaled = jnp.where(collinear, pseudo, unscaled)
        singular = jnp.zeros((), bool)
    else:
        singular = rank_deficient
    unscaled = unscaled / (column_scale[:, None] * column_scale[None, :])
    variance = residual_variance(rule.absolute_sigma, residual, dof)
    both_free = ~frozen[:, None] & ~frozen[None, :]
    block = jnp.where(jnp.isinf(variance) | singular, jnp.inf, variance * unscaled)
    cov = jnp.where(both_free, _unknowable(block, undetermined, residual, constraints), 0.0)
    stderr = jnp.sqrt(jnp.diagonal(cov))
    return Covariance(
        covariance=cov,
        stderr=unravel(stderr),
        rank_deficient=rank_deficient,
        dof=dof.astype(jnp.int32),
        residual_variance=variance,
        fixed=constraints.fixed,
        at_bound=unravel_mask(at_bound, constraints.fixed),
        index=None,
    )
