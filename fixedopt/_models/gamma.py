"""The log-gamma function of a complex argument, in ``jax.numpy`` (JAX has the real one
only): ``Gamma(z + 1) = z Gamma(z)`` eight times, then Stirling's series, whose terms up to
``z**-15`` leave less than 1e-15 of the value at ``|z| >= 8``. For the Pearson IV
lineshape and lmfit's ``loggammafcn`` in expressions (checked against
``scipy.special.loggamma``: ``tests/models/test_more_peaks.py``)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

Value = Any  # a scalar, an array or a tracer


def log_gamma_ratio(a: Value, b: Value) -> Value:
    """``log |Gamma(a + i b) / Gamma(a)|`` for real ``a > 0`` and ``b``: the recurrence
    ``Gamma(z + 1) = z Gamma(z)`` eight times, then the difference of Stirling's series
    at ``a + 8 + i b`` and ``a + 8``, where its terms up to ``z**-15`` leave less than
    1e-15 of the value."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    near = -0.5 * sum(jnp.log1p((b / (a + k)) ** 2) for k in range(_GAMMA_SHIFT))
    u = a + _GAMMA_SHIFT
    return near + _stirling_real(u, b) - _stirling_real(u, jnp.zeros_like(b))


_GAMMA_SHIFT = 8
# Stirling's series: log Gamma(z) ~ (z - 1/2) log z - z + log(2 pi)/2 + sum c_k z^(1 - 2k)
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156,
             -3617 / 122400)  # fmt: skip


def _stirling_real(u: Value, v: Value) -> Value:
    """The real part of Stirling's series for ``log Gamma(u + i v)`` (``u >= 8``), in
    polar form: ``z = r exp(i theta)``."""
    radius, theta = jnp.hypot(u, v), jnp.arctan2(v, u)
    value = (u - 0.5) * jnp.log(radius) - v * theta - u + 0.5 * float(np.log(2.0 * np.pi))
    for k, c in enumerate(_STIRLING, start=1):
        power = 2 * k - 1
        value = value + c * jnp.cos(power * theta) / radius**power
    return value


def loggamma(z: Value) -> Value:
    """``log Gamma(z)`` for complex ``z`` with ``Re z > 0`` (lmfit's ``loggammafcn``;
    its real part ``log |Gamma(z)|`` is branch-free): the recurrence eight times, then
    Stirling's series at ``z + 8`` (as :func:`log_gamma_ratio`)."""
    z = jnp.asarray(z)
    w = z + _GAMMA_SHIFT
    value = (w - 0.5) * jnp.log(w) - w + 0.5 * float(np.log(2.0 * np.pi))
    for k, c in enumerate(_STIRLING, start=1):
        value = value + c / w ** (2 * k - 1)
    return value - sum(jnp.log(z + k) for k in range(_GAMMA_SHIFT))
