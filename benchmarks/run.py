"""``python -m benchmarks.run --suite NAME [--quick] [--out DIR]``: run a suite (cpu, gpu, scale,
status_truth, ase, curve_fit, tiny, tiny_large, deblur, tpu_peers; ``auto``, the
default: cpu or gpu by backend), write ``<out>/<backend>-<suite>[-quick][-<tag>]-<date>``
``.{json,md}`` and plots."""

import os

# One BLAS thread for the per-row NumPy loops: OpenBLAS's pool made them 50x slower.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # before any array exists: float64 available

from benchmarks import (  # noqa: E402
    ase,
    curve_fit,
    deblur,
    report,
    status_truth,
    tiny,
    tpu_peers,
)
from benchmarks.suites import PLANS, run_plan  # noqa: E402
from benchmarks.timing import environment  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
OWN = {"status_truth": status_truth.run, "ase": ase.run, "curve_fit": curve_fit.run,
       "deblur": deblur.run, "tiny": tiny.run, "tiny_large": tiny.run_large,
       "tpu_peers": tpu_peers.run}  # fmt: skip


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--suite", choices=[*PLANS, *OWN, "auto"], default="auto")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS, help="results folder")
    parser.add_argument("--repeats", type=int, default=7, help="most timed calls (compiled)")
    parser.add_argument("--least-repeats", type=int, default=3,
                        help="fewest timed calls (compiled; fewer past ~3 s of work; "
                             "0: a call past 15 s is timed by its first call alone)")  # fmt: skip
    parser.add_argument("--loop-repeats", type=int, default=3, help="timed calls (loops)")
    parser.add_argument("--gtol", type=float, help="float64 tolerance (default 1e-6; f32: 1e-3)")
    parser.add_argument("--max-steps", type=int, help="default: 5000")
    parser.add_argument(
        "--tag", default="", help="a label in the files' names (a share of a suite)"
    )
    return parser.parse_args(argv)


def main(argv=None) -> pathlib.Path:
    """Run one suite; write its files; return their common stem."""
    args = parse(argv)
    name = args.suite
    if name == "auto":
        name = "cpu" if jax.default_backend() == "cpu" else "gpu"
    env = environment() | {"suite": name, "quick": args.quick}
    start = time.perf_counter()
    if name in PLANS:
        records = run_plan(PLANS[name][args.quick], args)
    else:
        records = OWN[name](args.quick, args)
    env["suite_wall_s"] = time.perf_counter() - start
    records = [env | r for r in records]
    label = "".join(f"-{x}" for x in ("quick" * args.quick, args.tag) if x)
    stem = args.out / f"{env['backend']}-{name}{label}-{env['date']}"
    args.out.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(records, indent=1, default=str) + "\n")
    stem.with_suffix(".md").write_text(report.markdown(records, title=stem.name))
    written = report.save_plots(records, stem)
    print(f"wrote {stem}.json, .md and {len(written)} plots in {env['suite_wall_s']:.0f} s",
          file=sys.stderr)  # fmt: skip
    return stem


if __name__ == "__main__":
    main()
