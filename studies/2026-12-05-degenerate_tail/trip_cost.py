"""The cost of one trip of the spectra fit against the number of lanes: ``W`` copies of
the ``far_apart`` row (1,000 steps each, ``MAX_STEPS``) solved with ``lanes=W`` (every
row in its own lane, no refill), seconds / 1,000, median of interleaved repeats.

    PYTHONPATH=. python studies/2026-12-05-degenerate_tail/trip_cost.py [--dtype float32]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import tail

from benchmarks import timing

WIDTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def main() -> None:
    """Parse the options, measure, print."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    y, p0 = (a.astype(args.dtype) for a in tail.degenerate("far_apart"))
    calls = {}
    for width in WIDTHS:
        data = (np.repeat(y[None], width, 0), np.repeat(p0[None], width, 0),
                np.zeros((width, 8), bool))  # fmt: skip
        calls[width] = lambda d=data, w=width: jax.block_until_ready(tail.fit(*d, lanes=w))
    steps = {w: int(np.asarray(call().steps).max()) for w, call in calls.items()}  # compile
    times, _ = timing.interleaved(calls, args.repeats)
    print(f"{args.dtype}: lanes | steps | us per trip | us per trip and lane")
    for width in WIDTHS:
        trip = statistics.median(times[width]) / steps[width] * 1e6
        print(f"| {width} | {steps[width]} | {trip:.1f} | {trip / width:.2f} |")


if __name__ == "__main__":
    main()
