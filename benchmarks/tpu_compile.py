"""``python -m benchmarks.tpu_compile [--cases NAME ...] [--variant V] [--out DIR]``: where
a TPU's compile of a first call goes (issue 62, item 3), pass by pass.

Each case of :mod:`benchmarks.first_call_cases` (float32, 64-bit mode off) runs its
first call in a fresh process whose XLA dumps the solve's module after every HLO pass
that changed it (``--xla_dump_hlo_pass_re``, the ``_solve`` module alone). A dump's
file time stamps the end of its pass: the time between two dumps is what the passes
between them took (their pipeline named), dump writing included (its cost: the
least gap); from the last dump to the end of XLA's stage is the backend's code
generation, after the HLO passes. The optimized module is counted (instructions,
fusions, while loops, copies, transposes, float64 values, the commonest opcodes) and
comes back gzipped; then the compiled call's median of 3. ``--variant``: the TPU's
profile or XLA's effort changed for the run (``VARIANTS``).

Writes ``<out>/tpu_compile-<case>[-variant].json`` and the module's text.
"""

import argparse
import collections
import gzip
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

RESULTS = pathlib.Path(__file__).parent / "results"
PASS_FILE = re.compile(
    r"module_(\d+)\.(\S+?)\.(\d{4})\.(\S+?)\.after_(\S+?)(?:\.before_(\S+))?\.txt$"
)
VARIANTS = ("base", "roll5", "nosmall", "majorrows", "effort-1", "O1")


def patch(variant: str) -> None:
    """The TPU's profile for ``variant`` (``base``: as committed)."""
    import jax

    from fixedopt._driver import machine

    if variant == "effort-1":  # XLA's least effort at the program's speed
        jax.config.update("jax_exec_time_optimization_effort", -1.0)
    elif variant == "O1":
        jax.config.update("jax_optimization_level", "O1")
    tpu = machine.TPU
    if variant == "roll5":  # the CPU's rolled elimination above 5 unknowns
        tpu = tpu._replace(kernels=tpu.kernels._replace(roll_above=5))
    elif variant == "nosmall":  # no elementwise solves or unrolled products
        tpu = tpu._replace(kernels=tpu.kernels._replace(small_n=0, product_terms=0))
    elif variant == "majorrows":
        tpu = tpu._replace(minor_rows=False)
    machine.BACKENDS["tpu"] = machine.TPU = tpu


def child(case: str, variant: str) -> dict:
    """The case's first call, its stages per program and when each XLA stage ended."""
    import jax

    from benchmarks import first_call, first_call_cases

    first_call_cases.use_float32()
    patch(variant)
    ended: dict = {}

    def listen(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            name = re.sub(r"^jit\((.*)\)$", r"\1", str(kwargs.get("fun_name", "?")))
            ended[name] = (time.time(), seconds)

    jax.monitoring.register_event_duration_secs_listener(listen)
    batch = first_call.BATCHES[case][0]
    calls = first_call_cases.BUILDERS[case](batch)
    seconds, found = first_call.timed(calls["call"])
    compiled = sorted(first_call.timed(calls["call"])[0] for _ in range(3))[1]  # the median
    return {"case": case, "variant": variant, "B": batch, "first_s": seconds, **found,
            "compiled_s": compiled, "compile_ended": ended}  # fmt: skip


def opcodes(text: str) -> dict:
    """Counts in an optimized module's text."""
    found = re.findall(r"^\s+(?:ROOT )?\S+ = .*?\s([a-z][\w-]*)\(", text, re.M)
    ops = collections.Counter(found)
    return {"instructions": sum(ops.values()), "fusions": ops["fusion"],
            "while_loops": ops["while"], "copies": ops["copy"], "transposes": ops["transpose"],
            "f64_values": len(re.findall(r"\bf64\[", text)),
            "top": ops.most_common(25)}  # fmt: skip


def passes(dump: pathlib.Path, ended: float, compile_s: float) -> dict:
    """Time between the solve module's pass dumps, per pipeline and per pass."""
    files = []
    for path in dump.iterdir():
        match = PASS_FILE.search(path.name)
        if match:
            files.append((int(match[3]), path.stat().st_mtime, match[4], match[5], path))
    files.sort()
    if not files:
        return {}
    gaps = [(b[1] - a[1], b[2], a[2], b[3]) for a, b in itertools.pairwise(files)]
    floor = min((g[0] for g in gaps), default=0.0)
    pipelines: dict = collections.defaultdict(float)
    for gap, pipeline, *_ in gaps:
        pipelines[pipeline] += gap
    slowest = sorted(gaps, reverse=True)[:25]
    return {
        "dumps": len(files), "dump_floor_s": floor,
        "first_to_last_dump_s": files[-1][1] - files[0][1],
        "start_to_first_dump_s": files[0][1] - (ended - compile_s),
        "after_last_dump_s": ended - files[-1][1],
        "pipelines": sorted(pipelines.items(), key=lambda kv: -kv[1])[:25],
        "slowest": [{"s": g, "pipeline": p, "after": name} for g, p, _, name in slowest],
        "last_dump_bytes": files[-1][4].stat().st_size,
    }  # fmt: skip


def measure(case: str, variant: str, out: pathlib.Path, each_pass: bool = True) -> dict:
    """The case's first call in a fresh process; its solve's passes (``each_pass``),
    else its optimized module alone."""
    with tempfile.TemporaryDirectory() as dump, tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, FIXEDOPT_CACHE=cache)
        dumped = "--xla_dump_hlo_pass_re=.* " if each_pass else ""
        env["XLA_FLAGS"] = (f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump} "
                            f"--xla_dump_hlo_as_text {dumped}"
                            "--xla_dump_hlo_module_re=.*_solve.*")  # fmt: skip
        command = [sys.executable, "-m", "benchmarks.tpu_compile", "--child", case, variant]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"{case}: {done.stderr[-3000:]}")
        record = json.loads(done.stdout.strip().splitlines()[-1])
        folder = pathlib.Path(dump)
        name = f"tpu_compile-{case}" + (f"-{variant}" if variant != "base" else "")
        optimized = sorted(folder.glob("*_solve*after_optimizations.txt"))
        if optimized:
            text = optimized[-1].read_text()
            record["optimized"] = opcodes(text)
            with gzip.open(out / f"{name}.txt.gz", "wt") as f:
                f.write(text)
        before = sorted(folder.glob("*_solve*before_optimizations.txt"))
        if before:
            record["before"] = opcodes(before[-1].read_text())
        if "_solve" in record["compile_ended"]:
            ended, seconds = record["compile_ended"]["_solve"]
            record["passes"] = passes(folder, ended, seconds)
        (out / f"{name}.json").write_text(json.dumps(record, indent=1))
        return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--cases", nargs="*", default=["spectra_slow"])
    parser.add_argument("--variant", default="base", choices=VARIANTS)
    parser.add_argument("--no-passes", action="store_true", help="no dump after each pass")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for case in args.cases:
        record = measure(case, args.variant, args.out, not args.no_passes)
        keys = ("case", "variant", "first_s", "compiled_s", "compile", "trace")
        shown = {k: record.get(k) for k in keys}
        print(json.dumps(shown | {"passes": {k: v for k, v in record.get("passes", {}).items()
                                             if k.endswith("_s")}}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
