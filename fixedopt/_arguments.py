"""Validation of the scalar and callable arguments: tolerances, ``max_steps``, ``fun``,
``args`` and ``args_axes``, choices among strings, and solver options.

Inputs a scientist naturally passes (NumPy or JAX scalars, a list for ``args``, an
unhashable callable) are accepted; anything else raises with a message naming the
argument, what was expected and what came. (The parameter trees, masks, fixed values
and bounds: :mod:`fixedopt._validate`.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast, overload

import jax
import numpy as np
from jax.typing import ArrayLike

from fixedopt._solver import Solver
from fixedopt._validate import KeyPath, PyTree, concrete_or_none

MAX_STEPS_LIMIT = 2**31 - 1  # the step counter is an int32


@overload
def tolerance(name: str, value: None) -> None: ...
@overload
def tolerance(name: str, value: ArrayLike) -> float | jax.Array: ...
def tolerance(name: str, value: ArrayLike | None) -> float | jax.Array | None:
    """A tolerance: ``None`` (the caller's default), or a real scalar >= 0 (a Python,
    NumPy or JAX scalar; a traced one is taken as it is)."""
    if value is None:
        return None
    if isinstance(value, bool) or not (
        isinstance(value, (int, float, np.number)) or getattr(value, "shape", None) == ()
    ):
        raise TypeError(f"`{name}` must be a real scalar, got {type(value).__name__}: {value!r}")
    concrete = concrete_or_none(value)
    if concrete is None:  # only a tracer is not concrete
        return cast(jax.Array, value)
    if not (np.issubdtype(concrete.dtype, np.number) and concrete >= 0):
        raise ValueError(f"`{name}` must be a number >= 0, got {value!r}")
    return float(concrete)


def max_steps_option(value: object) -> int:
    """``max_steps`` as a Python int in ``[0, 2**31)``; NumPy and JAX ints accepted."""
    concrete = None if isinstance(value, bool) else concrete_or_none(value)
    if concrete is None or concrete.shape != () or not np.issubdtype(concrete.dtype, np.integer):
        raise TypeError(f"`max_steps` must be a concrete int, got {value!r}")
    if not 0 <= int(concrete) <= MAX_STEPS_LIMIT:
        raise ValueError(f"`max_steps` must be an int in [0, {MAX_STEPS_LIMIT}], got {value!r}")
    return int(concrete)


class _ByIdentity:
    """An unhashable callable, hashed by identity so that ``jit`` can cache on it."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun

    def __call__(self, *args: Any) -> Any:
        return self.fun(*args)

    def __hash__(self) -> int:
        return id(self.fun)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByIdentity) and other.fun is self.fun


def hashable_function(fun: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fun``, wrapped to hash by identity if it is callable but unhashable."""
    if not callable(fun):
        raise TypeError(f"`{name}` must be callable, got {type(fun).__name__}")
    try:
        hash(fun)
    except TypeError:
        return _ByIdentity(fun)
    return fun


def args_tuple(args: object) -> tuple[Any, ...]:
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


def _check_axes_leaf(axis: object) -> object:
    if axis not in (0, None):
        raise ValueError(f"`args_axes` entries must be 0 (per row) or None (shared), got {axis!r}")
    return axis


def batched_args(args: tuple[Any, ...], args_axes: PyTree, batch: int) -> tuple[bool, ...]:
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


def _check_row_leaf(path: KeyPath, leaf: object, batch: int) -> None:
    shape = tuple(getattr(leaf, "shape", ()))
    if not shape or shape[0] != batch:
        raise ValueError(
            f"`args`{jax.tree_util.keystr(path)} must have the leading batch axis of size "
            f"{batch} (the batch size of x0), got shape {shape}; to share it with every "
            "row, close over it in `fun` or mark it with args_axes (None for shared)"
        )


def positive_int(name: str, value: object) -> int:
    """``value`` if it is an int >= 1 (a solver option), else ValueError."""
    if isinstance(value, bool) or not (isinstance(value, int) and value >= 1):
        raise ValueError(f"`{name}` must be an int >= 1, got {value!r}")
    return value


def check_solver(solver: object, *, needs_residuals: bool, caller: str) -> None:
    """A fixedopt solver, and one that ``caller`` can run."""
    if not isinstance(solver, Solver):
        raise TypeError(
            f"`solver` must be a fixedopt solver such as fixedopt.LBFGS(), got "
            f"{type(solver).__name__}; wrap an optax optimizer as fixedopt.Optax(...)"
        )
    if solver.needs_residuals and not needs_residuals:
        raise TypeError(
            f"`solver` {type(solver).__name__} needs residuals: use "
            f"fixedopt.least_squares instead of fixedopt.{caller}"
        )


def choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else ValueError naming them."""
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}, got {value!r}")
    return value
