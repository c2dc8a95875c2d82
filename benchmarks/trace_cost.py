"""Study (issue 62 item 4, issue 60): the Python-side cost of fixedopt's programs, the
trace and lowering of a first call, per case, in fresh processes: CPU seconds per stage
(JAX's monitoring events), the user's function's traces, jaxpr equations of the solve,
and a hash of every StableHLO module lowered (JAX_DUMP_IR_TO).

``python -m benchmarks.trace_cost [--repeats N] [--cases ...] [--profile] [--against DIR]``
(``--against``: another checkout, its processes interleaved with this one's).
"""

import argparse
import collections
import glob
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CASES = ("spectra_slow", "spot", "rk4", "quad64")
SMALL = {"spectra_slow": 2000, "spot": 20000, "rk4": 500, "quad64": 2048}


def count_eqns(jaxpr) -> int:
    import jax
    import jax.extend

    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            total += count_eqns(sub)
    return total


def child(case: str, profile: bool) -> dict:
    import jax

    from benchmarks import first_call_cases as fc
    from fixedopt.testing_problems import quad_jax as _quad

    counter = collections.Counter()

    def counted(name, fun):
        def wrapped(*a, **k):
            if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((a, k))):
                counter[name] += 1
            return fun(*a, **k)

        return wrapped

    fc.spectrum = counted("model", fc.spectrum)
    fc.spot_residual = counted("model", fc.spot_residual)
    fc.trajectory_residual = counted("model", fc.trajectory_residual)
    fc.quad_jax = counted("model", _quad)

    from fixedopt._driver import engine

    recorded = []
    for attr in ("_compiled", "_compiled_for_cpu"):
        original = getattr(engine, attr)

        class Spy:
            def __init__(self, inner):
                self.inner = inner

            def __call__(self, *args):
                recorded.append(args)
                return self.inner(*args)

            def __getattr__(self, name):
                return getattr(self.inner, name)

        setattr(engine, attr, Spy(original))

    stages = {"/jax/core/compile/jaxpr_trace_duration": "trace",
              "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
              "/jax/core/compile/backend_compile_duration": "xla"}  # fmt: skip
    found = collections.defaultdict(float)
    per = collections.defaultdict(lambda: collections.defaultdict(float))
    traces_at = [0]

    def listen(event, seconds, **kwargs):
        if event in stages:
            thread = "ahead" if threading.current_thread().name.startswith("fixedopt-ahead") else ""
            key = stages[event] + ("_ahead" if thread else "")
            found[key] += seconds
            name = str(kwargs.get("fun_name", "?"))
            per[name][stages[event]] += seconds
            if stages[event] == "trace":
                per[name]["model_traces"] += counter["model"] - traces_at[0]
                traces_at[0] = counter["model"]
                per[name]["n"] += 1

    jax.devices()
    calls = fc.BUILDERS[case](SMALL[case])
    jax.monitoring.register_event_duration_secs_listener(listen)
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    start, cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(calls["call"]())
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if profile:
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(80)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(40)
    from fixedopt._driver import ahead

    ahead.settle()
    model_traces = counter["model"]
    programs = {k: dict(v) for k, v in per.items()}
    # The block's program traced and lowered again, alone: CPU seconds, median of 5
    # (JAX's caches cleared before each), its equations (nested counted), model traces.
    block = {}
    if recorded:
        args = recorded[0]
        times = []
        for _ in range(5):
            jax.clear_caches()
            before = counter["model"]
            with engine.machine.traced_at(args[1].precision):
                t0 = time.process_time()
                traced = jax.jit(engine._solve, static_argnums=(0, 1)).trace(*args)
                t1 = time.process_time()
                text = traced.lower().as_text()
                t2 = time.process_time()
            times.append((t1 - t0, t2 - t1))
        block = {"block_trace_s": statistics.median(t for t, _ in times),
                 "block_lower_s": statistics.median(t for _, t in times),
                 "block_eqns": count_eqns(traced.jaxpr.jaxpr),
                 "block_model_traces": counter["model"] - before,
                 "block_hlo": hashlib.sha256(text.encode()).hexdigest()[:16],
                 "block_hlo_lines": text.count("\n")}  # fmt: skip
    return {"case": case, "wall_s": wall, "cpu_s": cpu, **found, "model_traces": model_traces,
            **block, "programs": programs}  # fmt: skip


def run(
    case: str, cache: str, dump: str | None = None, profile: bool = False, tree: str | None = None
) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["FIXEDOPT_CACHE"] = cache
    if dump:
        env["JAX_DUMP_IR_TO"] = dump
        env["JAX_DUMP_IR_MODES"] = "stablehlo"
    command = [sys.executable, "-m", "benchmarks.trace_cost", "--child", case]
    if profile:
        command.append("--profile")
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False,
                          cwd=tree)  # fmt: skip
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    if profile:
        print(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def hashes(dump: str, tree: str) -> dict:
    """Each dumped module's digest without its source locations (the program alone:
    an edit elsewhere in a file moves its line numbers)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(dump, "*"))):
        with open(path, "rb") as file:
            text = file.read().replace(os.path.abspath(tree).encode(), b"ROOT")
        lines = [line for line in text.splitlines() if not line.startswith(b"#loc")]
        text = re.sub(rb" loc\((?:[^()]|\([^()]*\))*\)", b"", b"\n".join(lines))
        out[os.path.basename(path)] = hashlib.sha256(text).hexdigest()[:16]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", default=None)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--against", default=None, help="another checkout, interleaved")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.profile)))
        return
    trees = {"this": os.getcwd(), **({"against": args.against} if args.against else {})}
    for case in args.cases:
        caches = {k: tempfile.mkdtemp() for k in trees}
        firsts, records = {}, {k: [] for k in trees}
        for label, tree in trees.items():
            with tempfile.TemporaryDirectory() as dump:
                firsts[label] = run(case, caches[label], dump, args.profile, tree)
                digest = hashes(dump, tree)
            whole = hashlib.sha256(json.dumps(sorted(digest.items())).encode()).hexdigest()[:16]
            print(case, label, "modules", len(digest), "hash", whole, digest, flush=True)
        for _ in range(args.repeats):  # interleaved
            for label, tree in trees.items():
                records[label].append(run(case, caches[label], tree=tree))
        for label in trees if args.repeats else ():
            summary(case, label, firsts[label], records[label])
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)


def summary(case: str, label: str, first: dict, records: list[dict]) -> None:
    keys = ("cpu_s", "block_trace_s", "block_lower_s")
    med = {k: statistics.median(r.get(k, 0.0) for r in records) for k in keys}
    solve = [r["programs"].get("_solve", {}).get("trace", 0.0) for r in records]
    print(json.dumps({"case": case, "tree": label,
                      "model_traces_new_model": first["model_traces"],
                      "model_traces_new_process": records[0]["model_traces"],
                      **{k: first.get(k) for k in ("block_eqns", "block_model_traces",
                                                    "block_hlo", "block_hlo_lines")},
                      "new_model_cpu_s": round(first["cpu_s"], 3),
                      "new_process_solve_trace_s": round(statistics.median(solve), 3),
                      **{f"median_{k}": round(v, 3) for k, v in med.items()},
                      "cpu_s_all": [round(r["cpu_s"], 3) for r in records]}),
          flush=True)  # fmt: skip
    for name, p in records[0]["programs"].items():
        print("    new process:", name, {k: round(v, 3) for k, v in p.items()}, flush=True)


if __name__ == "__main__":
    main()
