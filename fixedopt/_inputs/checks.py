"""The rules for scalar arguments, in one place: counts, numbers, flags and choices.

Every public entry and every solver checks its scalar options with these, where the
value enters (a solver at construction, an option at the call), so that one kind of
argument accepts the same types everywhere:

* a count (``max_steps``, ``lanes``, ``memory_size``, ``max_linesearch_steps``, an
  int ``progress``): a Python or NumPy int, or a concrete 0-d integer array; never a
  bool;
* a number (a tolerance, ``f_scale``, ``regularization``): a Python or NumPy real, or
  a 0-d real array (a traced one only where the caller takes traced values); never a
  bool, never NaN;
* a flag (``batched``, ``vectorized``, ``absolute_sigma``): a Python or NumPy bool;
* a choice (``strategy``, ``loss``, ``linesearch``, ...): one of the given strings.

A value of the wrong type raises :class:`ArgumentTypeError`, a ``TypeError`` that is
also a ``ValueError`` (the error some of these checks raised before); a value of the
right type out of range raises ``ValueError``. Each message names the argument, what
was expected and what came (its value and type). (The parameter trees, masks and
bounds: :mod:`fixedopt._inputs.validate`; callables and ``args``:
:mod:`fixedopt._objective.arguments`.)
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast, overload

import jax
import numpy as np
from jax.typing import ArrayLike

INT32_MAX = 2**31 - 1  # the step counter is an int32


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type: a ``TypeError``, and a ``ValueError`` too (as
    ``numpy.exceptions.AxisError`` is both), so that code catching either still does."""


def describe(value: object) -> str:
    """``value`` as an error message shows what came: its repr and its type.

    Example:
      >>> describe(2.5)
      '2.5 (float)'
    """
    return f"{value!r} ({type(value).__name__})"


def _message(name: str, expected: str, value: object) -> str:
    return f"`{name}` must be {expected}, got {describe(value)}"


def _is_bool(value: object) -> bool:
    return isinstance(value, (bool, np.bool_))


def _concrete(value: object) -> np.ndarray | None:
    """``value`` as a NumPy array if it is known at trace time, else None (a tracer)."""
    try:
        return np.asarray(value)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _scalar_of_kind(value: object, kind: type) -> bool:
    """A Python or NumPy scalar, or a 0-d array, of dtype ``kind``; not a bool."""
    if _is_bool(value) or not (
        isinstance(value, (int, float, np.generic)) or hasattr(value, "shape")
    ):
        return False
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    return tuple(getattr(value, "shape", ())) == () and bool(np.issubdtype(dtype, kind))


def integer(
    name: str,
    value: object,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    expected: str | None = None,
) -> int:
    """``value`` as a Python int in ``[minimum, maximum]``.

    Args:
      name: the argument's name, for the message.
      value: a Python or NumPy int, or a concrete 0-d integer array (not a bool).
      minimum: the smallest value allowed.
      maximum: the largest value allowed; None for no limit.
      expected: the message's words for what is allowed, if not the default.

    Example:
      >>> integer("max_steps", np.int64(5))
      5
    """
    if expected is None:
        limit = f"an int >= {minimum}" if maximum is None else f"an int in [{minimum}, {maximum}]"
        expected = limit
    concrete = _concrete(value) if _scalar_of_kind(value, np.integer) else None
    if concrete is None:
        raise ArgumentTypeError(_message(name, expected, value))
    if int(concrete) < minimum or (maximum is not None and int(concrete) > maximum):
        raise ValueError(_message(name, expected, value))
    return int(concrete)


def positive_int(name: str, value: object) -> int:
    """``value`` as a Python int >= 1 (a count: a solver option, ``lanes``).

    Example:
      >>> positive_int("memory_size", 10)
      10
    """
    return integer(name, value, minimum=1)


def positive_float(name: str, value: object, *, expected: str = "a positive number") -> float:
    """``value`` as a Python float > 0 (a static option such as ``f_scale``).

    Example:
      >>> positive_float("f_scale", np.float32(2))
      2.0
    """
    concrete = _concrete(value) if _scalar_of_kind(value, np.number) else None
    if concrete is None or np.iscomplexobj(concrete):
        raise ArgumentTypeError(_message(name, expected, value))
    if not concrete > 0:  # NaN too
        raise ValueError(_message(name, expected, value))
    return float(concrete)


@overload
def tolerance(name: str, value: None) -> None: ...
@overload
def tolerance(name: str, value: ArrayLike) -> float | jax.Array: ...
def tolerance(name: str, value: ArrayLike | None) -> float | jax.Array | None:
    """A tolerance: ``None`` (the caller's default), or a real scalar >= 0 as a Python
    float (a Python, NumPy or JAX scalar; a traced one is returned as it is).

    Example:
      >>> tolerance("gtol", np.float32(0.5))
      0.5
    """
    if value is None:
        return None
    expected = "a real number >= 0"
    if not _scalar_of_kind(value, np.number) or np.iscomplexobj(value):
        raise ArgumentTypeError(_message(name, expected, value))
    concrete = _concrete(value)
    if concrete is None:  # only a tracer is not concrete
        return cast(jax.Array, value)
    if not concrete >= 0:  # NaN too
        raise ValueError(_message(name, expected, value))
    return float(concrete)


def boolean(name: str, value: object, *, expected: str = "a bool") -> bool:
    """``value`` as a Python bool; a Python or NumPy bool is accepted.

    Example:
      >>> boolean("vectorized", np.True_)
      True
    """
    if not _is_bool(value):
        raise ArgumentTypeError(_message(name, expected, value))
    return bool(value)


def optional_boolean(name: str, value: object) -> bool | None:
    """``None``, or ``value`` as a Python bool (see :func:`boolean`)."""
    return None if value is None else boolean(name, value, expected="a bool or None")


def one_of(name: str, value: object, choices: tuple[str, ...], *, expected: str = "") -> str:
    """``value`` if it is one of the strings ``choices``, else ValueError naming them.

    Args:
      name: the argument's name, for the message.
      value: the argument.
      choices: the strings allowed.
      expected: words for other values the caller accepts (e.g. "or a callable").

    Example:
      >>> one_of("strategy", "mask", ("mask", "split"))
      'mask'
    """
    if not (isinstance(value, Hashable) and value in choices):
        allowed = f"one of {choices}" + (f" {expected}" if expected else "")
        raise ValueError(_message(name, allowed, value))
    return str(value)


def set_option(solver: object, name: str, value: object) -> None:
    """Store the checked (canonical) ``value`` of option ``name`` on a frozen
    dataclass, from its ``__post_init__``: an ``np.int64(5)`` is kept as ``5``."""
    object.__setattr__(solver, name, value)
