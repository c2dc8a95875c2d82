"""The least a JAX program can wait on issue 44's spectra: a bare batched
Levenberg-Marquardt (no fixed entries, bounds, ties, statuses, lanes or covariance; a
fixed number of damped Gauss-Newton steps, ``vmap`` over the spectra) on the same
model, its first call (trace, lowering, XLA) and its compiled call, in fresh processes,
beside fixedopt.models' fit; against lmfit's loop, whose 50th is issue 44's budget.

    PYTHONPATH=. python studies/2026-12-05-lmfit_budget/floor.py [--rounds 3] [--out FILE]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve()
STEPS = 20  # damped steps of the bare solver: fewer than fixedopt's fits take (about 20-40)


def bare(data, start):
    """``STEPS`` Levenberg-Marquardt steps per spectrum (Marquardt's diagonal damping,
    halved on a decrease, doubled and the step refused on an increase)."""
    import jax
    import jax.numpy as jnp

    from benchmarks import models_vs_lmfit as spectra

    x = jnp.asarray(spectra.X)

    def residual(p, y):
        return spectra.plain(x, *p, 0.0) - y

    def one(p, y):
        def step(_, carry):
            p, damping = carry
            r, jacobian = residual(p, y), jax.jacfwd(residual)(p, y)
            normal = jacobian.T @ jacobian
            damped = normal + damping * jnp.diag(jnp.diag(normal))
            trial = p - jnp.linalg.solve(damped, jacobian.T @ r)
            better = jnp.sum(residual(trial, y) ** 2) < jnp.sum(r**2)
            return jnp.where(better, trial, p), jnp.where(better, damping / 2, damping * 2)

        return jax.lax.fori_loop(0, STEPS, step, (p, jnp.asarray(1e-3, p.dtype)))[0]

    solve = jax.jit(jax.vmap(one))
    return lambda: solve(jnp.asarray(start), jnp.asarray(data))


def child(which: str) -> dict:
    import jax

    from benchmarks import models_vs_lmfit as spectra
    from benchmarks.timing import compile_monitor

    truth, data, known, tied = spectra.spectra(2000)
    if which == "bare":
        call = bare(data, spectra.START * np.ones_like(truth))
    else:
        spectra.warm_up()  # the process's one-time costs, as the benchmark pays them
        call = spectra.models_call(truth, data, known, tied)
    with compile_monitor() as found:
        start = time.perf_counter()
        jax.block_until_ready(jax.tree.leaves(call()))
        first = time.perf_counter() - start
    times = []
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(jax.tree.leaves(call()))
        times.append(time.perf_counter() - start)
    return {"first_s": first, "compiled_s": statistics.median(times), **found}


def lmfit_per_fit(count: int = 50) -> float:
    from benchmarks import models_vs_lmfit as spectra

    inputs = spectra.spectra(count)
    start = time.perf_counter()
    spectra.lmfit_loop(*inputs, count)
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    records = []
    for repeat in range(args.rounds):
        for which in ("bare", "models"):
            done = subprocess.run([sys.executable, str(HERE), "--child", which], env=os.environ,
                                  capture_output=True, text=True, check=True)  # fmt: skip
            records.append({"which": which, "repeat": repeat,
                            **json.loads(done.stdout.strip().splitlines()[-1])})  # fmt: skip
            print(json.dumps(records[-1]), flush=True)
    per_fit = lmfit_per_fit()
    print(json.dumps({"lmfit_per_fit_s": per_fit, "lmfit_batch_s": 2000 * per_fit}))
    if args.out:
        out = {"records": records, "lmfit_per_fit_s": per_fit, "lmfit_batch_s": 2000 * per_fit}
        pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
