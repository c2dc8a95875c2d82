"""Interleaved timing (A B A B ...) and the environment each result is tagged with."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping
from importlib import metadata

import jax


def timed(call: Callable[[], object]) -> tuple[float, object]:
    """Seconds one call takes, and its result (the call blocks until ready itself)."""
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


class compile_monitor:  # noqa: N801 (a context manager, named like a function)
    """Count XLA compilations and sum the seconds spent compiling inside a ``with``.

    ``seconds`` adds JAX's own trace, lowering and backend-compile durations (from
    :mod:`jax.monitoring`), so it excludes running the program and allocating.
    """

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
    with compile_monitor() as compiles:
        seconds, _ = timed(call)
    return {"first_call_s": seconds, "compile_s": compiles.seconds}


def interleaved(
    calls: Mapping[str, Callable[[], object]], repeats: Mapping[str, int]
) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Time every call ``repeats[name]`` times, interleaving the names A B A B ...

    Methods with fewer repeats drop out of the later rounds. Returns the times per
    name and the output of each name's last call.
    """
    times: dict[str, list[float]] = {name: [] for name in calls}
    outputs: dict[str, object] = {}
    for round_ in range(max(repeats.values())):
        for name, call in calls.items():
            if round_ < repeats[name]:
                seconds, outputs[name] = timed(call)
                times[name].append(seconds)
    return times, outputs


def summary(times: list[float]) -> dict[str, float]:
    """Median, min and max of a list of times, in seconds."""
    return {
        "time_median_s": statistics.median(times),
        "time_min_s": min(times),
        "time_max_s": max(times),
    }


def environment() -> dict:
    """Backend, device, versions and host of this run."""
    device = jax.devices()[0]
    versions = {}
    packages = ("jax", "jaxlib", "optax", "scipy", "numpy", "fixedopt", "jaxopt",
                "tfp-nightly", "lmfit", "matplotlib")  # fmt: skip
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    versions["python"] = platform.python_version()
    return {
        "backend": jax.default_backend(),
        "device": getattr(device, "device_kind", str(device)),
        "device_count": jax.device_count(),
        "host_cpus": os.cpu_count(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "versions": versions,
        "date": datetime.date.today().isoformat(),
    }


def save_results(stem: str, result: dict, markdown: str) -> None:
    """Write ``benchmarks/results/<stem>.json`` and ``.md``, and print the markdown."""
    import json
    import pathlib

    results = pathlib.Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (results / f"{stem}.md").write_text(markdown)
    print(markdown)
