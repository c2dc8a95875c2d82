"""The one timing module: interleaved calls (A B A B ...), medians, compile time apart
(JAX's trace + lowering + XLA compile seconds, from :mod:`jax.monitoring`). Callers
block every timed call until its result is ready (``jax.block_until_ready``).
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping
from importlib import metadata

import jax

PACKAGES = ("jax", "jaxlib", "optax", "scipy", "numpy", "fixedopt", "jaxopt", "tfp-nightly",
            "lmfit", "matplotlib", "ase")  # fmt: skip


class compile_monitor:  # noqa: N801 (a context manager, named like a function)
    """Count XLA compilations and sum JAX's compile seconds inside a ``with`` block."""

    EVENTS = (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )

    def __enter__(self):
        self.count, self.seconds = 0, 0.0
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listen)

    def _listen(self, event, duration, **kwargs):
        if event in self.EVENTS:
            self.seconds += duration
            self.count += event == self.EVENTS[-1]


def first_call(call: Callable[[], object]) -> dict[str, float]:
    """Time a first (compiling) call: its wall time and the compile seconds within it."""
    start = time.perf_counter()
    with compile_monitor() as compiles:
        call()
    return {"first_call_s": time.perf_counter() - start, "compile_s": compiles.seconds}


def compiled(jitted, *inputs) -> tuple[object, dict]:
    """``jitted`` compiled for ``inputs``; its compile seconds and XLA's memory analysis
    (``peak_bytes``: arguments, outputs and temporaries, less the donated)."""
    with compile_monitor() as compiles:
        program = jitted.lower(*inputs).compile()
    memory = program.memory_analysis()
    sizes = {f"{k}_bytes": int(getattr(memory, f"{k}_size_in_bytes", 0) or 0)
             for k in ("temp", "argument", "output", "alias")}  # fmt: skip
    peak = sizes["argument_bytes"] + sizes["output_bytes"] + sizes["temp_bytes"]
    sizes["peak_bytes"] = peak - sizes["alias_bytes"]
    return program, {"compile_s": compiles.seconds, **sizes}


def interleaved(
    calls: Mapping[str, Callable[[], object]], repeats: Mapping[str, int] | int, inner: int = 1
) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Samples of each call's seconds (each the mean of ``inner`` calls), ``repeats[name]``
    of them, interleaving the names A B A B ...; and each name's last output."""
    if isinstance(repeats, int):
        repeats = dict.fromkeys(calls, repeats)
    times: dict[str, list[float]] = {name: [] for name in calls}
    outputs: dict[str, object] = {}
    for round_ in range(max(repeats.values())):
        for name, call in calls.items():
            if round_ < repeats[name]:
                start = time.perf_counter()
                for _ in range(inner):
                    outputs[name] = call()
                times[name].append((time.perf_counter() - start) / inner)
    return times, outputs


def medians(calls: Mapping[str, Callable[[], object]], rounds: int, inner: int = 1) -> dict:
    """Median seconds per call of each name, interleaved, after one warm-up call each."""
    for call in calls.values():
        call()
    times, _ = interleaved(calls, rounds, inner)
    return {name: statistics.median(samples) for name, samples in times.items()}


def summary(times: list[float]) -> dict[str, float]:
    """Median, min and max of a list of times, in seconds."""
    return {"time_median_s": statistics.median(times), "time_min_s": min(times),
            "time_max_s": max(times)}  # fmt: skip


def environment() -> dict:
    """Backend, device, versions and host of this run."""
    versions = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    device = jax.devices()[0]
    return {"backend": jax.default_backend(), "device": getattr(device, "device_kind", str(device)),
            "device_count": jax.device_count(), "host_cpus": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "versions": versions,
            "date": datetime.date.today().isoformat()}  # fmt: skip
