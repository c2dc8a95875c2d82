"""Validation of the options of ``minimize`` / ``least_squares`` other than the
parameters and masks: tolerances, ``max_steps``, ``fun``, ``args`` and ``args_axes``.

Inputs a scientist naturally passes (NumPy or JAX scalars, a list for ``args``, an
unhashable callable) are accepted; anything else raises at trace time with a message
naming the argument, what was expected and what came.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._loop import Stopping

MAX_STEPS_LIMIT = 2**31 - 1  # the step counter is an int32


def _concrete(value):
    try:
        return np.asarray(value)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def tolerance(name: str, value, default: float):
    """A tolerance: ``None`` for ``default``, else a real scalar >= 0 (a Python,
    NumPy or JAX scalar; a traced one is taken as it is)."""
    if value is None:
        return default
    if isinstance(value, bool) or not (
        isinstance(value, (int, float, np.number)) or getattr(value, "shape", None) == ()
    ):
        raise TypeError(f"`{name}` must be a real scalar, got {type(value).__name__}: {value!r}")
    concrete = _concrete(value)
    if concrete is None:
        return value
    if not (np.issubdtype(concrete.dtype, np.number) and concrete >= 0):
        raise ValueError(f"`{name}` must be a number >= 0, got {value!r}")
    return float(concrete)


def max_steps(value) -> int:
    """``max_steps`` as a Python int in ``[0, 2**31)``; NumPy and JAX ints accepted."""
    concrete = None if isinstance(value, bool) else _concrete(value)
    if concrete is None or concrete.shape != () or not np.issubdtype(concrete.dtype, np.integer):
        raise TypeError(f"`max_steps` must be a concrete int, got {value!r}")
    if not 0 <= int(concrete) <= MAX_STEPS_LIMIT:
        raise ValueError(f"`max_steps` must be an int in [0, {MAX_STEPS_LIMIT}], got {value!r}")
    return int(concrete)


def stopping(tolerances, steps: int, x0, least_squares: bool) -> Stopping:
    """The traced stopping rules, with defaults from the dtype of ``x0``.

    ``gtol`` and ``xtol`` default to ``sqrt(eps)``: both tests are linear in the
    distance to the solution, so they ask for about half the digits of the dtype.
    ``ftol`` compares reductions of ``f``, quadratic in that distance: it defaults to
    ``eps`` (a reduction at the rounding level of ``f``), which asks for the same
    digits. (MINPACK's ``sqrt(eps)`` for ``ftol`` stops least-squares fits in
    float32 with 1-2 correct digits on ill-conditioned problems.)
    """
    del least_squares  # the same defaults for both
    dtype = jnp.result_type(*jax.tree.leaves(x0))
    eps = float(jnp.finfo(dtype).eps)
    precision = math.sqrt(eps)
    gtol, ftol, xtol, abs_gtol = tolerances
    defaults = (precision, eps, precision)
    names = ("gtol", "ftol", "xtol")
    relative = [tolerance(*a) for a in zip(names, (gtol, ftol, xtol), defaults)]
    absolute = tolerance("abs_gtol", abs_gtol, 0.0)
    as_array = lambda value: jnp.asarray(value, dtype)
    return Stopping(
        *map(as_array, relative),
        abs_gtol=as_array(absolute),
        max_steps=jnp.asarray(steps, jnp.int32),
        precision=as_array(precision),
    )


class _ByIdentity:
    """An unhashable callable, hashed by identity so that ``jit`` can cache on it."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args):
        return self.fun(*args)

    def __hash__(self):
        return id(self.fun)

    def __eq__(self, other):
        return isinstance(other, _ByIdentity) and other.fun is self.fun


def hashable_function(fun, name: str):
    """``fun``, wrapped to hash by identity if it is callable but unhashable."""
    if not callable(fun):
        raise TypeError(f"`{name}` must be callable, got {type(fun).__name__}")
    try:
        hash(fun)
    except TypeError:
        return _ByIdentity(fun)
    return fun


def args_tuple(args) -> tuple:
    """``args`` as a tuple: a tuple or a list of extra arguments; anything else is
    named (an array would otherwise be unpacked element by element)."""
    if isinstance(args, tuple):
        return args
    if isinstance(args, list):
        return tuple(args)
    raise TypeError(
        f"`args` must be a tuple of extra arguments of `fun`, got {type(args).__name__}; "
        "for a single argument write args=(value,)"
    )


def _check_axes_leaf(axis):
    if axis not in (0, None):
        raise ValueError(f"`args_axes` entries must be 0 (per row) or None (shared), got {axis!r}")
    return axis


def batched_args(args: tuple, args_axes, batch: int) -> tuple[bool, ...]:
    """One flag per leaf of ``args``: True for per-row data (batch axis 0).

    By default arrays are per row and Python scalars shared; ``args_axes`` (a tuple
    prefix of ``args`` of 0/None, as ``vmap``'s ``in_axes``) decides explicitly.
    """
    if args_axes is None:
        axes = jax.tree.map(lambda leaf: 0 if hasattr(leaf, "shape") else None, args)
    else:
        try:
            axes = jax.tree.broadcast(args_axes, args, is_leaf=lambda a: a is None)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"`args_axes` must be a tree prefix of `args` ({jax.tree.structure(args)}) "
                f"with entries 0 or None, got {args_axes!r}"
            ) from error
    flags = []
    for (path, leaf), axis in zip(
        jax.tree_util.tree_leaves_with_path(args),
        jax.tree.leaves(axes, is_leaf=lambda a: a is None),
    ):
        if _check_axes_leaf(axis) == 0:
            _check_row_leaf(path, leaf, batch)
        flags.append(axis == 0)
    return tuple(flags)


def _check_row_leaf(path, leaf, batch: int) -> None:
    shape = tuple(getattr(leaf, "shape", ()))
    if not shape or shape[0] != batch:
        raise ValueError(
            f"`args`{jax.tree_util.keystr(path)} must have the leading batch axis of size "
            f"{batch} (the batch size of x0), got shape {shape}; to share it with every "
            "row, close over it in `fun` or mark it with args_axes (None for shared)"
        )
