"""Study (issue 61 item 1): what ``keep_fixed(adam)`` adds to adam's memory traffic, with
the fixed mask as a bool select (now) and as integer bit operations (before).
``python -m benchmarks.keep_fixed_study [log2 entries] [repeats]``: bytes an entry a step
by XLA's cost analysis of one donated step, and process CPU time of 20 steps in a
``fori_loop`` and of 10 donated steps, interleaved, medians, as ratios to plain adam."""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
import fixedopt._fixing.keep_fixed as wrapper
from benchmarks.tpu_peers import adam_run, adam_step, bytes_per_entry


def bit_select(mask, constant, x):
    """The former select: the mask widened to uint32, AND/OR on the bit patterns."""
    keep = jnp.asarray(mask).astype(jnp.uint32) - jnp.uint32(1)
    pattern = jnp.asarray(np.asarray(constant, x.dtype).view(np.uint32))
    raw = jax.lax.bitcast_convert_type(x, jnp.uint32)
    return jax.lax.bitcast_convert_type((raw & keep) | (pattern & ~keep), x.dtype)


def programs(x, target, fixed):
    """Per variant: a loop program, a donated step program, bytes an entry a step."""
    found, select = {}, wrapper._select_constant
    for name in ("adam", "select", "bit"):
        wrapper._select_constant = bit_select if name == "bit" else select
        opt = optax.adam(1e-2) if name == "adam" else fixedopt.keep_fixed(optax.adam(1e-2), fixed)
        loop = adam_run(opt, 20).lower(x, target).compile()
        step = jax.jit(adam_step(opt), donate_argnums=(0, 2))
        step = step.lower(x, target, opt.init(x)).compile()
        found[name] = (opt, loop, step, bytes_per_entry(opt, x, target))
    wrapper._select_constant = select
    return found


def main(log2: int = 22, repeats: int = 7) -> None:
    rng = np.random.default_rng(0)
    x, target = (jnp.asarray(rng.normal(size=1 << log2), jnp.float32) for _ in range(2))
    fixed = jnp.asarray(rng.random(1 << log2) < 0.3)
    found = programs(x, target, fixed)
    loop_s, step_s = {k: [] for k in found}, {k: [] for k in found}
    for _ in range(repeats):
        for name, (opt, loop, step, _) in found.items():
            start = time.process_time()
            jax.block_until_ready(loop(x, target))
            loop_s[name].append(time.process_time() - start)
            params, state = jnp.array(x), opt.init(x)
            start = time.process_time()
            for _ in range(10):
                params, state = step(params, target, state)
            jax.block_until_ready(params)
            step_s[name].append(time.process_time() - start)
    print(f"2^{log2} float32 entries, 30% fixed, {repeats} interleaved rounds")
    print("| variant | bytes/entry/step | loop time / adam | donated step / adam |")
    print("|---|---:|---:|---:|")
    for name, (*_, nbytes) in found.items():
        loop = np.median(loop_s[name]) / np.median(loop_s["adam"])
        step = np.median(step_s[name]) / np.median(step_s["adam"])
        print(f"| {name} | {nbytes:.0f} | {loop:.3f} | {step:.3f} |")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
