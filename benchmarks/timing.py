"""The one timing module: interleaved calls (A B A B ...), medians, compile time apart
(from :mod:`jax.monitoring`); callers block each timed call until ready."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata

import jax

PACKAGES = ("jax", "jaxlib", "optax", "scipy", "numpy", "fixedopt", "jaxopt", "tfp-nightly",
            "lmfit", "matplotlib", "ase")  # fmt: skip


STAGES = ("jaxpr_trace", "jaxpr_to_mlir_module", "backend_compile")  # the last: XLA's
COMPILE_EVENTS = tuple(f"/jax/core/compile/{stage}_duration" for stage in STAGES)


@contextlib.contextmanager
def compile_monitor():
    """Yields ``{"count", "seconds"}``: XLA compilations and JAX compile seconds within."""
    found = {"count": 0, "seconds": 0.0}

    def listen(event, duration, **kwargs):
        if event in COMPILE_EVENTS:
            found["seconds"] += duration
            found["count"] += event == COMPILE_EVENTS[-1]

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


def cases_to_files(
    env: dict, cases: list[str], measure: Callable[[str], dict], markdown: Callable,
    out: pathlib.Path, name: str,
) -> pathlib.Path:  # fmt: skip
    """``measure(case)`` for every case (each record printed as it comes), written as
    ``<out>/<backend>-<name>-<date>.{jsonl,md}`` (``markdown(records, title, env)`` writes
    the table); returns the files' stem."""
    records = []
    for case in cases:
        records.append(env | measure(case))
        print(json.dumps({k: records[-1][k] for k in records[-1] if k not in env}), flush=True)
    stem = out / f"{env['backend']}-{name}-{env['date']}"
    out.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps(record, default=str) + "\n" for record in records)
    stem.with_suffix(".jsonl").write_text("".join(lines))
    stem.with_suffix(".md").write_text(markdown(records, stem.name, env))
    print(f"wrote {stem}.jsonl and .md")
    return stem


def run_cases(
    module: str, doc: str, cases: dict, rounds: int, results: pathlib.Path,
    measure: Callable[[str, int], dict], markdown: Callable, argv: list[str] | None = None,
) -> pathlib.Path:  # fmt: skip
    """The command ``python -m benchmarks.<module>`` of a benchmark whose ``cases`` are
    named (:func:`case_arguments`): ``measure(case, rounds)`` for each case chosen, and
    ``markdown(records, title, env, rounds)`` for its table, written by
    :func:`cases_to_files` as ``<backend>-<module, dashed>-<date>``; returns the stem."""
    args = case_arguments(module, doc, cases, rounds, results).parse_args(argv)
    env = environment() | {"suite": module}
    measured = lambda name: measure(name, args.rounds)
    written = lambda records, title, env: markdown(records, title, env, args.rounds)
    chosen = args.cases or list(cases)
    return cases_to_files(env, chosen, measured, written, args.out, module.replace("_", "-"))


def case_arguments(module: str, doc: str, cases: dict, rounds: int, results: pathlib.Path):
    """The command line of a benchmark ``python -m benchmarks.<module>`` whose ``cases``
    are named: ``--rounds`` (default ``rounds``), ``--cases``, ``--out`` (``results``);
    the parser, to add more before parsing."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}",
                                     description=doc.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=rounds, help="calls of each program")
    parser.add_argument("--cases", nargs="*", choices=list(cases), help="default: all")
    parser.add_argument("--out", type=pathlib.Path, default=results, help="results folder")
    return parser
