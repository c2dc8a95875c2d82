"""A/B of the covariance compiled from the call's start, in one tree: ``python
investigations/2026-12-06-first-call-h4b/early_ab.py [CASE] [REPEATS]`` runs, in turn,
fresh processes with ``solver_covariance.EARLY`` on and off (a new model's first call,
then a new process from the cache it left) and prints per side the medians of the wall
waits (quiet machine only) and of process CPU. ``--child CASE ROLE on|off``: one."""

import json
import os
import statistics
import subprocess
import sys
import tempfile


def child(case: str, role: str, side: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    from benchmarks import first_call
    from fixedopt._results import solver_covariance

    solver_covariance.EARLY = side == "on"
    record = first_call.child(case, role, quick=False, first_only=True)
    print(json.dumps(record))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        return child(*sys.argv[2:5])
    case = sys.argv[1] if len(sys.argv) > 1 else "spectra_slow"
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    found = {"on": [], "off": []}
    for _ in range(repeats):
        for side in ("on", "off"):
            with tempfile.TemporaryDirectory() as cache:
                env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
                env |= {"FIXEDOPT_CACHE": cache, "PYTHONPATH": os.getcwd()}
                runs = []
                for role in ("new", "again"):
                    done = subprocess.run([sys.executable, __file__, "--child", case, role, side],
                                          env=env, capture_output=True, text=True, check=True)
                    runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
                found[side].append(runs[0] | runs[1])
    for side, runs in found.items():
        keys = ("new_model_s", "new_model_cpu_s", "new_process_s", "new_process_cpu_s")
        print(side, {k: round(statistics.median(r[k] for r in runs), 3) for k in keys},
              {k: [round(r[k], 2) for r in runs] for k in keys})


if __name__ == "__main__":
    main()
