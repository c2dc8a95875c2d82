"""The data a least-squares fit weighs its residuals with: ``sigma`` (a standard
deviation per residual) and the ``counts`` of a Poisson likelihood, and the loss
they go with.

Both are named fields of the solve's inputs (``fixedopt._driver.plan.Inputs``);
inside the compiled solve they ride at the end of ``args`` (per row in a batch), so
that new data with the same shapes reuse the program. ``sigma`` divides the residuals
in a wrapper of ``residual_fun`` (:class:`Weighted`); the counts are read by the
:class:`~fixedopt._objective.losses.Poisson` loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._inputs.checks import one_of
from fixedopt._inputs.validate import PyTree, concrete_or_none
from fixedopt._objective.losses import Loss, Poisson, Rho, robust_loss

ESTIMATORS = ("least_squares", "poisson")


@dataclasses.dataclass(frozen=True)
class Weighted:
    """``residual_fun(x, *args) / sigma``, ``sigma`` the last of ``args``."""

    fun: Callable[..., Any]

    def __call__(self, x: PyTree, *args: Any) -> jax.Array:
        *fun_args, sigma = args
        residual = jnp.asarray(self.fun(x, *fun_args))
        try:
            fits = np.broadcast_shapes(jnp.shape(sigma), residual.shape) == residual.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"`sigma` (one row: shape {tuple(jnp.shape(sigma))}) must broadcast to "
                f"the residuals of one row, shape {tuple(jnp.shape(residual))}"
            )
        if jnp.ndim(sigma) not in (0, residual.ndim):  # no implicit rank promotion
            sigma = jnp.broadcast_to(sigma, residual.shape)
        weighted: jax.Array = residual / sigma
        return weighted


def fit_loss(
    estimator: str, loss: str | Rho, f_scale: float, sigma: Any, counts: Any
) -> Loss | None:
    """The :class:`~fixedopt._objective.losses.Loss` of a fit (None: plain least
    squares), after checking ``estimator``, ``loss``, ``sigma`` and ``counts`` together."""
    one_of("estimator", estimator, ESTIMATORS)
    robust = robust_loss(loss, f_scale)
    if estimator == "poisson":
        if counts is None:
            raise ValueError("`counts` must be given with estimator='poisson' (the data)")
        if sigma is not None:
            raise ValueError(
                "`sigma` has no effect with estimator='poisson' (the variance of a count "
                "is the model's value): remove it"
            )
        if robust is not None:
            raise ValueError(f"`loss={loss!r}` cannot be combined with estimator='poisson'")
        return Poisson()
    if counts is not None:
        raise ValueError("`counts` has no effect without estimator='poisson': remove it")
    return robust


def row_data(
    name: str, value: ArrayLike, batch: int | None, dtype: Any, *, positive: bool
) -> jax.Array:
    """``value`` as a floating-point array of ``dtype``; with a batch, with its
    leading batch axis (a scalar is broadcast to every row). ``positive``: a known
    value must be > 0 (NaN is left to the row it is in)."""
    if isinstance(value, bool) or (not hasattr(value, "dtype") and not _is_numbers(value)):
        raise TypeError(f"`{name}` must be an array of numbers, got {type(value).__name__}")
    array = jnp.asarray(value)
    if not (jnp.issubdtype(array.dtype, jnp.floating) or jnp.issubdtype(array.dtype, jnp.integer)):
        raise TypeError(f"`{name}` must be a real array, got dtype {array.dtype}")
    concrete = concrete_or_none(value)
    if positive and concrete is not None and np.any(concrete <= 0):
        raise ValueError(f"`{name}` must be positive, got a minimum of {np.nanmin(concrete)}")
    array = representable(name, value, dtype)
    if batch is None:
        return array
    if array.ndim == 0:
        return jnp.broadcast_to(array, (batch,))
    if array.shape[0] != batch:
        raise ValueError(
            f"`{name}` must have the leading batch axis of size {batch} (batched=True), "
            f"or be a scalar shared by every row, got shape {tuple(array.shape)}"
        )
    return array


def representable(name: str, value: Any, dtype: Any) -> jax.Array:
    """``value`` as a JAX array of ``dtype``; a ``ValueError`` where a known nonzero
    finite value becomes 0 or inf in it (a ``sigma`` of 1e-50 is 0 in float32: no
    weight at all), NumPy's float64 read before JAX casts it."""
    cast = jnp.asarray(value).astype(dtype)
    before, after = concrete_or_none(value), concrete_or_none(cast)
    if before is None or after is None:
        return cast
    lost = np.isfinite(before) & (before != 0) & ((after == 0) | ~np.isfinite(after))
    if np.any(lost):
        value = before[lost].flat[0]
        raise ValueError(
            f"`{name}` holds {float(value)}, which is {after[lost].flat[0]} in "
            f"{np.dtype(dtype).name} "
            f"(the dtype of the fit): rescale `{name}` and the data it goes with (e.g. to "
            f"units where it is near 1), or fit in float64"
        )
    return cast


def _is_numbers(value: object) -> bool:
    if isinstance(value, (int, float, np.number)):
        return True
    return isinstance(value, (list, tuple)) and all(map(_is_numbers, value))
