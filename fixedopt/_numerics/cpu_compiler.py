"""XLA:CPU's elemental emitter for the programs that compile faster with it and run as
fast: the options, whether this jaxlib takes them, and a ``jax.jit`` that uses them
where it is called at the top level on a backend that takes them (the profile of the
default device's platform: ``fixedopt._numerics.backends.Backend.tuned_compiler``;
``fixedopt._driver.compiler`` says which solves get them, and why)."""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from fixedopt._numerics import backends, stored
from fixedopt._numerics.stored import StoredJit
from fixedopt._numerics.trace_state import at_top_level

CPU_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}


# Also for programs whose rows must round alike in any batch (the covariance): XLA:CPU
# reduces a small array with its own loops, a long axis as a tree of partial sums and a
# large array (about 4096 entries) in its YNN library, each adding in its own order, so
# a row's sum changed in its last bits with the number of rows beside it. Without the
# rewrite and YNN, a reduction is XLA's loop over the reduced axis for every size
# (docs/decisions.md, "Why the covariance was slow").
ROW_WISE_OPTIONS: dict[str, Any] = CPU_OPTIONS | {
    "xla_disable_hlo_passes": "tree_reduction_rewriter",
    "xla_cpu_experimental_ynn_fusion_type": "",
}

# The covariance's programs also without XLA:CPU's parallel task assigner, which splits
# every fusion's loop into tasks for the intra-op threads: a chunk of a covariance is
# dozens of short fusions over its rows (a pivot of the small inverse a fusion: 4,096
# rows of 5x5 in 34), each too short to pay for the split. The same fusions and bits,
# one thread each (docs/decisions.md, "The covariance's fusions on one thread").
SERIAL_ROW_WISE_OPTIONS: dict[str, Any] = ROW_WISE_OPTIONS | {
    "xla_disable_hlo_passes": "tree_reduction_rewriter,cpu-parallel-task-assigner",
}


# The subfolder of the persistent cache holding a mark per set of options that compiled.
PROBES = "fixedopt-probes"


def accepted(options: dict[str, Any] | None = None) -> bool:
    """Whether this jaxlib takes ``options`` (default :data:`CPU_OPTIONS`; XLA refuses
    an option it does not know at compile time): one tiny program compiled once per
    process and set of options, or once per cache folder where the persistent cache
    is a local folder (a mark there, named by the options, the versions, the backend
    and fixedopt's source: a new process then traces, lowers and reads no probe)."""
    return _accepted(tuple(sorted((CPU_OPTIONS if options is None else options).items())))


@functools.cache
def _accepted(options: tuple[tuple[str, Any], ...]) -> bool:
    mark = _mark(options)
    if mark is not None and mark.is_file():
        return True
    probe = jax.jit(lambda x: x + 1, compiler_options=dict(options))
    try:
        probe.lower(np.float32(0)).compile()
    except jax.errors.JaxRuntimeError:
        return False
    if mark is not None:
        stored.write_whole(mark, lambda: b"")
    return True


def _mark(options: tuple[tuple[str, Any], ...]) -> pathlib.Path | None:
    """The file in the cache folder saying that ``options`` compiled here (None: no
    local cache folder). A refusal leaves no mark: it is probed in each process."""
    return stored.cache_file(PROBES, repr(options))


def jit_for_cpu(
    function: Callable[..., Any],
    static_argnums: tuple[int, ...],
    options: dict[str, Any] | None = None,
    *,
    stored: bool = False,
) -> Any:
    """``jax.jit(function, static_argnums=...)``, compiled with ``options`` (default
    :data:`CPU_OPTIONS`) where it is called at the top level on a backend whose profile
    tunes its compiler (``Backend.tuned_compiler``: the CPU, the default device's
    platform; a nested program takes its caller's options). Its ``plain`` and ``tuned``
    are the two jits, its ``lower(*args)`` the lowered program a call with ``args``
    would run; ``_cache_size()`` counts both one's and the other's compilations.
    ``stored``: a ``function`` of its arguments alone, whose tuned program a new
    process runs from its export, untraced (:class:`fixedopt._numerics.stored.StoredJit`)."""
    options = CPU_OPTIONS if options is None else options
    plain = jax.jit(function, static_argnums=static_argnums)
    tuned: Any = jax.jit(function, static_argnums=static_argnums, compiler_options=options)
    if stored:
        tuned = StoredJit(function, static_argnums, options)

    def chosen() -> Any:
        here = backends.defaults().tuned_compiler and at_top_level() and accepted(options)
        return tuned if here else plain

    @functools.wraps(function)
    def call(*args: Any) -> Any:
        return chosen()(*args)

    call.plain, call.tuned = plain, tuned  # type: ignore[attr-defined]
    call.lower = lambda *args: chosen().lower(*args)  # type: ignore[attr-defined]
    call._cache_size = lambda: plain._cache_size() + tuned._cache_size()  # type: ignore[attr-defined]
    return call
