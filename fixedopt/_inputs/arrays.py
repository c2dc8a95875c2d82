"""Arrays made from the caller's data without compiling a program.

``jnp.asarray`` copies a NumPy array or a Python number to the device through a
program of one operation (``jit(stage)``, ``convert_element_type``,
``broadcast_in_dim``), compiled once per shape and dtype in every process. A fit that
prepares its inputs that way compiled a dozen of them before its solve, 20 to 130 ms
each, and again in every new process (too short for the persistent cache to keep).
These functions do the same work in NumPy where the value is on the host and put the
result on the device; a ``jax.Array`` or a tracer goes through ``jax.numpy`` as before.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _on_host(value: Any) -> bool:
    return not isinstance(value, (jax.Array, jax.core.Tracer))


def _host_array(value: Any, dtype: Any) -> np.ndarray | None:
    """``value`` as a NumPy array of JAX's dtype for it (float64 becomes float32
    without x64), or None where NumPy cannot read it as numbers."""
    try:
        host = np.asarray(value) if dtype is None else np.asarray(value, dtype)
    except (TypeError, ValueError):
        return None
    if host.dtype == object or host.dtype.kind not in "biufc":
        return None
    return host.astype(jax.dtypes.canonicalize_dtype(host.dtype), copy=False)


def asarray(value: Any, dtype: Any = None) -> jax.Array:
    """``jnp.asarray(value, dtype)``, compiling nothing for a value on the host.

    A Python number without ``dtype`` keeps JAX's weak type. The result never shares
    memory with ``value``.

    Example:
      >>> import numpy as np
      >>> from fixedopt._inputs.arrays import asarray
      >>> asarray(np.arange(3), np.float32)
      Array([0., 1., 2.], dtype=float32)
    """
    if not _on_host(value):
        return jnp.asarray(value, dtype)
    if dtype is None and isinstance(value, (bool, int, float, complex)):
        on_device: jax.Array = jax.device_put(value)  # weakly typed, as jnp.asarray's
        return on_device
    host = _host_array(value, dtype)
    if host is None:  # let JAX raise its own error, or read what NumPy cannot
        return jnp.asarray(value, dtype)
    copied: jax.Array = jax.device_put(np.array(host, copy=True))
    return copied


def numbers(value: Any, name: str) -> jax.Array:
    """:func:`asarray` of a caller's argument ``name``: a ``TypeError`` that names it
    where ``value`` is not numbers (JAX's own message names neither)."""
    try:
        return asarray(value)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"`{name}` must be numbers (an array, a list of numbers or a number), "
            f"got {_kind(value)}"
        ) from error


def _kind(value: Any) -> str:
    """What ``value`` is, for a message: its type, and the dtype NumPy reads in it."""
    try:
        dtype = np.asarray(value).dtype
    except (TypeError, ValueError):  # ragged
        return type(value).__name__
    return f"{type(value).__name__} of dtype {dtype}"


def broadcast_to(value: Any, shape: tuple[int, ...], dtype: Any = None) -> jax.Array:
    """``jnp.broadcast_to(jnp.asarray(value, dtype), shape)``, compiling nothing for
    a value on the host (see :func:`asarray`)."""
    if _on_host(value):
        host = _host_array(value, dtype)
        if host is not None:
            copied: jax.Array = jax.device_put(np.array(np.broadcast_to(host, shape), copy=True))
            return copied
    return jnp.broadcast_to(jnp.asarray(value, dtype), shape)


def one_row(batch: jax.Array | jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    """The shape and dtype of one row of ``batch`` (its leading axis dropped): what a
    shape check reads, where a row sliced out of a concrete array would compile a
    program for it."""
    return jax.ShapeDtypeStruct(batch.shape[1:], batch.dtype)
