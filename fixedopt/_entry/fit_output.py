"""What ``curve_fit`` returns beyond ``popt``: scipy's ``pcov`` conventions per
``method``, its ``OptimizeWarning``, and ``full_output``'s ``infodict``, ``mesg`` and
``ier``, per fit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.status import Reason, Status
from fixedopt._inputs.notices import warn_optimize
from fixedopt._inputs.validate import concrete_or_none
from fixedopt._results.solution import Solution

# scipy's ``ier``: leastsq's MINPACK ``info`` for "lm", least_squares' ``status`` else.
_LM = {Reason.FTOL: 1, Reason.XTOL: 2, Reason.GTOL: 4, Reason.ABS_GTOL: 4, Reason.PRECISION: 1}
_TRF = {Reason.GTOL: 1, Reason.FTOL: 2, Reason.XTOL: 3, Reason.ABS_GTOL: 1, Reason.PRECISION: 2}
_LM_FAILED = {Status.MAX_STEPS: 5, Status.STALLED: 6, Status.LINESEARCH_FAILED: 8}
_TRF_FAILED = {Status.MAX_STEPS: 0}


def warn_if_not_estimated(pcov: jax.Array) -> None:
    """scipy's ``OptimizeWarning`` when a fit's ``pcov`` is ``inf`` (rank-deficient
    with ``"lm"``, or no more data points than free parameters), naming the fits; only
    where ``pcov`` is concrete (not under ``jit``)."""
    value = concrete_or_none(pcov)
    if value is None:
        return
    rows = np.any(np.isinf(value), axis=(-2, -1))
    if not np.any(rows):
        return
    which = ""
    if value.ndim > 2:
        listed = np.flatnonzero(rows)
        shown = ", ".join(map(str, listed[:10])) + (", ..." if listed.size > 10 else "")
        which = f" in {listed.size} of {rows.size} fits ({shown})"
    warn_optimize(
        f"Covariance of the parameters could not be estimated{which}: the Jacobian is "
        "rank-deficient (a parameter the model does not depend on, such as a decay whose "
        "amplitude is 0, or two that act alike; all-zero weights), or there are no more "
        "data points than free parameters; pcov and the standard errors are inf for the "
        "parameters the data cannot determine"
    )


def ier_and_message(solution: Solution, method: str) -> tuple[Any, Any]:
    """scipy's ``ier`` and ``mesg`` of each fit (an int and a str for one fit). Under
    ``jit`` (a traced status) ``ier`` is an array and ``mesg`` None."""
    converged, failed = (_LM, _LM_FAILED) if method == "lm" else (_TRF, _TRF_FAILED)
    other = 0 if method == "lm" else -1
    status = concrete_or_none(solution.status)
    if status is None:
        by_reason = jnp.array([converged.get(r, 1) for r in Reason])
        by_status = jnp.array([failed.get(s, other) for s in Status])
        ier = jnp.where(solution.status == Status.CONVERGED, by_reason[solution.reason],
                        by_status[solution.status])  # fmt: skip
        return ier, None
    reason = np.asarray(solution.reason)

    def one(code: int, why: int) -> tuple[int, str]:
        state = Status(int(code))
        if state == Status.CONVERGED:
            test = Reason(int(why))
            return converged.get(test, 1), f"{state.name} ({test.name}): {test.message}"
        return failed.get(state, other), f"{state.name}: {state.message}"

    pairs = [one(c, r) for c, r in zip(status.ravel(), reason.ravel())]
    if status.ndim == 0:
        return pairs[0]
    return np.array([p[0] for p in pairs]), [p[1] for p in pairs]


def infodict(
    residual: Callable[..., Any],
    solution: Solution,
    args: tuple[Any, ...],
    axes: Any,
    sigma: jax.Array | None,
    method: str,
) -> dict[str, Any]:
    """``nfev`` (steps + 1: one evaluation of the residuals and their Jacobian per
    step), ``fvec`` (the weighted residuals at ``popt``), and with ``"lm"`` MINPACK's
    ``fjac``, ``ipvt`` and ``qtf`` of an unpivoted QR factorization of the weighted
    Jacobian (``ipvt`` the identity): ``fjac.T[:k]`` is its ``R``, ``qtf`` is
    ``Q^T fvec``."""
    batched = axes is not None
    sigma_axis = None if sigma is None or not batched else 0
    fvec, r, qtf = _at_solution(residual, batched, axes, sigma_axis, solution.x, args, sigma)
    info: dict[str, Any] = {"nfev": solution.steps + 1, "fvec": fvec}
    if method == "lm":
        m = fvec.shape[-1]
        padding = [(0, 0)] * (r.ndim - 1) + [(0, max(m - r.shape[-1], 0))]
        info["fjac"] = jnp.pad(jnp.swapaxes(r, -1, -2), padding)
        info["ipvt"] = np.broadcast_to(np.arange(1, r.shape[-1] + 1), r.shape[:-1])
        info["qtf"] = qtf
    return info


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _at_solution(
    residual: Callable[..., Any],
    batched: bool,
    axes: Any,
    sigma_axis: int | None,
    p: jax.Array,
    args: tuple[Any, ...],
    sigma: jax.Array | None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    def weighted(p: jax.Array, args: tuple[Any, ...], sigma: jax.Array | None) -> jax.Array:
        r = residual(p, *args)
        if sigma is not None:
            r = jnp.where(jnp.isinf(sigma), 0.0, r / sigma)
        return jnp.ravel(r)

    def one(p: jax.Array, args: tuple[Any, ...], sigma: jax.Array | None) -> Any:
        fvec = weighted(p, args, sigma)
        jacobian = jax.jacfwd(weighted)(p, args, sigma)
        q, r = jnp.linalg.qr(jacobian)
        return fvec, r, q.T @ fvec

    if not batched:
        single: tuple[jax.Array, jax.Array, jax.Array] = one(p, args, sigma)
        return single
    out: tuple[jax.Array, jax.Array, jax.Array] = jax.vmap(one, in_axes=(0, axes, sigma_axis))(
        p, args, sigma
    )
    return out
