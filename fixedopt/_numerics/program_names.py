"""A static argument's name before any trace: text that names what a program traced
from it computes, or None where fixedopt cannot tell (a user's function, a closure).

A stored export (:class:`fixedopt._numerics.stored.StoredJit`) is run in a new process
in place of a trace whose key JAX's persistent cache would have made from the traced
program: its name must therefore differ wherever the programs could. :func:`name_of`
names only what fixedopt defines itself, whose code the name's digest of fixedopt's
source covers: plain Python scalars; tuples and frozensets of named values; fixedopt's
own enums, and its frozen dataclasses and NamedTuples, by their class and every field
that their equality reads (``jit`` itself treats two static arguments that compare
equal as one program: a field left out of equality, a note, is left out here too);
and objects that name themselves (``program_name()``: a built-in model of
:mod:`fixedopt.models`). A function is never named by its ``repr`` (an address
another process may reuse for another function): anything else makes the whole name
None, and the call is traced as before.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from typing import Any

_SCALARS = (bool, int, float, str, type(None))


def defined_here(thing: Any) -> bool:
    """Whether ``thing`` (a class or function) is fixedopt's own: in a module of
    fixedopt, found there under its qualified name (not made in a function)."""
    module = getattr(thing, "__module__", None)
    if not isinstance(module, str) or not module.startswith("fixedopt."):
        return False
    found: Any = sys.modules.get(module)
    for part in str(getattr(thing, "__qualname__", "<>")).split("."):
        found = getattr(found, part, None)
    return found is thing


def name_of(value: Any) -> str | None:
    """The text naming ``value`` (module's rules), or None."""
    kind = type(value)
    if kind in _SCALARS:
        return repr(value)
    if kind is tuple:
        return _joined("tuple", value)
    if kind is frozenset:
        parts = [name_of(item) for item in value]
        return None if None in parts else f"frozenset{sorted(parts)}"  # type: ignore[type-var]
    named = getattr(value, "program_name", None)
    if callable(named) and defined_here(kind):
        own: str | None = named()
        return own
    if not defined_here(kind):
        return None
    title = f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, enum.Enum):
        return f"{title}.{value.name}"
    if isinstance(value, tuple) and hasattr(kind, "_fields"):  # a NamedTuple
        return _joined(title, tuple(value))
    if dataclasses.is_dataclass(value) and kind.__dataclass_params__.frozen:
        fields = [f for f in dataclasses.fields(value) if f.compare]
        return _joined(title, tuple(getattr(value, f.name) for f in fields))
    return None


def _joined(title: str, values: tuple[Any, ...]) -> str | None:
    parts = [name_of(item) for item in values]
    return None if None in parts else f"{title}({', '.join(parts)})"  # type: ignore[arg-type]
