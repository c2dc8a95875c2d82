"""Validation of every argument users pass: errors name the argument, what was
expected and what came, at construction or trace time."""

from __future__ import annotations


def positive_int(name: str, value: object) -> int:
    """``value`` if it is an int >= 1 (a solver option), else ValueError."""
    if isinstance(value, bool) or not (isinstance(value, int) and value >= 1):
        raise ValueError(f"`{name}` must be an int >= 1, got {value!r}")
    return value
