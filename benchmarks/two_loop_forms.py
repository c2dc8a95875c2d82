"""``python -m benchmarks.two_loop_forms [--rounds R]``: what L-BFGS's direction ``-H g``
costs a trip of the lanes at small n, and whether another form of the recursion is
cheaper on XLA:CPU.

Each form runs 1000 times in one jitted ``fori_loop`` over a lane batch (W rows of n,
memory 10, the newest pair's slot moving as in a solve), medians of interleaved rounds:

- ``rolled``: fixedopt's ``two_loop`` (two ``fori_loop``s over the memory);
- ``rolled-unroll2``: the same with ``fori_loop(..., unroll=2)``;
- ``gram``: the compact form computed from the pairs at each call (Byrd, Nocedal and
  Schnabel 1994, as the two-loop's coefficients): the Gram matrices ``S Y^T`` and
  ``Y H0 Y^T`` as explicit sums over n (no reduce op, no YNN), then the two loops'
  coefficients as unrolled arithmetic on per-row scalars, then one pass over S and Y;
- ``gram-matrices``: the two Gram matrices alone (the least a from-scratch compact
  form must do).

Each form's ``H g`` is compared with the rolled recursion's (largest difference relative
to its largest entry, every slot of the newest pair, one pair skipped).

Then the solve it is part of: ``minimize`` (defaults) on quad B = 1024, n = 8 through
the default lanes, its median time and its trips (one progress line a trip), for the
recursion's share of a trip. Writes ``benchmarks/results/<backend>-two-loop-forms-<date>.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import pathlib
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks.problems import quad  # noqa: E402
from benchmarks.timing import environment, interleaved  # noqa: E402
from fixedopt._solvers import lbfgs  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
MEMORY, CALLS = 10, 1000
SIZES = ((128, 8), (128, 16))  # (lanes, n): quad n = 8's default lanes are 128


def rolled(unroll: int = 1):
    """fixedopt's recursion, its ``fori_loop``s unrolled ``unroll`` times."""

    def direction(grad, s_history, y_history, rho, newest, gamma):
        plain = jax.lax.fori_loop
        jax.lax.fori_loop = lambda *args, **kwargs: plain(*args, unroll=unroll)
        try:
            return lbfgs.two_loop_by_slots(grad, s_history, y_history, rho, newest, gamma)
        finally:
            jax.lax.fori_loop = plain

    return direction


def _sum_last(products: jax.Array) -> jax.Array:
    """The sum over the last axis as explicit additions (no reduce op)."""
    total = products[..., 0]
    for i in range(1, products.shape[-1]):
        total = total + products[..., i]
    return total


def _newest_first(history: jax.Array, newest: jax.Array) -> jax.Array:
    ages = jnp.arange(history.shape[0], dtype=newest.dtype)
    return jnp.take(history, (newest + history.shape[0] - ages) % history.shape[0], 0)


def _grams(s: jax.Array, y: jax.Array, gamma: jax.Array) -> tuple[jax.Array, jax.Array]:
    sy = _sum_last(s[:, None, :] * y[None, :, :])  # [j, k] = s_j . y_k
    yhy = _sum_last(y[:, None, :] * (gamma * y)[None, :, :])  # [j, k] = y_j . H0 y_k
    return sy, yhy


def gram(grad, s_history, y_history, rho, newest, gamma):
    """``H grad`` from the Gram matrices (ages: 0 the newest pair)."""
    s, y = _newest_first(s_history, newest), _newest_first(y_history, newest)
    rho = _newest_first(rho, newest)
    sy, yhy = _grams(s, y, gamma)
    a, b = _sum_last(s * grad), _sum_last(gamma * y * grad)
    alpha: list[jax.Array] = []
    for j in range(MEMORY):  # newest first: alpha_j = rho_j s_j . q_j
        alpha.append(rho[j] * (a[j] - sum((alpha[k] * sy[j, k] for k in range(j)), 0.0)))
    beta: list[jax.Array] = [jnp.zeros(())] * MEMORY
    for j in reversed(range(MEMORY)):  # oldest first: beta_j = rho_j y_j . r_j
        rest = sum(((alpha[k] - beta[k]) * sy[k, j] for k in range(j + 1, MEMORY)), 0.0)
        beta[j] = rho[j] * (b[j] - sum(alpha[k] * yhy[j, k] for k in range(MEMORY)) + rest)
    alphas, betas = jnp.stack(alpha), jnp.stack(beta)
    return gamma * (grad - _sum_last(alphas * y.T)) + _sum_last((alphas - betas) * s.T)


def gram_matrices(grad, s_history, y_history, rho, newest, gamma):
    sy, yhy = _grams(s_history, y_history, gamma)
    return grad + 1e-30 * (_sum_last(sy) + _sum_last(yhy))[:1]


FORMS = {"rolled": rolled(), "rolled-unroll2": rolled(2), "gram": gram,
         "gram-matrices": gram_matrices}  # fmt: skip


def _pairs(width: int, n: int) -> tuple[jax.Array, ...]:
    """Random curvature pairs (one skipped: ``rho = 0``), their scale and a gradient."""
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    s = jax.random.normal(keys[0], (width, MEMORY, n))
    y = s + 0.3 * jax.random.normal(keys[1], (width, MEMORY, n))
    rho = (1.0 / jnp.sum(s * y, -1)).at[:, 3].set(0.0)
    return s, y, rho, jnp.full((width,), 0.7), jax.random.normal(keys[2], (width, n))


def agreement(form, width: int, n: int) -> float:
    """The largest difference of ``form``'s ``H g`` from the rolled recursion's, relative
    to its largest entry, over every slot of the newest pair."""
    s, y, rho, gamma, grad = _pairs(width, n)
    worst = 0.0
    for newest in jnp.arange(MEMORY, dtype=jnp.int32):
        inputs = (grad, s, y, rho, newest, gamma)
        reference = jax.vmap(FORMS["rolled"], in_axes=(0, 0, 0, 0, None, 0))(*inputs)
        other = jax.vmap(form, in_axes=(0, 0, 0, 0, None, 0))(*inputs)
        worst = max(worst, float(jnp.max(jnp.abs(other - reference) / jnp.max(jnp.abs(reference)))))
    return worst


def _calls(form, width: int, n: int):
    """A jitted loop of ``CALLS`` calls of ``form`` on random pairs, and its input."""
    s, y, rho, gamma, grad = _pairs(width, n)
    batched = jax.vmap(form, in_axes=(0, 0, 0, 0, None, 0))

    @jax.jit
    def loop(g):
        step = lambda i, g: 0.5 * g + 0.01 * batched(g, s, y, rho, i % MEMORY, gamma)
        return jax.lax.fori_loop(0, CALLS, step, g)

    return loop, grad


def direction_costs(rounds: int) -> list[dict]:
    rows = []
    for width, n in SIZES:
        loops = {name: _calls(form, width, n) for name, form in FORMS.items()}
        compile_s = {}
        for name, (loop, grad) in loops.items():
            tic = time.perf_counter()
            loop(grad).block_until_ready()
            compile_s[name] = time.perf_counter() - tic
        calls = {name: (lambda f=loop, g=grad: f(g).block_until_ready())
                 for name, (loop, grad) in loops.items()}  # fmt: skip
        times, _ = interleaved(calls, rounds)
        for name in loops:
            agrees = "" if name == "gram-matrices" else f"{agreement(FORMS[name], width, n):.0e}"
            rows.append({"lanes": width, "n": n, "form": name, "agrees": agrees,
                         "us": statistics.median(times[name]) / CALLS * 1e6,
                         "first_call_s": compile_s[name]})  # fmt: skip
    return rows


def solve_trip(rounds: int) -> dict:
    """quad B = 1024, n = 8, ``minimize`` defaults, default lanes: median seconds, trips."""
    problem = quad(1024, 8)
    x0, fixed, args = jnp.asarray(problem.x0), jnp.asarray(problem.fixed), problem.args
    solve = jax.jit(lambda x0, fixed, *args: fixedopt.minimize(
        problem.jax_fun, x0, fixed, args=args, batched=True).x)  # fmt: skip
    call = lambda: solve(x0, fixed, *args).block_until_ready()
    call()
    samples = interleaved({"solve": call}, rounds)[0]["solve"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fixedopt.minimize(problem.jax_fun, x0, fixed, args=args, batched=True, progress=1)
        jax.effects_barrier()
    trips = sum(1 for line in printed.getvalue().splitlines() if line.strip())
    return {"solve_ms": statistics.median(samples) * 1e3, "trips": trips}


def markdown(rows: list[dict], solve: dict, stem: str, env: dict) -> str:
    trip_us = solve["solve_ms"] * 1e3 / solve["trips"]
    lines = [f"# {stem}", "", *__doc__.split("\n\n")[1:3], "",
             f"Backend {env['backend']} ({env['host_cpus']} CPUs), jax {env['versions']['jax']}; "
             "`python -m benchmarks.two_loop_forms`.", "",
             "| lanes | n | form | us per call | share of a trip (n = 8) | first call s "
             "| H g against the rolled recursion's |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        share = f"{row['us'] / trip_us:.0%}" if row["n"] == 8 else ""
        lines.append(f"| {row['lanes']} | {row['n']} | {row['form']} | {row['us']:.1f} | "
                     f"{share} | {row['first_call_s']:.2f} | {row['agrees']} |")  # fmt: skip
    lines += ["", f"The solve: quad B = 1024, n = 8, `minimize` defaults: {solve['solve_ms']:.2f} "
              f"ms in {solve['trips']} trips, {trip_us:.0f} us a trip.", ""]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.two_loop_forms")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args()
    env = environment()
    rows, solve = direction_costs(args.rounds), solve_trip(args.rounds)
    stem = args.out / f"{env['backend']}-two-loop-forms-{env['date']}"
    args.out.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".md").write_text(markdown(rows, solve, stem.name, env))
    print(stem.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
