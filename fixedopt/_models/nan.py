"""``Model.fit``'s ``nan_policy``, lmfit's three: ``"raise"`` refuses NaN in the data or
the weights, ``"propagate"`` lets it through (each fit with a NaN stops with its own
status; the other fits are untouched), ``"omit"`` leaves each NaN point out of its fit
(weight 0, counted in no fit's data points); a fit left with fewer points than free
parameters (an all-NaN pixel of a map) stops with status ``NONFINITE``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.status import Reason, Status

NAN_POLICIES = ("raise", "propagate", "omit")


def _first_nan(name: str, array: jax.Array) -> str:
    row, point = (int(i) for i in np.argwhere(np.isnan(np.asarray(array)))[0])
    return f"`{name}` is NaN at fit {row}, point {point}"


def apply_nan_policy(
    nan_policy: str, data: jax.Array, weights: jax.Array | None, poisson: bool
) -> tuple[jax.Array, jax.Array | None, jax.Array | None]:
    """``(data, weights, omitted)``: with ``"omit"``, the NaN points of ``data`` (and of
    ``weights``) get data 0 and weight 0, and ``omitted`` marks them ``(B, m)``;
    otherwise the inputs unchanged and ``omitted`` None."""
    if not (isinstance(nan_policy, str) and nan_policy in NAN_POLICIES):
        raise ValueError(f"`nan_policy` must be one of {NAN_POLICIES}, got {nan_policy!r}")
    given = {"data": data} if weights is None else {"data": data, "weights": weights}
    nans = {name: np.isnan(np.asarray(array)) for name, array in given.items()}  # on the host
    if nan_policy == "propagate" or not any(bool(mask.any()) for mask in nans.values()):
        return data, weights, None
    if nan_policy == "raise":
        name = next(name for name, mask in nans.items() if mask.any())
        raise ValueError(
            f"{_first_nan(name, given[name])} (nan_policy='raise', lmfit's default): pass "
            "nan_policy='omit' to leave such points out of their fit, or 'propagate' to "
            "let those fits stop with status NONFINITE"
        )
    if poisson:
        raise ValueError(
            "nan_policy='omit' needs a weighted least-squares fit: with estimator='poisson' "
            "a point cannot be weighted out; drop the NaN counts, or use 'propagate'"
        )
    omitted = nans["data"] if weights is None else nans["data"] | nans["weights"]
    weights = jnp.ones_like(data) if weights is None else weights
    return jnp.where(omitted, 0.0, data), jnp.where(omitted, 0.0, weights), omitted


def too_few_points(solution: Any, omitted: jax.Array | None) -> Any:
    """``solution`` with each fit that ``omit`` left with fewer points than free
    parameters marked ``NONFINITE`` (its data were NaN: nothing determines it)."""
    if omitted is None:
        return solution
    kept = omitted.shape[1] - jnp.sum(omitted, axis=1)
    under = kept < jnp.sum(~solution.fixed, axis=1)
    return solution._replace(
        status=jnp.where(under, Status.NONFINITE, solution.status).astype(jnp.int32),
        reason=jnp.where(under, Reason.NONE, solution.reason).astype(jnp.int32),
        converged=solution.converged & ~under,
    )
