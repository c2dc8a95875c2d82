"""Micro-benchmarks: the cost of the mask itself, and of ``keep_fixed`` on a big vector.

* ``objective``: one batched objective + gradient, unmasked vs masked with
  :func:`fixedopt.fix` (target: masked <= 1.05x unmasked) vs index splitting (packed
  free entries scattered into the full vector inside the objective);
* ``keep_fixed``: one ``keep_fixed(optax.adam(1e-3))`` step vs one plain
  ``optax.adam(1e-3)`` step on a 2^24 float32 vector, buffers donated, both against an
  elementwise pass over the same buffers (same bytes read and written as Adam) in the
  same run: how close each gets to memory bandwidth;
* ``dispatch``: the public call vs the same solve under the caller's ``jax.jit``.

Every comparison is timed interleaved (A B C A B C ...), median of rounds.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks.base import device_inputs
from benchmarks.cases import PROBLEMS, SEED
from fixedopt._reparam import free_indices

MASK_TARGET = 1.05


def interleaved_medians(calls: dict, rounds: int, inner: int) -> dict[str, float]:
    """Median seconds per call of each ``calls[name]()`` (which blocks), interleaved.

    Each round times ``inner`` back-to-back calls of each name in turn.
    """
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()  # compile / warm up
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(inner):
                call()
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(times) for name, times in samples.items()}


# --- masked objective + gradient -----------------------------------------------------------


def objective_calls(problem) -> tuple[dict, int]:
    """Batched ``value_and_grad`` four ways, and the packed width of ``split``.

    ``masked``: :func:`fixedopt.fix` with the fixed values as a separate array (what the
    solvers evaluate); ``pinned``: ``where(fixed, stop_gradient(x), x)``, the same
    values and gradients wherever the fixed entries of ``x`` already hold their values
    (which the solvers' projection guarantees), without reading a values array.
    """
    fun, (x0, fixed, args) = problem.jax_fun, device_inputs(problem)
    index = jnp.asarray(free_indices(problem.fixed))
    n = problem.size

    def unmasked(x, *args):
        return jax.value_and_grad(fun)(x, *args)

    def masked(x, fixed, values, *args):
        return jax.value_and_grad(fixedopt.fix(fun, fixed, values))(x, *args)

    def pinned(x, fixed, *args):
        return jax.value_and_grad(
            lambda x: fun(jnp.where(fixed, jax.lax.stop_gradient(x), x), *args)
        )(x)

    def split(z, index, values, *args):
        def packed(z):
            padded = jnp.concatenate([values, jnp.zeros(1, values.dtype)])
            return fun(padded.at[index].set(z)[:n], *args)

        return jax.value_and_grad(packed)(z)

    z = jnp.take_along_axis(jnp.pad(x0, ((0, 0), (0, 1))), index, axis=1)
    compiled = {
        "unmasked": (jax.jit(jax.vmap(unmasked)), (x0, *args)),
        "masked": (jax.jit(jax.vmap(masked)), (x0, fixed, x0, *args)),
        "pinned": (jax.jit(jax.vmap(pinned)), (x0, fixed, *args)),
        "split": (jax.jit(jax.vmap(split)), (z, index, x0, *args)),
    }
    calls = {
        name: (lambda f=f, inputs=inputs: jax.block_until_ready(f(*inputs)))
        for name, (f, inputs) in compiled.items()
    }
    return calls, int(index.shape[1])


def objective_overhead(sizes, rounds: int) -> list[dict]:
    """Masked vs unmasked vs split objective + gradient on each problem and size."""
    records = []
    for name, batch, n in sizes:
        problem = PROBLEMS[name](batch, n, SEED)
        calls, width = objective_calls(problem)
        seconds = interleaved_medians(calls, rounds, inner=_inner(batch * n))
        records.append(
            {
                "micro": "objective",
                "problem": name,
                "B": batch,
                "n": n,
                "split_width": width,
                **{f"{k}_s": v for k, v in seconds.items()},
                "masked_vs_unmasked": seconds["masked"] / seconds["unmasked"],
                "pinned_vs_unmasked": seconds["pinned"] / seconds["unmasked"],
                "split_vs_unmasked": seconds["split"] / seconds["unmasked"],
                "target": MASK_TARGET,
            }
        )
        print(_line(records[-1]), flush=True)
    return records


def _inner(elements: int) -> int:
    return max(3, min(200, 2_000_000 // elements))


def _line(r: dict) -> str:
    return (
        f"objective {r['problem']:>6} B={r['B']:<6} n={r['n']:<4} unmasked "
        f"{1e3 * r['unmasked_s']:8.3f} ms  masked {r['masked_vs_unmasked']:.3f}x  "
        f"pinned {r['pinned_vs_unmasked']:.3f}x  "
        f"split(width {r['split_width']}) {r['split_vs_unmasked']:.3f}x"
    )


# --- keep_fixed(adam) vs adam vs bandwidth ---------------------------------------------------


def adam_steps(size: int, rounds: int, steps: int) -> dict:
    """Seconds per step: bandwidth reference, ``optax.adam``, ``keep_fixed(optax.adam)``.

    Parameters and optimizer state are donated and carried from step to step, as in a
    training loop; gradients and the mask are inputs. The reference reads the same
    four buffers and writes the same three (``p, mu, nu <- (p, mu, nu) * a + g``).
    """
    rng = np.random.default_rng(SEED)
    grads = jnp.asarray(rng.normal(size=size), jnp.float32)
    mask = jnp.asarray(rng.random(size) < 0.3)
    adam = optax.adam(1e-3)

    def plain(params, state, grads, mask):
        updates, state = adam.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    def kept(params, state, grads, mask):
        updates, state = fixedopt.keep_fixed(adam, mask).update(grads, state, params)
        return optax.apply_updates(params, updates), state

    def reference(params, state, grads, mask):
        moments = state[0]
        scaled = lambda a: a * jnp.float32(0.999) + grads
        inner = moments._replace(mu=scaled(moments.mu), nu=scaled(moments.nu))
        return scaled(params), (inner, *state[1:])

    params0 = jnp.asarray(rng.normal(size=size), jnp.float32)
    inits = {"reference": adam.init, "adam": adam.init}
    inits["keep_fixed"] = fixedopt.keep_fixed(adam, mask).init
    carries = {name: [params0 + 0.0, init(params0)] for name, init in inits.items()}
    steps_of = {"reference": reference, "adam": plain, "keep_fixed": kept}

    def stepper(name):
        step = jax.jit(steps_of[name], donate_argnums=(0, 1))

        def call():
            carry = carries[name]
            for _ in range(steps):
                carry[:] = step(carry[0], carry[1], grads, mask)
            jax.block_until_ready(carry[0])

        return call

    seconds = interleaved_medians({name: stepper(name) for name in steps_of}, rounds, 1)
    per_step = {name: s / steps for name, s in seconds.items()}
    moved = 7 * 4 * size  # bytes: 4 float32 buffers read, 3 written per step
    fixed = np.asarray(mask)
    exact = bool(
        np.array_equal(np.asarray(carries["keep_fixed"][0])[fixed], np.asarray(params0)[fixed])
    )
    record = {
        "micro": "keep_fixed",
        "size": size,
        "dtype": "float32",
        "steps_per_round": steps,
        **{f"{name}_step_s": s for name, s in per_step.items()},
        "reference_GBps": moved / per_step["reference"] / 1e9,
        "adam_vs_reference": per_step["adam"] / per_step["reference"],
        "keep_fixed_vs_reference": per_step["keep_fixed"] / per_step["reference"],
        "keep_fixed_vs_adam": per_step["keep_fixed"] / per_step["adam"],
        "fixed_bit_identical": exact,
    }
    print(
        f"keep_fixed 2^{size.bit_length() - 1} f32: reference {1e3 * per_step['reference']:.2f} ms"
        f" ({record['reference_GBps']:.1f} GB/s)  adam {record['adam_vs_reference']:.2f}x  "
        f"keep_fixed {record['keep_fixed_vs_reference']:.2f}x ref, "
        f"{record['keep_fixed_vs_adam']:.3f}x adam",
        flush=True,
    )
    return record


# --- the public call's own cost -----------------------------------------------------------


def dispatch(batch: int, n: int, rounds: int) -> dict:
    """The public call vs the same solve inside the caller's ``jit`` (Python overhead)."""
    problem = PROBLEMS["quad"](batch, n, SEED)
    x0, fixed, args = device_inputs(problem)

    def solve(x0, fixed, *args):
        return fixedopt.minimize(
            problem.jax_fun, x0, fixed, args=args, batched=True, max_steps=5000
        )

    jitted = jax.jit(solve)
    calls = {
        "public": lambda: jax.block_until_ready(solve(x0, fixed, *args)),
        "jitted": lambda: jax.block_until_ready(jitted(x0, fixed, *args)),
    }
    seconds = interleaved_medians(calls, rounds, inner=5)
    record = {
        "micro": "dispatch",
        "problem": "quad",
        "B": batch,
        "n": n,
        **{f"{k}_s": v for k, v in seconds.items()},
        "public_minus_jitted_s": seconds["public"] - seconds["jitted"],
    }
    print(
        f"dispatch quad B={batch} n={n}: public {1e3 * seconds['public']:.2f} ms, under jit "
        f"{1e3 * seconds['jitted']:.2f} ms",
        flush=True,
    )
    return record
