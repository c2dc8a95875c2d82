"""The one timing module: interleaved calls (A B A B ...), medians, compile time apart
(from :mod:`jax.monitoring`); callers block each timed call until ready."""

import contextlib
import datetime
import os
import pathlib
import platform
import statistics
import threading
import time
from collections.abc import Callable
from importlib import metadata

import jax

PACKAGES = ("jax", "jaxlib", "optax", "scipy", "numpy", "fixedopt", "jaxopt", "optimistix",
            "tfp-nightly", "lmfit", "matplotlib", "ase")  # fmt: skip


STAGES = ("jaxpr_trace", "jaxpr_to_mlir_module", "backend_compile")  # the last: XLA's
COMPILE_EVENTS = tuple(f"/jax/core/compile/{stage}_duration" for stage in STAGES)


@contextlib.contextmanager
def compile_monitor():
    """Yields ``{"count", "seconds", <stage>...}``: XLA compilations and JAX compile
    seconds within, in all and per stage of :data:`STAGES`, in this thread (not those
    fixedopt compiles ahead in its own, a CPU block's tail, meanwhile: the caller's wait)."""
    found = {"count": 0, "seconds": 0.0, **dict.fromkeys(STAGES, 0.0)}
    here = threading.current_thread()

    def listen(event, duration, **kwargs):
        if event in COMPILE_EVENTS and threading.current_thread() is here:
            found["seconds"] += duration
            found["count"] += event == COMPILE_EVENTS[-1]
            found[STAGES[COMPILE_EVENTS.index(event)]] += duration

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield found
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def first_call(call: Callable[[], object]) -> dict[str, float]:
    """Time a first (compiling) call: its wall time and the compile seconds within it."""
    start = time.perf_counter()
    with compile_monitor() as compiles:
        call()
    return {"first_call_s": time.perf_counter() - start, "compile_s": compiles["seconds"]}


def compiled(jitted, *inputs) -> tuple[object, dict]:
    """``jitted`` compiled for ``inputs``; compile seconds and XLA's memory analysis."""
    with compile_monitor() as compiles:
        program = jitted.lower(*inputs).compile()
    memory = program.memory_analysis()
    sizes = {f"{k}_bytes": int(getattr(memory, f"{k}_size_in_bytes", 0) or 0)
             for k in ("temp", "argument", "output", "alias")}  # fmt: skip
    peak = sizes["argument_bytes"] + sizes["output_bytes"] + sizes["temp_bytes"]
    sizes["peak_bytes"] = peak - sizes["alias_bytes"]
    return program, {"compile_s": compiles["seconds"], **sizes}


def interleaved(calls: dict, repeats: dict | int, inner: int = 1) -> tuple[dict, dict]:
    """``repeats`` samples of each call's seconds, interleaved A B A B; last outputs."""
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


def compared(calls, against: str, rounds: int, inner: int = 1, **fields) -> dict:
    """``fields``, the median seconds of each call (after a warm-up), ratios to ``against``."""
    for call in calls.values():  # warm-up
        call()
    times, _ = interleaved(calls, rounds, inner)
    seconds = {name: statistics.median(samples) for name, samples in times.items()}
    ratios = {f"{k}_vs_{against}": v / seconds[against] for k, v in seconds.items() if k != against}
    return fields | {f"{k}_s": v for k, v in seconds.items()} | ratios


def summary(times: list[float]) -> dict[str, float]:
    """Median, min and max of a list of times, in seconds."""
    return {"time_median_s": statistics.median(times), "time_min_s": min(times),
            "time_max_s": max(times)}  # fmt: skip


def environment() -> dict:
    """Backend, device, versions and host of this run."""
    versions = {"python": platform.python_version()}
    for package in PACKAGES:  # those installed
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    device = jax.devices()[0]
    return {"backend": jax.default_backend(), "device": getattr(device, "device_kind", str(device)),
            "device_count": jax.device_count(), "host_cpus": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "versions": versions,
            "date": datetime.date.today().isoformat()}  # fmt: skip


def write_markdown(stem: pathlib.Path, lines: list[str]) -> pathlib.Path:
    """Write ``lines`` as ``<stem>.md`` (its folder made if missing), print them, and
    return ``stem``."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return stem
