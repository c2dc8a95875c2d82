"""``fixedopt.covariance``: a least-squares fit's covariance, computed as this machine's
profile says (``fixedopt._driver.machine.covariance_on_device``: on a TPU, a small
block by the elementwise QR on the chip); the mathematics and the paths are
:mod:`fixedopt._results.covariance`'s. Also the program of a fit's covariance that
``curve_fit`` and ``Model.fit`` compile beside their solve where the profile says so
(:func:`covariance_ahead`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.typing import ArrayLike

from fixedopt._driver import cache, machine
from fixedopt._inputs.validate import Bounds, Mask, PyTree
from fixedopt._results.covariance import (
    AT_BOUND_DEFAULT,
    Covariance,
    covariance_and,
    early_on_device,
)
from fixedopt._results.free_block import ResidualFun
from fixedopt._results.solution_fields import SolutionFields


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
    with machine.covariance_precision():
        found, _ = covariance_and(
            None, sol, residual_fun, fixed, args=args, batched=batched, bounds=bounds,
            sigma=sigma, absolute_sigma=absolute_sigma, at_bound=at_bound,
            args_axes=args_axes, pseudo_inverse=pseudo_inverse,
            on_device=machine.covariance_on_device(),
        )  # fmt: skip
    return found


def covariance_ahead(
    residual_fun: ResidualFun,
    x: Any,
    bounded: bool,
    sigma: jax.Array | None,
    args: tuple[Any, ...],
    args_axes: Any,
    **keywords: Any,
) -> tuple[Any, Callable[[], Any]] | None:
    """The covariance program of a batched fit from ``x`` (its start, ``(B, n)``), as
    ``(key, lower)`` for ``ahead.soon`` once the solve's arguments are checked
    (:func:`fixedopt._results.covariance.early_on_device`, of these arguments and
    keywords): traced and lowered there, at the solve's matmul precision
    (``fixedopt._driver.machine.covariance_precision``), its XLA compile in fixedopt's
    thread while the caller traces and compiles the solve, where the machine profile
    says so (``fixedopt._driver.machine.covariance_compiled_ahead``: a TPU;
    ``docs/decisions.md``, "A TPU's covariance compiled beside its solve"): the device
    path's program, which evaluates the model's Jacobian; ``curve_fit``'s and
    ``Model.fit``'s. None elsewhere, or where the rows run in chunks here."""
    if not machine.covariance_compiled_ahead():
        return None
    # as the solve's first call would: the program's compile reads the persistent cache
    cache.use_default_cache()
    with machine.covariance_precision():
        return early_on_device(residual_fun, x, bounded, sigma, args, args_axes, **keywords)
