"""Does the fixed mask cost a pass over memory? ``keep_fixed(adam)`` vs ``adam`` and
``fix(fun)`` vs ``fun``, timed side by side, with the compiled programs' fusion counts.

The masked program should be the plain one with a ``where`` fused into each pass: the
same number of array-sized fusions, and the mask read as ``pred`` (1 byte), never
widened. Times are interleaved (A B A B ...), medians of ``--repeats`` calls, each
call blocked until ready; compilation happens before timing.

Run: ``python -m benchmarks.fusion [--log2-size 24] [--repeats 21]``; writes
``benchmarks/results/<backend>-fusion-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks.timing import environment, interleaved, save_results, summary


def adam_steps(size: int):
    """Plain and masked Adam steps (update + apply), params and state donated."""
    adam = optax.adam(1e-3)

    def plain(params, state, grad):
        updates, state = adam.update(grad, state, params)
        return optax.apply_updates(params, updates), state

    def masked(params, state, grad, fixed):
        updates, state = fixedopt.keep_fixed(adam, fixed).update(grad, state, params)
        return optax.apply_updates(params, updates), state

    rng = np.random.default_rng(0)
    params = jnp.asarray(rng.normal(size=size), jnp.float32)
    grad = jnp.asarray(rng.normal(size=size), jnp.float32)
    fixed = jnp.asarray(rng.random(size) < 0.3)
    masked_init = fixedopt.keep_fixed(adam, fixed).init
    inputs = {
        "plain": (plain, lambda: (params + 0, adam.init(params), grad)),
        "masked": (masked, lambda: (params + 0, masked_init(params), grad, fixed)),
    }
    return inputs, (0, 1)


def objective_steps(size: int, n: int = 64):
    """Value and gradient of a batched quartic, unmasked and through ``fixedopt.fix``."""

    def fun(x):
        return jnp.sum(x**2 + 0.1 * x**4)

    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(size // n, n)), jnp.float32)
    fixed = jnp.asarray(rng.random(x.shape) < 0.3)
    values = jnp.asarray(rng.normal(size=x.shape), jnp.float32)
    plain = jax.value_and_grad(fun)

    def masked(x, fixed, values):
        return jax.value_and_grad(fixedopt.fix(fun, fixed, values))(x)

    return {"plain": (plain, lambda: (x,)), "masked": (masked, lambda: (x, fixed, values))}, ()


def materialized(hlo: str, size: int) -> list[str]:
    """Types of the arrays of ``size`` elements or more that the compiled program writes
    to memory: results of its entry computation's instructions other than parameters
    and tuples. Each is one pass over memory; a mask widened to a float and stored, or
    a second masking pass, would add one."""
    entry = hlo[hlo.index("\nENTRY") :].splitlines()[1:]
    found = []
    for line in entry:
        match = re.match(r"\s*(?:ROOT )?%\S+ = ([a-z]+[0-9]*)\[([0-9,]*)\]\S* (\S+?)\(", line)
        if not match or match.group(3) in ("parameter", "tuple"):
            continue
        dims = [int(d) for d in match.group(2).split(",") if d]
        if int(np.prod(dims)) >= size:
            found.append(f"{match.group(1)}:{match.group(3)}")
    return sorted(found)


def measure(name: str, cases, donate, size: int, repeats: int) -> dict:
    compiled, fresh = {}, {}
    for key, (fun, make_inputs) in cases.items():
        args = make_inputs()
        compiled[key] = jax.jit(fun, donate_argnums=donate).lower(*args).compile()
        fresh[key] = make_inputs
    state = {key: fresh[key]() for key in cases}

    def call(key):
        def run():
            out = jax.block_until_ready(compiled[key](*state[key]))
            if donate:  # feed the donated outputs back in, as a training loop does
                state[key] = (*out, *state[key][len(donate) :])
            return out

        return run

    times, _ = interleaved({key: call(key) for key in cases}, dict.fromkeys(cases, repeats))
    ratios = sorted(m / p for m, p in zip(times["masked"], times["plain"]))
    hlo = {key: c.as_text() for key, c in compiled.items()}
    return {
        "case": name,
        "elements": size,
        "ratio_median": float(np.median(ratios)),
        "ratio_of_medians": summary(times["masked"])["time_median_s"]
        / summary(times["plain"])["time_median_s"],
        **{f"{key}_{k}": v for key in cases for k, v in summary(times[key]).items()},
        **{f"{key}_materialized": materialized(hlo[key], size) for key in cases},
    }


def markdown(rows: list[dict], env: dict) -> str:
    lines = [
        f"Fusion micro-benchmark, {env['backend']} ({env['device']}), {env['date']}.",
        "",
        "| case | elements | masked / plain (median of paired ratios) | plain (ms) | "
        "masked (ms) | arrays written, plain | arrays written, masked |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['elements']} | {r['ratio_median']:.3f}x | "
            f"{1e3 * r['plain_time_median_s']:.2f} | {1e3 * r['masked_time_median_s']:.2f} | "
            f"{', '.join(r['plain_materialized'])} | {', '.join(r['masked_materialized'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2-size", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=21)
    options = parser.parse_args(argv)
    size = 1 << options.log2_size
    rows = [
        measure("keep_fixed(adam) step, donated", *adam_steps(size), size, options.repeats),
        measure("fix(fun) value+grad, (B, 64)", *objective_steps(size), size, options.repeats),
    ]
    env = environment()
    save_results(f"{env['backend']}-fusion-{env['date']}", {"environment": env, "rows": rows},
                 markdown(rows, env))  # fmt: skip


if __name__ == "__main__":
    main()
