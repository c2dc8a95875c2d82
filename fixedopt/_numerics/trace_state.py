"""Whether a call runs at the top level: nothing (no ``jit``, ``vmap``, ``grad`` of the
caller's) traces around it, so that a ``jit`` called there is compiled on its own."""

from __future__ import annotations

import functools
import threading
from typing import Any

import jax
import jax.extend.core


def at_top_level() -> bool:
    """Whether nothing traces around this call: a ``jit`` called here is compiled on
    its own, not staged into an outer program."""
    here: bool = jax.extend.core.get_opaque_trace_state() == _top_level_state()
    return here


@functools.cache
def _top_level_state() -> Any:
    """The trace state of a call with no transformation around it: read in a new
    thread (the trace state is per thread), so that it is right wherever it is first
    asked for, even inside a ``jit`` (where fixedopt may have been imported)."""
    found: list[Any] = []
    reader = threading.Thread(target=lambda: found.append(jax.extend.core.get_opaque_trace_state()))
    reader.start()
    reader.join()
    return found[0]
