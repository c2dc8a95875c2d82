"""XLA:CPU's elemental emitter for the programs that compile faster with it and run as
fast: the options, whether this jaxlib takes them, and a ``jax.jit`` that uses them
where it is called at the top level on the CPU (``fixedopt._driver.compiler`` says
which solves get them, and why)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from fixedopt._numerics.trace_state import at_top_level

CPU_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def accepted() -> bool:
    """Whether this jaxlib takes :data:`CPU_OPTIONS` (XLA refuses an option it does
    not know at compile time): one tiny program compiled once per process."""
    probe = jax.jit(lambda x: x + 1, compiler_options=CPU_OPTIONS)
    try:
        probe.lower(np.float32(0)).compile()
    except jax.errors.JaxRuntimeError:
        return False
    return True


def jit_for_cpu(function: Callable[..., Any], static_argnums: tuple[int, ...]) -> Any:
    """``jax.jit(function, static_argnums=...)``, compiled with :data:`CPU_OPTIONS` where
    it is called at the top level on the CPU (a nested program takes its caller's
    options). Its ``plain`` and ``tuned`` are the two jits; ``_cache_size()`` counts
    both one's and the other's compilations."""
    plain = jax.jit(function, static_argnums=static_argnums)
    tuned = jax.jit(function, static_argnums=static_argnums, compiler_options=CPU_OPTIONS)

    @functools.wraps(function)
    def call(*args: Any) -> Any:
        here = jax.default_backend() == "cpu" and at_top_level() and accepted()
        return (tuned if here else plain)(*args)

    call.plain, call.tuned = plain, tuned  # type: ignore[attr-defined]
    call._cache_size = lambda: plain._cache_size() + tuned._cache_size()  # type: ignore[attr-defined]
    return call
