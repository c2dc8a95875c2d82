"""``ModelResult.eval_uncertainty``: the model's confidence band, lmfit's
``eval_uncertainty`` with exact derivatives: ``scale * sqrt(diag(J C J^T))``, ``J`` the
model's derivatives with respect to every parameter at the best values, ``C`` their
propagated covariance, ``scale`` Student's t quantile of the two-sided probability
``sigma`` stands for (scipy's ``t.ppf``, as lmfit), at ``nfree`` degrees of freedom."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _t_scale(sigma: float, dof: np.ndarray) -> np.ndarray:
    """lmfit's ``t.ppf((prob + 1) / 2, dof)``, ``prob = erf(sigma / sqrt 2)`` (``sigma``
    below 1 is the probability itself)."""
    try:
        from scipy.stats import t
    except ImportError:
        raise ImportError("eval_uncertainty needs scipy (Student's t quantiles)") from None
    prob = sigma if sigma < 1.0 else math.erf(sigma / math.sqrt(2.0))
    return np.asarray(t.ppf((prob + 1.0) / 2.0, dof), float)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _variance(
    model: Any, names: tuple[str, ...], independent: tuple[str, ...], x_axis: Any,
    values: jax.Array, cov: jax.Array, xs: tuple[jax.Array, ...],
) -> jax.Array:  # fmt: skip
    """``diag(J C J^T)`` for each row: ``J`` the model's derivatives by every value."""

    def curve(v: jax.Array, x: tuple[jax.Array, ...]) -> jax.Array:
        out: jax.Array = model.curve(dict(zip(names, v)), dict(zip(independent, x)))
        return out

    jac = jax.vmap(jax.jacfwd(curve), in_axes=(0, x_axis))(values, xs)
    return jnp.einsum("bmi,bij,bmj->bm", jac, cov, jac)


def eval_uncertainty(result: Any, row: int | None, sigma: float, given: dict[str, Any]) -> Any:
    """The band of fit ``row`` (or of every fit) at ``given`` independent variables (by
    default the fit's own)."""
    take = slice(None) if row is None else slice(row, None if row == -1 else row + 1)
    names = tuple(result.model.independent_vars)
    chosen = {**result.independent, **given}
    per_fit = all(np.ndim(chosen[n]) == 2 for n in names) and not given
    xs = tuple(jnp.asarray(chosen[n][take] if per_fit else chosen[n]) for n in names)
    values, cov = jnp.asarray(result.values[take]), jnp.asarray(result.covariance[take])
    variance = _variance(result.model, result.names, names, 0 if per_fit else None, values, cov, xs)
    scale = _t_scale(sigma, result.nfree[take])
    band = scale[:, None] * np.sqrt(np.clip(np.asarray(variance), 0.0, None))
    band = band.astype(np.asarray(variance).dtype)  # the fit's dtype, not the quantile's
    return band if row is None else band[0]
