"""``python -m benchmarks.first_call [--repeats N] [--cases NAME ...] [--float32] [--quick]
[--first-only] [--no-ahead] [--label L] [--out DIR]``: what a notebook user waits for
before the first answer.

Each case runs in fresh Python processes, a model no process has compiled before (its
persistent compilation cache a new, empty folder); the wait beyond the compiled call's
own time of: a ``new model`` (the first call); a ``new batch`` (the same process, a tenth
of the batch) and ``5 rows`` (then a batch of 5, a program of its own); a ``new
process`` (a second process, the cache the first left); the first ``gradient``
(spectra: the first ``jax.grad`` of one fit's centre, after that fit's first forward
call: ``docs/decisions.md``, "The first gradient through a solve"). The first call's
compile is split into JAX's stages (trace, lowering, XLA), in the caller's thread and
per program (the thread that compiled it: the caller's, or ``ahead``, fixedopt's own
threads, which compile a CPU block's tail beside the block and ``curve_fit``'s
covariance from the call's start; ``ahead after``: what they still took once the first
call had returned, waited for before the compiled calls are timed); a third process
dumps XLA's
optimized programs and counts what they hold (instructions, while loops, fusions: each
a kernel; XLA's passes: ``docs/decisions.md``, "Where a solve's compile goes"). Cases
(:mod:`benchmarks.first_call_cases`; :data:`BATCHES`: B, then the new batch):
``spectra``, ``spectra_slow`` (a degenerate spectrum: the first batch has a tail),
``models``, ``rk4``, ``spot``, ``quad64``, ``optax_quad64`` (the peer: optax's
L-BFGS on ``quad64``'s batch); float64 (but ``spot``), or every case float32
with 64-bit mode off (``--float32``: a TPU's users). Medians over ``--repeats``;
``--quick``: a smoke run (a tenth of each batch, one repeat, no dump); ``--first-only``: the new
model and the new process alone (no new batch, 5 rows, gradient or dump: a TPU
compiles each anew, and a device call has minutes); ``--no-ahead``:
a CPU block's tail compiled by the call that first has one, as before issue 62 (label
the run). Writes
``<out>/<backend>-first_call[-float32][-label]-<date>.{json,md}``.
"""

import argparse
import collections
import contextlib
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import jax

from benchmarks import first_call_cases, timing
from benchmarks.first_call_cases import BUILDERS
from fixedopt.testing import no_compiles_ahead, wait_for_compiles_ahead

RESULTS = pathlib.Path(__file__).parent / "results"
# B, then the new batch: a tenth of it, as in issue 40 (2000 spectra, then 200); then a
# batch of few rows (at most 8 run as one vmap: a program of their own).
BATCHES = {"spectra": (2000, 200), "spectra_slow": (2000, 200), "models": (2000, 200),
           "rk4": (500, 50), "spot": (100_000, 10_000), "quad64": (16384, 1600),
           "optax_quad64": (16384, 1600)}  # fmt: skip
QUICK = 10  # --quick: each batch this many times smaller
FEW_ROWS = 5
NAN = float("nan")  # a wait not measured (--first-only), or not counted in an older record
STAGES = {"trace": "jaxpr_trace", "lower": "jaxpr_to_mlir_module", "compile": "backend_compile"}


@contextlib.contextmanager
def per_program():
    """Yields ``{(program, thread): {"count", <stage>...}}``: the seconds of each stage
    of :data:`STAGES` per program compiled meanwhile (``jit``'s function name; thread:
    ``caller`` or ``ahead``)."""
    found: dict = collections.defaultdict(lambda: {"count": 0, **dict.fromkeys(STAGES, 0.0)})
    events = {f"/jax/core/compile/{event}_duration": stage for stage, event in STAGES.items()}

    def listen(event, seconds, **kwargs):
        if event in events:
            name = re.sub(r"^jit\((.*)\)$", r"\1", str(kwargs.get("fun_name", "?")))
            thread = threading.current_thread().name
            entry = found[name, "ahead" if thread.startswith("fixedopt-ahead") else "caller"]
            entry[events[event]] += seconds
            entry["count"] += events[event] == "trace"

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield found
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def timed(call) -> tuple[float, dict]:
    """Wall seconds of ``call()`` (blocked until ready), its process CPU seconds (every
    thread: what a loaded machine cannot blur), its compile stages, in all and per
    program."""
    with timing.compile_monitor() as found, per_program() as programs:
        start, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(call())
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    listed = [{"program": name, "thread": thread, **entry}
              for (name, thread), entry in programs.items()]  # fmt: skip
    return seconds, {**{stage: found[event] for stage, event in STAGES.items()},
                     "cpu_s": cpu, "programs": listed}  # fmt: skip


def wait(call) -> dict:
    """The first call's wall time, its compile stages, what fixedopt's thread still
    compiled after it, and its wait beyond the median of three compiled calls."""
    first, found = timed(call)
    start, cpu = time.perf_counter(), time.process_time()
    wait_for_compiles_ahead()
    after, cpu_after = time.perf_counter() - start, time.process_time() - cpu
    again = statistics.median(timed(call)[0] for _ in range(3))
    return {"first_s": first, "compiled_s": again, "wait_s": first - again,
            "ahead_after_s": after, "ahead_after_cpu_s": cpu_after, **found}  # fmt: skip


def child(case: str, role: str, quick: bool, first_only: bool = False) -> dict:
    """One process's measurements (``role``: ``new`` or ``again``, or ``size``;
    ``first_only``: the new model's call alone in ``new``)."""
    batch, other = (size // QUICK if quick else size for size in BATCHES[case])
    # The backend opened before any case's data: a case whose data are NumPy's (spot)
    # would open it in its first call (a TPU: about 10 s, what any JAX program pays).
    start = time.perf_counter()
    jax.devices()
    opened = time.perf_counter() - start
    calls = BUILDERS[case](batch)
    if role == "size":
        jax.block_until_ready(calls["call"]())
        return {}
    first = wait(calls["call"])
    if role == "again":  # the persistent cache's call: what it still traces and lowers
        return {"new_process_s": first["wait_s"], "new_process_cpu_s": first["cpu_s"],
                "again_open_s": opened,
                "again_programs": first["programs"],
                **{f"again_{stage}_s": first[stage] for stage in STAGES}}  # fmt: skip
    record = {"B": batch, "compiled_s": first["compiled_s"], "new_model_s": first["wait_s"],
              "ahead_after_s": first["ahead_after_s"], "programs": first["programs"],
              "open_s": opened,
              "new_model_cpu_s": first["cpu_s"], "ahead_after_cpu_s": first["ahead_after_cpu_s"],
              **{f"{stage}_s": first[stage] for stage in STAGES}}  # fmt: skip
    if first_only:
        return record
    record |= {"new_batch_s": wait(BUILDERS[case](other)["call"])["wait_s"],
               "few_rows_s": wait(BUILDERS[case](FEW_ROWS)["call"])["wait_s"]}  # fmt: skip
    if "gradient" in calls:  # one fit's first forward call, then its first gradient
        forward, gradient = wait(calls["forward"]), wait(calls["gradient"])
        record |= {"gradient_s": gradient["wait_s"], "forward_first_s": forward["first_s"],
                   "gradient_first_s": gradient["first_s"]}  # fmt: skip
    return record


# ---------------------------------------------------------------- the parent side


def run_child(case: str, role: str, cache: str, flags: list[str], dump: str | None = None) -> dict:
    # fixedopt's default persistent cache, in a new folder (code with no default cache
    # ignores it: its new process compiles everything again, as its users' did).
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["FIXEDOPT_CACHE"] = cache
    if dump:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    command = [sys.executable, "-m", "benchmarks.first_call", "--child", case, role, *flags]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{case} {role}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


COUNTED = {"instructions": r"^\s+(?:ROOT )?\S+ = ", "while_loops": r" while\(",
           "fusions": r" fusion\(", "computations": r"^\S.*\{$"}  # fmt: skip


def program_size(case: str, flags: list[str]) -> dict:
    """What the optimized programs of the case's first call hold (XLA's dump)."""
    with tempfile.TemporaryDirectory() as dump, tempfile.TemporaryDirectory() as cache:
        run_child(case, "size", cache, flags, dump)
        texts = [p.read_text() for p in sorted(pathlib.Path(dump).glob("*after_optimizations.txt"))]
    sizes = [{k: len(re.findall(pattern, text, re.MULTILINE)) for k, pattern in COUNTED.items()}
             for text in texts]  # fmt: skip
    biggest = max(sizes, key=lambda s: s["instructions"])
    return {"programs_compiled": len(sizes), **{f"largest_{k}": v for k, v in biggest.items()},
            "all_instructions": sum(s["instructions"] for s in sizes)}  # fmt: skip


def measure(case: str, flags: list[str]) -> dict:
    """One repeat of ``case``: a new-model process, then a new-process one."""
    with tempfile.TemporaryDirectory() as cache:
        new, again = run_child(case, "new", cache, flags), run_child(case, "again", cache, flags)
        return {"case": case, **new, **again}


def row(r: dict) -> str:
    """One case's line of the table."""
    gradient = "—"
    if "gradient_s" in r:
        gradient = f"{r['gradient_s']:.2f} ({r['gradient_first_s'] / r['forward_first_s']:.1f}x)"
    size = "—"
    if "programs_compiled" in r:
        size = (f"{r['programs_compiled']}: {r['largest_instructions']}, "
                f"{r['largest_while_loops']}, {r['largest_fusions']}")  # fmt: skip
    return (
        f"| {r['case']} | {r['B']} | {r['compiled_s']:.2f} | {r['new_model_s']:.2f} | "
        f"{r['trace_s']:.2f} / {r['lower_s']:.2f} / {r['compile_s']:.2f} | "
        f"{r['ahead_after_s']:.2f} | {r.get('new_batch_s', NAN):.2f} | "
        f"{r.get('few_rows_s', NAN):.2f} | "
        f"{r['new_process_s']:.2f} ({r['again_trace_s']:.2f} / {r['again_lower_s']:.2f} / "
        f"{r['again_compile_s']:.2f}) | {gradient} | {size} |"
    )


def cpu_row(r: dict) -> str:
    """One case's process CPU seconds (NaN in a record made before they were counted)."""
    keys = ("new_model_cpu_s", "ahead_after_cpu_s", "new_process_cpu_s")
    return f"| {r['case']} | " + " | ".join(f"{r.get(k, NAN):.2f}" for k in keys) + " |"


def program_rows(r: dict, call: str = "new_model") -> list[str]:
    """The case's first call per program (its median run), the slowest first; the
    programs under 0.05 s in one line. ``call``: ``new_model``, or ``new_process``
    (the cached call: what it still traces, lowers and reads)."""
    runs = sorted(r["runs"], key=lambda run: run[f"{call}_s"])
    listed = "programs" if call == "new_model" else "again_programs"
    median = runs[len(runs) // 2]
    if listed not in median:  # a record made before they were listed
        return []
    programs = sorted(median[listed], key=lambda p: -sum(p[s] for s in STAGES))
    big = [p for p in programs if sum(p[s] for s in STAGES) >= 0.05]
    small = [p for p in programs if p not in big]
    lines = [f"| {r['case']} | {p['program']} | {p['thread']} | {p['count']} | "
             + " / ".join(f"{p[s]:.2f}" for s in STAGES) + " |" for p in big]  # fmt: skip
    if small:
        total = [sum(p[s] for p in small) for s in STAGES]
        lines.append(f"| {r['case']} | {len(small)} others | | {sum(p['count'] for p in small)} | "
                     + " / ".join(f"{t:.2f}" for t in total) + " |")  # fmt: skip
    return lines


def markdown(records: list[dict], environment: dict, mode: str) -> list[str]:
    return [
        "# The first call: the wait beyond the compiled call (seconds)", "",
        f"{environment['backend']}, {mode}, jax {environment['versions']['jax']}, "
        f"{environment['date']}; medians over fresh processes (`python -m benchmarks.first_call`). "
        "Targets (issue 62): new model <= 2 (with a slow row), new batch <= 0.5, new process "
        "<= 1, gradient <= 4 (and <= 2x the forward first call), spot <= 1.5, quad64 <= 2.5.", "",
        "| case | B | compiled call | new model | (trace / lower / XLA) | ahead after | "
        f"new batch (B/10) | {FEW_ROWS} rows | new process (trace / lower / XLA) | "
        "gradient (first grad / first forward) | programs, largest: instructions, while "
        "loops, fusions |",
        "|---|---:|---:|---:|---|---:|---:|---:|---|---|---|",
        *map(row, records), "",
        "Process CPU seconds, every thread (a loaded machine's wall times are noise; "
        "these are not): the new model's first call, what fixedopt's `ahead` thread "
        "spent after it, the new process's first call:", "",
        "| case | new model | ahead after | new process |", "|---|---:|---:|---:|",
        *map(cpu_row, records), "",
        "Opening the backend, before each process's first call and not in it (seconds; "
        "any JAX program's): " + ", ".join(
            f"{r['case']} {r.get('open_s', NAN):.2f} and {r.get('again_open_s', NAN):.2f}"
            for r in records) + ".", "",
        "The new model's first call per program (thread: the caller's, or fixedopt's "
        "`ahead`; traces counted):", "",
        "| case | program | thread | traces | trace / lower / XLA |",
        "|---|---|---|---:|---|",
        *(line for r in records for line in program_rows(r)), "",
        "The new process's first call per program (a program read from the persistent "
        "cache is still traced and lowered, its XLA stage the read):", "",
        "| case | program | thread | traces | trace / lower / XLA |",
        "|---|---|---|---:|---|",
        *(line for r in records for line in program_rows(r, "new_process")),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("CASE", "ROLE"), help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(BATCHES), choices=BATCHES)
    parser.add_argument("--float32", action="store_true", help="every case in float32, x64 off")
    parser.add_argument("--quick", action="store_true", help="a smoke run: B/10, 1 repeat")
    parser.add_argument("--first-only", action="store_true", help="new model, new process only")
    parser.add_argument(
        "--no-ahead",
        action="store_true",
        help="a tail compiled by the call that has it (before issue 62)",
    )
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    if args.float32:
        first_call_cases.use_float32()
    else:
        jax.config.update("jax_enable_x64", True)
    if args.child:
        with no_compiles_ahead() if args.no_ahead else contextlib.nullcontext():
            print(json.dumps(child(*args.child, quick=args.quick, first_only=args.first_only)))
        return
    options = (("--float32", args.float32), ("--quick", args.quick),
               ("--first-only", args.first_only), ("--no-ahead", args.no_ahead))  # fmt: skip
    flags = [flag for flag, on in options if on]
    repeats = 1 if args.quick else args.repeats
    records = []
    for case in args.cases:
        runs = [measure(case, flags) for _ in range(repeats)]
        numbers = [k for k, v in runs[0].items() if isinstance(v, float | int)]
        medians = {k: statistics.median(r[k] for r in runs) for k in numbers}
        size = {} if args.quick or args.first_only else program_size(case, flags)
        records.append({"case": case, **medians, **size, "repeats": repeats, "runs": runs})
        print(json.dumps(records[-1] | {"runs": None}), flush=True)
    env = timing.environment()
    mode = "float32" if args.float32 else "float64"
    label = "".join(f"-{part}" for part in ("float32" * args.float32, args.label) if part)
    stem = args.out / f"{env['backend']}-first_call{label}-{env['date']}"
    timing.write_markdown(stem, markdown(records, env, mode))
    stem.with_suffix(".json").write_text(json.dumps({"environment": env, "records": records},
                                                    indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
