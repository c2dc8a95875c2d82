"""Other XLA:CPU flags on quad n = 64's first call: each in a fresh process (``XLA_FLAGS``),
the first call's wait beyond the compiled call, XLA's compile, and the compiled call
(median of 4), through ``benchmarks.first_call``'s case.

    PYTHONPATH=. python studies/2026-12-05-llvm_opt_level/flags.py [--rounds 1] [--case quad64]
"""

import argparse
import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve()
FLAGS = ("", "--xla_cpu_opt_preset=CPU_OPT_PRESET_FAST_COMPILE",
         "--xla_cpu_parallel_codegen_split_count=2", "--xla_cpu_use_xnnpack=false")  # fmt: skip


def child(case: str) -> dict:
    os.environ["FIXEDOPT_CACHE"] = "off"
    import jax

    jax.config.update("jax_enable_x64", True)
    from benchmarks import first_call

    calls = first_call.BUILDERS[case](first_call.BATCHES[case][0])
    first = first_call.wait(calls["call"])
    again = statistics.median(first_call.timed(calls["call"])[0] for _ in range(4))
    return {"wait": first["wait_s"], "compile": first["compile"], "run": again}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--case", default="quad64")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    found = collections.defaultdict(list)
    for _ in range(args.rounds):
        for flags in FLAGS:
            env = {**os.environ, "XLA_FLAGS": flags}
            done = subprocess.run([sys.executable, str(HERE), "--child", args.case], env=env,
                                  capture_output=True, text=True, check=True)  # fmt: skip
            found[flags].append(json.loads(done.stdout.strip().splitlines()[-1]))
    for flags, records in found.items():
        medians = {k: round(statistics.median(r[k] for r in records), 3) for k in records[0]}
        print(flags or "(XLA's defaults)", medians)


if __name__ == "__main__":
    main()
