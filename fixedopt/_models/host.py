"""A ``Model`` whose function JAX cannot trace (written with NumPy, as an lmfit
user's, or with a Python ``if`` on a parameter): it runs on the host through
``jax.pure_callback`` (:mod:`fixedopt._objective.host_callback`), its derivatives in
the parameters by scipy's ``'2-point'`` finite differences, as lmfit's ``leastsq``
takes them. Decided at the model's first trace, with one warning per function."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._objective.host_callback import HostCall, tracing_error, warn_on_host


@dataclasses.dataclass(frozen=True)
class _Named:
    """``func(*inputs, **{name: p[i]}, **options)`` as ``fun(inputs, p)``."""

    func: Callable[..., Any]
    names: tuple[str, ...]
    options: tuple[tuple[str, Any], ...]

    def __call__(self, inputs: tuple[Any, ...], p: np.ndarray) -> Any:
        return self.func(*inputs, **dict(zip(self.names, p)), **dict(self.options))


def host_call(
    func: Callable[..., Any], names: tuple[str, ...], options: dict[str, Any],
    inputs: list[Any], given: dict[str, Any],
) -> HostCall | None:  # fmt: skip
    """A :class:`HostCall` of ``func`` if JAX cannot trace it on arguments shaped as
    ``inputs`` and ``given`` (warned once), else None."""
    named = _Named(func, names, tuple(options.items()))
    shapes = tuple(jax.ShapeDtypeStruct(np.shape(a), jnp.result_type(a)) for a in inputs)
    p = jax.ShapeDtypeStruct((len(names),), jnp.result_type(*given.values(), float))
    try:
        error = tracing_error([(named, (shapes, p))], [func])
    except Exception:  # not a tracing error: the model's own call raises it
        return None
    if error is None:
        return None
    warn_on_host(func, "func", error, "2-point")
    return HostCall(named)


def host_curve(call: HostCall, inputs: list[Any], given: dict[str, Any]) -> jax.Array:
    """The model's curve for ONE fit, from the host."""
    p = jnp.stack([jnp.asarray(value) for value in given.values()])
    if not jnp.issubdtype(p.dtype, jnp.floating):
        p = p.astype(jnp.result_type(float))
    return call(tuple(inputs), p)
