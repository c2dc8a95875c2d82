"""Lanes on a TPU (issue 61): ``minimize``'s default lanes (at most an eighth of the
batch, refilled) against the whole batch in one loop (``lanes >= B``), beside TFP's
batched L-BFGS, on ``quad`` and ``rosen`` at n = 8, 64, 512, float32. One device call:
``bash benchmarks/device.sh`` is not needed; ``python3 -m benchmarks.tpu_lanes OUT``."""

import argparse
import json
import sys

import jax

from benchmarks.suites import Plan, grid, run_plan

METHODS = ("fixedopt-mask", "fixedopt-mask-vmap", "tfp-lbfgs-batch")
SIZES = ((16_384, 8), (16_384, 64), (2_048, 512))


def main(out: str) -> None:
    print("backend", jax.default_backend(), jax.devices(), flush=True)
    args = argparse.Namespace(repeats=5, quick=False, loop_repeats=1, gtol=None, max_steps=None)
    with open(f"{out}/tpu_lanes.jsonl", "w") as log:
        for problem in ("quad", "rosen"):
            for size in SIZES:
                plan = Plan(grid((problem,), (size,), METHODS, "float32"), loop_rows=32,
                            jaxopt_work=2**20)  # fmt: skip
                for record in run_plan(plan, args):
                    print(json.dumps(record, default=str), flush=True)
                    log.write(json.dumps(record, default=str) + "\n")
                    log.flush()


if __name__ == "__main__":
    main(sys.argv[1])
