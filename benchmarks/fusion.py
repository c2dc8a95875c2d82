"""The fusion suite: does the fixed mask cost a pass over memory? Masked vs plain Adam
steps and objectives, timed side by side, with the arrays each compiled program writes."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks.timing import interleaved, summary


def adam_steps(size: int):
    """Adam steps on ``size`` float32 entries, donated: ``plain``, ``masked``, ``reference``."""
    adam = optax.adam(1e-3)

    def plain(params, state, grad):
        updates, state = adam.update(grad, state, params)
        return optax.apply_updates(params, updates), state

    def masked(params, state, grad, fixed):
        updates, state = fixedopt.keep_fixed(adam, fixed).update(grad, state, params)
        return optax.apply_updates(params, updates), state

    def reference(params, state, grad):
        scaled = lambda a: a * jnp.float32(0.999) + grad
        moments = state[0]._replace(mu=scaled(state[0].mu), nu=scaled(state[0].nu))
        return scaled(params), (moments, *state[1:])

    rng = np.random.default_rng(0)
    params = jnp.asarray(rng.normal(size=size), jnp.float32)
    grad = jnp.asarray(rng.normal(size=size), jnp.float32)
    fixed = jnp.asarray(rng.random(size) < 0.3)
    masked_init = fixedopt.keep_fixed(adam, fixed).init
    programs = {
        "plain": (plain, lambda: (params + 0, adam.init(params), grad)),
        "masked": (masked, lambda: (params + 0, masked_init(params), grad, fixed)),
        "reference": (reference, lambda: (params + 0, adam.init(params), grad)),
    }
    return programs, (0, 1)


def objective_steps(size: int, n: int = 64):
    """Value and gradient of a batched quartic, unmasked and through ``fixedopt.fix``."""
    fun = lambda x: jnp.sum(x**2 + 0.1 * x**4)
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(size // n, n)), jnp.float32)
    fixed = jnp.asarray(rng.random(x.shape) < 0.3)
    values = jnp.asarray(rng.normal(size=x.shape), jnp.float32)
    masked = lambda x, fixed, values: jax.value_and_grad(fixedopt.fix(fun, fixed, values))(x)
    return {"plain": (jax.value_and_grad(fun), lambda: (x,)),
            "masked": (masked, lambda: (x, fixed, values))}, ()  # fmt: skip


def materialized(hlo: str, size: int) -> list[str]:
    """Types of the arrays of ``size`` entries or more the program writes (a pass each)."""
    found = []
    for line in hlo[hlo.index("\nENTRY") :].splitlines()[1:]:
        match = re.match(r"\s*(?:ROOT )?%\S+ = ([a-z]+[0-9]*)\[([0-9,]*)\]\S* (\S+?)\(", line)
        if not match or match.group(3) in ("parameter", "tuple"):
            continue
        if int(np.prod([int(d) for d in match.group(2).split(",") if d])) >= size:
            found.append(f"{match.group(1)}:{match.group(3)}")
    return sorted(found)


def stepper(compiled, make_inputs, donate, steps: int = 1):
    """A blocked call of ``steps`` steps feeding donated outputs back in (``.inputs``)."""
    inputs = list(make_inputs())

    def call():
        for _ in range(steps):
            out = compiled(*inputs)
            if donate:
                inputs[: len(donate)] = out
        return jax.block_until_ready(out)

    call.inputs = inputs
    return call


def measure(kind: str, programs, donate, size: int, repeats: int, steps: int = 1):
    """Per program: seconds per step and arrays written; paired ratios masked / plain."""
    compiled = {key: jax.jit(fun, donate_argnums=donate).lower(*make()).compile()
                for key, (fun, make) in programs.items()}  # fmt: skip
    calls = {key: stepper(c, programs[key][1], donate, steps) for key, c in compiled.items()}
    for call in calls.values():
        call()
    times, _ = interleaved(calls, repeats)
    ratios = [m / p for m, p in zip(times["masked"], times["plain"])]
    record = {"kind": kind, "elements": size, "steps_per_call": steps,
              "ratio_median": float(np.median(ratios))}  # fmt: skip
    for key, program in compiled.items():
        record |= {f"{key}_step_{k}": v / steps for k, v in summary(times[key]).items()}
        record[f"{key}_materialized"] = materialized(program.as_text(), size)
    return record, calls


def run(quick: bool, args=None) -> list[dict]:
    """The fusion suite: 2^24 entries, 21 repeats (quick: 2^14, 3)."""
    size, repeats = (1 << 14, 3) if quick else (1 << 24, 21)
    cases = {"keep_fixed(adam) step, donated": adam_steps(size),
             "fix(fun) value+grad, (B, 64)": objective_steps(size)}  # fmt: skip
    return [
        {"case": name} | measure("fusion", *case, size, repeats)[0] for name, case in cases.items()
    ]
