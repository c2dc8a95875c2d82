"""The data a least-squares fit weighs its residuals with: ``sigma`` (a standard
deviation per residual) and the ``counts`` of a Poisson likelihood.

Both travel in ``args``, appended after the user's own arguments, so that new data
with the same shapes reuse the compiled solve; per row (with their batch axis) in a
batch. ``sigma`` divides the residuals in a wrapper of ``residual_fun``
(:class:`Weighted`, hashed by the function it wraps, so the wrapper costs no
recompilation); the counts are read by the :class:`~fixedopt._objective.losses.Poisson` loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._inputs.checks import one_of
from fixedopt._inputs.validate import PyTree, batch_size, check_params, concrete_or_none
from fixedopt._objective.arguments import batched_args, default_axes
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


class FitData(NamedTuple):
    """What ``least_squares`` runs once its data are in ``args``."""

    residual_fun: Callable[..., Any]
    args: tuple[Any, ...]
    args_axes: Any
    loss: Loss | None  # None: plain least squares


def fit_data(
    residual_fun: Callable[..., Any],
    x0: PyTree,
    args: tuple[Any, ...],
    args_axes: Any,
    batched: bool,
    *,
    sigma: ArrayLike | None,
    estimator: str,
    counts: ArrayLike | None,
    loss: str | Rho,
    f_scale: float,
) -> FitData:
    """Check ``sigma``, ``estimator`` and ``counts`` together, and append the data to
    ``args`` (and a per-row axis to ``args_axes``)."""
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
    elif counts is not None:
        raise ValueError("`counts` has no effect without estimator='poisson': remove it")
    check_params(x0, "x0")
    batch = batch_size(x0) if batched else None
    dtype = jnp.result_type(*jax.tree.leaves(x0))
    if sigma is not None:
        value = row_data("sigma", sigma, batch, dtype, positive=True)
        args, args_axes = append_arg(args, args_axes, ("sigma", value), x0 if batched else None)
        return FitData(Weighted(residual_fun), args, args_axes, robust)
    if counts is not None:
        value = row_data("counts", counts, batch, dtype, positive=False)
        args, args_axes = append_arg(args, args_axes, ("counts", value), x0 if batched else None)
        return FitData(residual_fun, args, args_axes, Poisson())
    return FitData(residual_fun, args, args_axes, robust)


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
    concrete = concrete_or_none(array)
    if positive and concrete is not None and np.any(concrete <= 0):
        raise ValueError(f"`{name}` must be positive, got a minimum of {np.nanmin(concrete)}")
    array = array.astype(dtype)
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


def _is_numbers(value: object) -> bool:
    if isinstance(value, (int, float, np.number)):
        return True
    return isinstance(value, (list, tuple)) and all(map(_is_numbers, value))


def append_arg(
    args: tuple[Any, ...], args_axes: Any, data: tuple[str, jax.Array], x0: PyTree | None
) -> tuple[tuple[Any, ...], Any]:
    """``args + (value,)`` for ``data = (name, value)``, and ``args_axes`` with ``0``
    (per row) for it; ``x0``: the batched starting point, or None without a batch.

    By default (``args_axes=None``) the axes become explicit, each array per row, so
    that the appended data are not taken for the user's arguments: the user's own
    are checked (and an ambiguous batch axis warned of) here, before the append."""
    name, value = data
    if x0 is None:
        return (*args, value), args_axes
    if args_axes is None:
        batched_args(args, None, batch_size(x0), {"x0": x0, name: value})
        return (*args, value), (*default_axes(args), 0)
    # A tuple of axes, or one axis for every argument:
    axes = tuple(args_axes) if isinstance(args_axes, (tuple, list)) else (args_axes,) * len(args)
    return (*args, value), (*axes, 0)
