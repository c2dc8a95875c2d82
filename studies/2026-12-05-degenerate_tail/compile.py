"""The first call of the clean batch's ``curve_fit`` in this (fresh) process: its wall
time and the compile seconds within it (``benchmarks.timing.first_call``), with no
persistent compilation cache.

    JAX_ENABLE_COMPILATION_CACHE=false PYTHONPATH=. python \
        studies/2026-12-05-degenerate_tail/compile.py [--dtype float32]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import tail

from benchmarks import timing


def main() -> None:
    """Parse the options, measure, print."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    args = parser.parse_args()
    data = tail.inputs(None, np.dtype(args.dtype))
    print(json.dumps(timing.first_call(lambda: jax.block_until_ready(tail.fit(*data)))))


if __name__ == "__main__":
    main()
