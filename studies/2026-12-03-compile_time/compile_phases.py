"""``python -m benchmarks.compile_phases [--repeats N] [--label L] [--elemental-too]``:
where XLA's compile time of a fixedopt solve goes, phase by phase, from XLA's own
profiler annotations.

Each case of ``benchmarks.compile_time`` named in :data:`CASES` (default lanes, compiled
as a call on its own is: with ``fixedopt.compiler_options``) is traced and lowered
from scratch, then compiled under ``jax.profiler.trace``; the events XLA:CPU records
are summed per phase:

- ``xla``: the whole compile (``PjRtCpuClient::Compile``);
- ``hlo``: everything before the backend (the HLO passes: fusion, simplification,
  layout, scheduling);
- ``emit``: emitting the program's thunks and their kernels' IR, on one thread
  (``ThunkEmitter::EmitEntryComputation``) and collecting the kernels
  (``ThunkEmitter::ConsumeKernels``);
- ``codegen``: compiling the kernels to machine code (``JitCompiler::Compile``), wall
  time; ``codegen CPU``: the same summed over XLA's codegen threads
  (``TaskDispatcher::dispatch``), and ``modules``, how many such tasks ran.

With ``--elemental-too``, a ``minimize`` case is also compiled with the options
fixedopt gives least-squares solves (XLA:CPU's elemental emitter, which emits each
kernel's IR on the codegen threads, not on one).

The names are those of jaxlib 0.10's XLA:CPU (an event XLA no longer records counts 0).
The profiler itself costs a little: the ``xla`` column is a few percent above
``compile_time``'s. Medians of ``--repeats`` compiles, cases interleaved.

Writes ``benchmarks/results/<backend>-compile-phases[-label]-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import pathlib
import statistics
import tempfile
import time

import jax
from jax.profiler import ProfileData

import fixedopt
from benchmarks import compile_time
from benchmarks.timing import environment

CASES = ("gaussian-lm B=1e5", "decay-lm B=1e3", "quad-n64-lbfgs B=1024")
EVENTS = {  # phase: XLA:CPU's event names (jaxlib 0.10)
    "xla": ("PjRtCpuClient::Compile",),
    "backend": ("CpuCompiler::RunBackend",),
    "emit": ("ThunkEmitter::EmitEntryComputation", "ThunkEmitter::ConsumeKernels"),
    "codegen": ("JitCompiler::Compile",),
    "codegen_cpu": ("TaskDispatcher::dispatch",),
}
LEAST_SQUARES = fixedopt.LevenbergMarquardt()  # a solver that gets fixedopt's CPU options
PHASES = ("trace_lower", "xla", "hlo", "emit", "codegen", "codegen_cpu", "modules")


def events(directory: pathlib.Path) -> tuple[dict[str, float], collections.Counter[str]]:
    """Seconds and counts of every event name in the profile written to ``directory``."""
    (path,) = directory.glob("**/*.xplane.pb")
    seconds: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter[str] = collections.Counter()
    for plane in ProfileData.from_file(str(path)).planes:
        for line in plane.lines:
            for event in line.events:
                seconds[event.name] += event.duration_ns / 1e9
                counts[event.name] += 1
    return seconds, counts


def compile_once(case: compile_time.Case, elemental: bool = False) -> dict:
    """Trace and lower ``case`` from scratch, then compile it under the profiler; with
    ``elemental``, with the options of a least-squares solve."""
    jax.clear_caches()
    function, shapes = case.build(case.lanes, case.batch)
    solver = LEAST_SQUARES if elemental else compile_time.solver_of(case.problem)
    tic = time.perf_counter()
    lowered = jax.jit(function, compiler_options=compile_time.options_of(case, solver))
    lowered = lowered.trace(*shapes).lower()
    record = {"trace_lower": time.perf_counter() - tic}
    with tempfile.TemporaryDirectory() as directory:
        with jax.profiler.trace(directory):
            lowered.compile()
        seconds, counts = events(pathlib.Path(directory))
    for phase, names in EVENTS.items():
        record[phase] = sum(seconds[name] for name in names)
    record["hlo"] = record["xla"] - record.pop("backend")
    record["modules"] = sum(counts[name] for name in EVENTS["codegen_cpu"])
    return record


def measure(repeats: int, elemental_too: bool) -> list[dict]:
    every = {case.name: case for case in compile_time.cases() if case.lanes is None}
    variants = [(every[name], False) for name in CASES]
    if elemental_too:
        variants += [(case, True) for case, _ in variants if case.problem not in compile_time.FITS]
    compile_once(dataclasses.replace(variants[0][0], batch=8))  # one-time costs: not counted
    samples: dict[str, list[dict]] = {_name(*variant): [] for variant in variants}
    for _ in range(repeats):
        for variant in variants:
            name = _name(*variant)
            samples[name].append(compile_once(*variant))
            print(name, {k: round(v, 3) for k, v in samples[name][-1].items()}, flush=True)
    return [{"kind": "compile_phases", "case": name, "repeats": repeats,
             **{key: statistics.median(run[key] for run in runs) for key in PHASES}}
            for name, runs in samples.items()]  # fmt: skip


def _name(case: compile_time.Case, elemental: bool) -> str:
    return case.name + (", elemental emitter" if elemental else "")


def markdown(records: list[dict], title: str, env: dict) -> str:
    head = ("case", "trace + lower s", "XLA compile s", "HLO passes s", "emit s",
            "kernel codegen s (wall)", "kernel codegen s (CPU)", "kernel modules")  # fmt: skip
    lines = [f"# {title}", "",
             f"Phases of one compile from scratch, median of {records[0]['repeats']}, "
             f"from XLA's profiler events; backend {env['backend']} ({env['host_cpus']} "
             f"CPUs), jax {env['versions'].get('jax')}. `python -m benchmarks.compile_phases`.",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for r in records:
        cells = [r["case"], *(f"{r[key]:.2f}" for key in PHASES[:-1]), str(round(r["modules"]))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> pathlib.Path:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compile_phases",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3, help="compiles per case")
    parser.add_argument("--label", default="", help="added to the results' file name")
    parser.add_argument(
        "--elemental-too",
        action="store_true",
        help="minimize's case also with the least-squares solves' options",
    )
    parser.add_argument("--out", type=pathlib.Path, default=compile_time.RESULTS)
    args = parser.parse_args(argv)
    env = environment() | {"suite": "compile_phases"}
    records = [env | r for r in measure(args.repeats, args.elemental_too)]
    return compile_time.write(records, env, markdown, args.out, "compile-phases", args.label)


if __name__ == "__main__":
    main()
