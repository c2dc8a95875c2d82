"""Compile CPU time of spectra_slow's covariance program (solver_covariance._rows) under
XLA option variants, and whether its outputs keep their bits (cov_capture.py's file):
``python cov_compile.py FILE [REPEATS]``."""

import pickle
import statistics
import sys
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)
from fixedopt._numerics import cpu_compiler  # noqa: E402
from fixedopt._results import solver_covariance  # noqa: E402

BASE = cpu_compiler.ROW_WISE_OPTIONS
VARIANTS = {
    "base": BASE,
    "opt1": BASE | {"xla_backend_optimization_level": 1},
    "opt0": BASE | {"xla_backend_optimization_level": 0},
    "noexp": BASE | {"xla_llvm_disable_expensive_passes": True},
    "split1": BASE | {"xla_cpu_parallel_codegen_split_count": 1},
    "split4": BASE | {"xla_cpu_parallel_codegen_split_count": 4},
    "emitters": BASE | {"xla_cpu_use_fusion_emitters": True},
}


def main() -> None:
    captured = pickle.load(open(sys.argv[1], "rb"))
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    names = sys.argv[3:] or list(VARIANTS)
    rule, rows, _ = captured[0]
    times = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            jitted = jax.jit(solver_covariance._rows, static_argnums=(0,),
                             compiler_options=VARIANTS[name])  # fmt: skip
            lowered = jitted.lower(rule, *rows)
            start = time.process_time()
            compiled = lowered.compile()
            times[name].append(time.process_time() - start)
            same = all(
                all(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
                    for a, b in zip(jax.tree.leaves(compiled(*r)), jax.tree.leaves(o)))
                for rl, r, o in captured)  # fmt: skip
            times[name + " same"] = same
    for name in names:
        print(f"{name}: compile CPU {statistics.median(times[name]):.3f} s "
              f"({' '.join(f'{t:.2f}' for t in times[name])}), bits same: {times[name + ' same']}")


if __name__ == "__main__":
    main()
