"""``curve_fit``'s ``check_finite`` and ``nan_policy``, as scipy reads them.

One fit (``batched=False``) follows scipy exactly: ``check_finite`` (by default when
``nan_policy`` is None) refuses data with NaN or inf; ``nan_policy="raise"`` refuses
NaN; ``"omit"`` deletes each data point whose ``ydata`` or any ``xdata`` value is NaN.
A batch keeps its shapes (rows differ in which points they lose): an omitted point
keeps its place with an infinite ``sigma`` (weight 0; its ``xdata`` replaced by a
finite one so the model stays finite there, its ``ydata`` by 0) and is not counted
among the data points of its row's covariance. ``check_finite`` is off by default in
a batch: a fit with NaN data reports it (``Status.NONFINITE``, NaN ``pcov``) and the
others run.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs.checks import boolean
from fixedopt._inputs.validate import PyTree, concrete_or_none

NAN_POLICIES = (None, "raise", "omit")


def data_policy(check_finite: Any, nan_policy: Any, batched: bool) -> tuple[bool, str | None]:
    """``(check_finite, nan_policy)``, validated, with scipy's default for the first
    (True when ``nan_policy`` is None), False in a batch."""
    if nan_policy == "propagate":
        raise ValueError(
            "`nan_policy='propagate'` is not supported by this function. (As in scipy; "
            "to let a fit with NaN data report it, status NONFINITE and a NaN pcov, pass "
            "check_finite=False with nan_policy=None.)"
        )
    if not (nan_policy is None or (isinstance(nan_policy, str) and nan_policy in NAN_POLICIES)):
        raise ValueError(f"nan_policy must be one of {{None, 'raise', 'omit'}}, got {nan_policy!r}")
    if check_finite is None:
        check_finite = nan_policy is None and not batched
    return boolean("check_finite", check_finite, expected="a bool or None"), nan_policy


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def check_data(xdata: PyTree, ydata: jax.Array, check_finite: bool, nan_policy: str | None) -> None:
    """scipy's refusals of non-finite data, where the data are concrete."""
    named = {"xdata": jax.tree.leaves(xdata), "ydata": [ydata]}
    for name, leaves in named.items():
        for leaf in leaves:
            value = concrete_or_none(leaf)
            if value is None or not np.issubdtype(value.dtype, np.inexact):
                continue
            if check_finite and not np.all(np.isfinite(value)):
                raise ValueError(
                    f"`{name}` must not contain infs or NaNs (check_finite=True, scipy's "
                    f"default): found {value[_first(~np.isfinite(value))]} at index "
                    f"{_first(~np.isfinite(value))}. Pass nan_policy='omit' to leave such "
                    "points out, or check_finite=False to let the fit report them"
                )
            if nan_policy == "raise" and np.any(np.isnan(value)):
                raise ValueError(
                    f"The input contains nan values: `{name}` at index "
                    f"{_first(np.isnan(value))} (nan_policy='raise'; 'omit' leaves them out)"
                )


def _x_has_nan(xdata: jax.Array, batch_axis: bool) -> jax.Array:
    """Per data point (the last axis), whether any ``xdata`` value of it is NaN."""
    nan = jnp.isnan(xdata) if jnp.issubdtype(xdata.dtype, jnp.inexact) else xdata != xdata
    first = 1 if batch_axis else 0
    return jnp.any(nan, axis=tuple(range(first, nan.ndim - 1))) if nan.ndim > first else nan


def omit_one_fit(xdata: PyTree, ydata: np.ndarray, sigma: Any) -> tuple[PyTree, Any, Any]:
    """scipy's ``nan_policy="omit"`` for one fit: the points with NaN deleted."""
    x = np.asarray(xdata) if isinstance(xdata, (np.ndarray, jax.Array)) else None
    if ydata.ndim != 1:
        raise ValueError(f"nan_policy='omit' needs 1-D `ydata`, got shape {ydata.shape}")
    drop = np.isnan(ydata)
    if x is not None and x.ndim >= 1 and np.issubdtype(x.dtype, np.inexact):
        drop = drop | np.asarray(_x_has_nan(jnp.asarray(x), False))
    if not drop.any():
        return xdata, ydata, sigma
    keep = ~drop
    if x is not None and x.ndim >= 1:
        xdata = jnp.asarray(x[..., keep])
    if sigma is not None:
        s = np.asarray(sigma)
        sigma = s[keep] if s.ndim == 1 else (s[keep][:, keep] if s.ndim == 2 else s)
    return xdata, ydata[keep], sigma


def omit_rows(
    xdata: PyTree, ydata: jax.Array, sigma: jax.Array | None, per_fit: bool
) -> tuple[PyTree, jax.Array, jax.Array]:
    """``nan_policy="omit"`` in a batch: each omitted point weighs 0 (``sigma`` inf),
    its ``ydata`` 0 and its ``xdata`` a finite value of the same array."""
    if sigma is not None and sigma.ndim == ydata.ndim + 1:
        raise ValueError(
            "nan_policy='omit' with a 2-D `sigma` (covariance matrices) needs one fit at a "
            "time (batched=False), where the points are deleted as in scipy"
        )
    drop = jnp.isnan(ydata)
    leaves, treedef = jax.tree.flatten(xdata)
    safe = []
    for leaf in leaves:
        has_nan = _x_has_nan(leaf, per_fit)
        if has_nan.shape and has_nan.shape[-1] == ydata.shape[-1]:
            drop = drop | (has_nan if has_nan.ndim == drop.ndim else has_nan[None, :])
        safe.append(_finite_x(leaf, per_fit))
    weight = jnp.ones_like(ydata) if sigma is None else jnp.broadcast_to(sigma, ydata.shape)
    sigma = jnp.where(drop, jnp.inf, weight)
    return jax.tree.unflatten(treedef, safe), jnp.where(drop, 0.0, ydata), sigma


def _finite_x(leaf: jax.Array, per_fit: bool) -> jax.Array:
    """``leaf`` with each NaN replaced by a finite value of its own row (the first)."""
    if not jnp.issubdtype(leaf.dtype, jnp.inexact) or leaf.ndim == 0:
        return leaf
    rows = leaf.reshape(leaf.shape[0], -1) if per_fit else leaf.reshape(1, -1)
    finite = jnp.isfinite(rows)
    fill = jnp.take_along_axis(rows, jnp.argmax(finite, axis=1)[:, None], axis=1)
    return jnp.where(finite, rows, fill).reshape(leaf.shape)
