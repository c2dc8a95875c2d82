"""How a solve calls the user's function, and the note on an error raised inside it.

An error inside ``fun`` (or ``residual_fun``) propagates unchanged, with a note saying
how fixedopt called it: the shape of ``x`` it passed, in which call (one problem, one
row of a ``batched=True`` solve, or many rows at once with ``vectorized=True``), and
the likely fix for that call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from fixedopt._inputs.validate import PyTree


@dataclasses.dataclass(frozen=True)
class UserFunction:
    """The user's function as a solve calls it, for the note on its errors.

    ``name`` is ``"fun"`` or ``"residual_fun"``; ``rows`` the batch size of a
    ``batched=True`` solve, None for one problem. Hashed by the first two, as
    ``jit``'s static argument: a new batch size reuses the compiled solve where its
    rows are padded to a size it does not set (``fixedopt._driver.batching``); ``rows``
    only words a note, which a new trace writes anew.
    """

    fun: Callable[..., Any]
    name: str = "fun"
    rows: int | None = dataclasses.field(default=None, compare=False)

    def __call__(self, *args: Any) -> Any:
        return self.fun(*args)


def name_of(fun: Callable[..., Any]) -> str:
    return fun.name if isinstance(fun, UserFunction) else "fun"


@dataclasses.dataclass(frozen=True)
class Passed:
    """How the user passed the function a solve calls, for a message that must name
    what they wrote: ``name`` the argument of the call they made (``"fun"``,
    ``"residual_fun"``, ``curve_fit``'s ``"f"``), ``inputs`` where a value to
    differentiate goes instead of a closure, in that call's words. An entry point
    that wraps the user's function declares it as the wrapper's ``passed``."""

    name: str
    inputs: str


def passed_as(fun: Callable[..., Any]) -> Passed:
    """The :class:`Passed` of ``fun`` (a :class:`UserFunction`): its wrapper's own,
    else its ``name`` with ``args``."""
    declared = getattr(fun.fun if isinstance(fun, UserFunction) else fun, "passed", None)
    if isinstance(declared, Passed):
        return declared
    name = name_of(fun)
    return Passed(name, f"`args` (`{name}(x, *args)`)")


def count(number: int, noun: str) -> str:
    """``"1 row"``, ``"3 rows"``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _shapes(x: PyTree) -> list[tuple[int, ...]]:
    # Arrays, tracers or jax.ShapeDtypeStruct; a Python scalar has shape ().
    return [tuple(getattr(leaf, "shape", ())) for leaf in jax.tree.leaves(x)]


def _shown(shapes: list[tuple[int, ...]]) -> str:
    """One leaf's shape, or the list of every leaf's."""
    return str(shapes[0] if len(shapes) == 1 else shapes)


def _called(name: str, x: PyTree, how: str) -> str:
    return f"fixedopt called `{name}(x, *args)` with x of shape {_shown(_shapes(x))} ({how})."


def one_problem_note(fun: Callable[..., Any], x: PyTree) -> str:
    """The note for a ``fun`` written for one problem (not vectorized), called with
    ``x``: all of ``x0``, or one row of a batch."""
    name = name_of(fun)
    rows = fun.rows if isinstance(fun, UserFunction) else None
    if rows is not None:
        return _called(name, x, f"one row of a batched=True solve of {count(rows, 'row')}") + (
            f" With batched=True, `{name}` is written for ONE row: it gets one row of x0 "
            "and of each per-row argument. A shared argument (a grid of x values) is split "
            f"one value per row unless args_axes marks it None or `{name}` closes over it; a "
            f"`{name}` written for many rows at once needs vectorized=True."
        )
    note = _called(name, x, "all of x0: batched=False, one problem")
    shapes = _shapes(x)
    if any(len(shape) >= 2 for shape in shapes):
        note += (
            " If each row of x0 is a separate problem, pass batched=True: "
            f"`{name}` then sees one row, x of shape {_shown([s[1:] for s in shapes])}."
        )
    return note + f" Shared arrays (a grid of x values) can be closed over in `{name}`."


def rows_at_once_note(fun: Callable[..., Any], x: PyTree, how: str) -> str:
    """The note for a ``vectorized=True`` ``fun`` called on many rows at once
    (``how``: which rows, and why)."""
    name = name_of(fun)
    return _called(name, x, f"{how}: vectorized=True") + (
        f" With vectorized=True, `{name}` gets many rows at once: a leading axis of rows "
        "on every leaf of x and on every per-row argument, and returns one output per row "
        f"along it. A `{name}` written for one row needs vectorized=False (the default)."
    )
