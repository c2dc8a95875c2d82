"""Validation of the callable arguments and their extra arguments: ``fun``, ``args``,
``args_axes`` and ``solver``. (Scalars: :mod:`fixedopt._inputs.checks`.)

Inputs a scientist naturally passes (NumPy or JAX scalars, a list for ``args``, an
unhashable callable) are accepted; anything else raises with a message naming the
argument, what was expected and what came. (The parameter trees, masks, fixed values
and bounds: :mod:`fixedopt._inputs.validate`.)
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from collections.abc import Callable
from typing import Any

import jax

from fixedopt._contract.solver import Solver
from fixedopt._inputs.validate import KeyPath, PyTree


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


def default_axes(args: tuple[Any, ...]) -> PyTree:
    """The ``args_axes`` that ``args_axes=None`` means: 0 (per row) for every array,
    None (shared) for Python scalars."""
    return jax.tree.map(lambda leaf: 0 if _is_array(leaf) else None, args)


def batched_args(
    args: tuple[Any, ...], args_axes: PyTree, batch: int, inputs: dict[str, PyTree] | None = None
) -> tuple[bool, ...]:
    """One flag per leaf of ``args``: True for per-row data (batch axis 0).

    By default arrays are per row and Python scalars shared; ``args_axes`` (a tuple
    prefix of ``args`` of 0/None, as ``vmap``'s ``in_axes``) decides explicitly.
    By default, an ambiguous batch axis warns (:func:`warn_if_batch_axis_ambiguous`;
    ``inputs`` names the other batched inputs, such as ``x0``, where known).
    """
    if args_axes is None:
        axes = default_axes(args)
    else:
        try:
            axes = jax.tree.broadcast(args_axes, args, is_leaf=lambda a: a is None)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"`args_axes` must be a tree prefix of `args` ({jax.tree.structure(args)}) "
                f"with entries 0 or None, got {args_axes!r}"
            ) from error
    flags = []
    # A None in args is an empty subtree (no leaf, no flag), but a position of axes:
    # both are read with None as a leaf, so that the axes after it stay aligned.
    for (path, leaf), axis in zip(
        jax.tree_util.tree_leaves_with_path(args, is_leaf=lambda a: a is None),
        jax.tree.leaves(axes, is_leaf=lambda a: a is None),
    ):
        if leaf is None:
            continue
        if _check_axes_leaf(axis) == 0:
            _check_row_leaf(path, leaf, batch)
        flags.append(axis == 0)
    if args_axes is None:
        warn_if_batch_axis_ambiguous(args, batch, inputs or {})
    return tuple(flags)


def warn_if_batch_axis_ambiguous(
    args: tuple[Any, ...], batch: int, inputs: dict[str, PyTree]
) -> None:
    """A ``UserWarning`` if the default reading of ``args`` (every array per row) may
    split a shared argument, because the batch size ``B`` is also another axis length:

    * a non-leading axis of an array in ``args`` or in the other batched ``inputs``
      of a fit (``sigma``, ``counts``) has length ``B`` (128 decay curves of 128 time
      bins): any array argument of leading length ``B`` could then be a shared one
      (the time axis), and all of them are named;
    * else, a non-leading axis of ``x0`` (``inputs["x0"]``) has length ``B`` (3 rows
      of 3 parameters): a 1-D argument of length ``B`` could be one value per
      parameter, shared; those are named (a 2-D ``(B, m)`` one is taken as data).

    It warns rather than asks for ``args_axes`` in every batched call, which would
    break every per-row call that reads correctly today; where ``B`` is no other axis
    length it is silent, and an explicit ``args_axes`` silences it. Raised while
    tracing: once per compilation under ``jit``, and shown once per line of the
    caller by Python's default filter.
    """
    leaves = jax.tree_util.tree_leaves_with_path(args)
    rows = [(path, leaf) for path, leaf in leaves if _is_array(leaf)]  # read as per row
    data = {"args": args} | {name: tree for name, tree in inputs.items() if name != "x0"}
    evidence = _axis_of_length(batch, data)
    if evidence is None:
        evidence = _axis_of_length(batch, {"x0": inputs.get("x0")})
        rows = [(path, leaf) for path, leaf in rows if len(leaf.shape) == 1]
    if rows and evidence is not None:
        message = _ambiguity_message(args, batch, rows, evidence)
        warnings.warn(message, UserWarning, stacklevel=_caller_stacklevel())


def _ambiguity_message(
    args: tuple[Any, ...], batch: int, rows: list[tuple[KeyPath, Any]], evidence: str
) -> str:
    """The warning: the arguments read as per row, why that is in doubt, the fix."""
    names = [f"args{jax.tree_util.keystr(path)} of shape {tuple(a.shape)}" for path, a in rows]
    one = len(names) == 1
    read = (names[0] + " is") if one else (", ".join(names[:-1]) + f" and {names[-1]} are")
    its, each = ("its", "it is") if one else ("their", "each is")
    value = "value" if all(len(leaf.shape) == 1 for _, leaf in rows) else "slice"
    # The fix, by example: every argument read as now, but the likeliest grid shared.
    shared = min(range(len(rows)), key=lambda i: len(rows[i][1].shape))
    example = [0 if any(map(_is_array, jax.tree.leaves(arg))) else None for arg in args]
    example[int(getattr(rows[shared][0][0], "idx", 0))] = None
    return (
        f"batched=True: {read} read as per row: {its} leading axis of length {batch} "
        f"equals the batch size, so {each} split one {value} per row. But {batch} is also "
        f"the length of {evidence}, so an argument shared by every row (a grid of x "
        "values, a weight per parameter) cannot be told from a per-row one by its shape. "
        "Say which with `args_axes`, one entry per argument, None for shared and 0 for "
        f"per row: e.g. args_axes={_tuple_text(example)} shares args[{example.index(None)}]; "
        "giving args_axes explicitly silences this warning."
    )


def _is_array(leaf: object) -> bool:
    return hasattr(leaf, "shape")


def _axis_of_length(batch: int, trees: dict[str, PyTree]) -> str | None:
    """Where ``batch`` is the length of a non-leading axis (words for the warning)."""
    for prefix, tree in trees.items():
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
            shape = tuple(getattr(leaf, "shape", ()))
            if batch in shape[1:]:
                axis = shape.index(batch, 1)
                return f"axis {axis} of {prefix}{jax.tree_util.keystr(path)} of shape {shape}"
    return None


def _tuple_text(entries: list[int | None]) -> str:
    return f"({entries[0]},)" if len(entries) == 1 else f"({', '.join(map(str, entries))})"


def _caller_stacklevel() -> int:
    """``stacklevel`` for a warning raised here, pointing at the first caller outside
    fixedopt: the user's line, whichever public function they called."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("fixedopt."):
        frame, level = frame.f_back, level + 1
    return level


def _check_row_leaf(path: KeyPath, leaf: object, batch: int) -> None:
    shape = tuple(getattr(leaf, "shape", ()))
    if not shape or shape[0] != batch:
        raise ValueError(
            f"`args`{jax.tree_util.keystr(path)} must have the leading batch axis of size "
            f"{batch} (the batch size of x0), got shape {shape}; to share it with every "
            "row, close over it in `fun` or mark it with args_axes (None for shared)"
        )


def check_is_solver(solver: object) -> Solver[Any]:
    """``solver``, a fixedopt solver, with an ``evaluations_per_step`` the lanes can use
    (a solver of the user's own may set it: 0, a negative or a NaN count would never
    refill them, and hang)."""
    if not isinstance(solver, Solver):
        raise TypeError(
            f"`solver` must be a fixedopt solver such as fixedopt.LBFGS(), got "
            f"{type(solver).__name__}; wrap an optax optimizer as fixedopt.Optax(...)"
        )
    cost, name = solver.evaluations_per_step, f"`{type(solver).__name__}.evaluations_per_step`"
    meaning = "the objective's evaluations in a typical step"
    if isinstance(cost, bool) or not isinstance(cost, numbers.Real):
        raise TypeError(f"{name} must be a number ({meaning}), got {type(cost).__name__}")
    if not 0 < cost < math.inf:
        raise ValueError(f"{name} must be a finite number > 0 ({meaning}), got {cost!r}")
    return solver


def check_solver(solver: object, *, needs_residuals: bool, caller: str) -> None:
    """A fixedopt solver, and one that ``caller`` can run."""
    if check_is_solver(solver).needs_residuals and not needs_residuals:
        raise TypeError(
            f"`solver` {type(solver).__name__} needs residuals: use "
            f"fixedopt.least_squares instead of fixedopt.{caller}"
        )
