"""What issue 40's quad n = 64 target (a first call of ``minimize`` within 1.5 s of its
compiled call) leaves room for: a bare batched L-BFGS in plain ``jax.numpy`` (fixed
entries masked out of the gradient, Armijo backtracking, the two-loop recursion over
10 pairs, ``vmap`` over the rows; no bounds, statuses, lanes, certification or
derivative rule), fixedopt's ``minimize`` without its certification (``LBFGS`` with
``Solver.certify``, the contract's no-check, through the public API), and fixedopt's
``minimize``: each a first call in a fresh process (its wait beyond the compiled call,
split into trace, lowering and XLA) on ``benchmarks.first_call``'s quad n = 64 case.

    PYTHONPATH=. python studies/2026-12-06-quad64_floor/floor.py [--rounds 3] [--out FILE]
"""

import argparse
import dataclasses
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
PROGRAMS = ("bare", "uncertified", "fixedopt")
MEMORY, MAX_STEPS, GTOL = 10, 500, 1e-5


def bare_lbfgs(objective, x0, free):
    """One row: L-BFGS with Armijo backtracking on ``objective`` over the ``free`` entries."""
    import jax
    import jax.numpy as jnp

    def value_and_grad(x):
        value, grad = jax.value_and_grad(objective)(x)
        return value, jnp.where(free, grad, 0.0)

    def direction(grad, s, y, rho, newest):
        def backward(i, carry):
            q, alphas = carry
            k = (newest - i) % MEMORY
            alpha = rho[k] * jnp.dot(s[k], q)
            return q - alpha * y[k], alphas.at[k].set(alpha)

        q, alphas = jax.lax.fori_loop(0, MEMORY, backward, (grad, jnp.zeros(MEMORY)))
        k = newest % MEMORY
        yy = jnp.dot(y[k], y[k])
        r = q * jnp.where(yy > 0, jnp.dot(s[k], y[k]) / jnp.where(yy > 0, yy, 1.0), 1e-3)

        def forward(i, r):
            k = (newest + 1 + i) % MEMORY
            return r + s[k] * (alphas[k] - rho[k] * jnp.dot(y[k], r))

        return -jax.lax.fori_loop(0, MEMORY, forward, r)

    def search(x, value, grad, d):
        slope = jnp.dot(grad, d)

        def short(carry):
            t, trial_value = carry
            return (trial_value > value + 1e-4 * t * slope) & (t > 1e-10)

        def halve(carry):
            t = carry[0] / 2
            return t, objective(x + t * d)

        t, _ = jax.lax.while_loop(short, halve, (1.0, objective(x + d)))
        return x + t * d

    def step(carry):
        x, value, grad, s, y, rho, k = carry
        d = direction(grad, s, y, rho, k - 1)
        x_new = search(x, value, grad, d)
        value_new, grad_new = value_and_grad(x_new)
        ds, dy = x_new - x, grad_new - grad
        sy = jnp.dot(ds, dy)
        slot = k % MEMORY
        s, y = s.at[slot].set(ds), y.at[slot].set(dy)
        rho = rho.at[slot].set(jnp.where(sy > 0, 1.0 / jnp.where(sy > 0, sy, 1.0), 0.0))
        return x_new, value_new, grad_new, s, y, rho, k + 1

    def going(carry):
        return (jnp.max(jnp.abs(carry[2])) > GTOL) & (carry[6] < MAX_STEPS)

    value, grad = value_and_grad(x0)
    pairs = jnp.zeros((MEMORY, x0.shape[0]))
    start = (x0, value, grad, pairs, pairs, jnp.zeros(MEMORY), jnp.zeros((), jnp.int32))
    return jax.lax.while_loop(going, step, start)[0]


def child(program: str) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    import fixedopt
    from benchmarks.first_call import BATCHES
    from benchmarks.timing import compile_monitor
    from fixedopt.testing_problems import quad_jax

    batch = BATCHES["quad64"][0]
    rng = np.random.default_rng(0)  # the first_call case's rows
    diag, off = rng.uniform(2.0, 4.0, (batch, 64)), rng.uniform(-0.9, 0.9, (batch, 63))
    b, x0 = rng.normal(size=(batch, 64)), rng.normal(size=(batch, 64))
    fixed = rng.random((batch, 64)) < 0.3
    if program == "bare":

        def one(x0, fixed, diag, off, b):
            return bare_lbfgs(lambda x: quad_jax(x, diag, off, b), x0, ~fixed)

        solve = jax.jit(jax.vmap(one))
        inputs = tuple(map(jnp.asarray, (x0, fixed, diag, off, b)))
        call = lambda: solve(*inputs)
    else:

        @dataclasses.dataclass(frozen=True)
        class Uncertified(fixedopt.LBFGS):
            certify = fixedopt.Solver.certify

        solver = Uncertified() if program == "uncertified" else fixedopt.LBFGS()
        call = lambda: fixedopt.minimize(quad_jax, x0, fixed, args=(diag, off, b), batched=True,
                                         solver=solver)  # fmt: skip
    with compile_monitor() as found:
        start = time.perf_counter()
        jax.block_until_ready(call())
        first = time.perf_counter() - start
    times = []
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    compiled = statistics.median(times)
    result = call()
    x = result if program == "bare" else result.x
    grads = jax.vmap(jax.grad(quad_jax))(x, diag, off, b)
    worst = float(jnp.max(jnp.abs(jnp.where(fixed, 0.0, grads))))
    return {"wait_s": first - compiled, "compiled_s": compiled, "worst_free_grad": worst, **found}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    env = dict(os.environ, FIXEDOPT_CACHE="off")
    runs: dict[str, list[dict]] = {program: [] for program in PROGRAMS}
    for _ in range(args.rounds):  # alternated, fresh processes
        for program in PROGRAMS:
            command = [sys.executable, str(HERE), "--child", program]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            runs[program].append(json.loads(done.stdout.strip().splitlines()[-1]))
    medians = {p: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for p, rs in runs.items()}
    print(json.dumps(medians, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"medians": medians, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
