"""What traces around a call (JAX's trace state, read here alone): whether a call runs
at the top level, nothing (no ``jit``, ``vmap``, ``grad`` of the caller's) tracing
around it, so that a ``jit`` called there is compiled on its own; and whether two calls
run at the same level (:func:`current`)."""

from __future__ import annotations

import functools
import threading
from typing import Any

import jax
import jax.extend.core


def current() -> Any:
    """This call's trace state, opaque: equal to another call's where the same
    transformations trace around both (:mod:`fixedopt._driver.shared_start` tells
    a step's own evaluations from those of its inner loops by it)."""
    return jax.extend.core.get_opaque_trace_state()


def at_top_level() -> bool:
    """Whether nothing traces around this call: a ``jit`` called here is compiled on
    its own, not staged into an outer program."""
    here: bool = current() == _top_level_state()
    return here


@functools.cache
def _top_level_state() -> Any:
    """The trace state of a call with no transformation around it: read in a new
    thread (the trace state is per thread), so that it is right wherever it is first
    asked for, even inside a ``jit`` (where fixedopt may have been imported)."""
    found: list[Any] = []
    reader = threading.Thread(target=lambda: found.append(current()))
    reader.start()
    reader.join()
    return found[0]
