"""The micro-benchmarks the ``cpu`` and ``gpu`` suites ran until 2026-12-05 (split against
mask stayed there): masked objective, ``keep_fixed`` step, dispatch, and compilations when
only the mask (must be 0) or, under ``split``, the free count changes. From the
repository's root: ``JAX_ENABLE_X64=1 PYTHONPATH=. python
studies/2026-12-05-micro_and_scale/micro.py [--quick] > records.json``."""

import dataclasses
import json
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks.cases import SEED
from benchmarks.methods import Settings, device_inputs, fixedopt_call, jitted
from benchmarks.suites import blocked_call, packed_width
from benchmarks.timing import compared, compile_monitor, interleaved, summary
from fixedopt.testing import compiled_solves
from fixedopt.testing_problems import BATCHED

MASK_TARGET = 1.05


def objective_calls(problem) -> dict:
    """Batched ``value_and_grad``: unmasked, ``fix``, pinned to ``x``, and packed (split)."""
    fun, (x0, fixed, *args) = problem.jax_fun, device_inputs(problem)
    width, n = packed_width(problem.fixed), problem.size
    order = np.argsort(problem.fixed, axis=-1, kind="stable")[:, :width]  # free first
    index = jnp.asarray(np.where(np.take_along_axis(~problem.fixed, order, -1), order, n))
    z = jnp.take_along_axis(jnp.pad(x0, ((0, 0), (0, 1))), index, axis=1)
    pinned = lambda x, fixed, *a: fun(jnp.where(fixed, jax.lax.stop_gradient(x), x), *a)

    def split(z, index, values, *args):
        padded = jnp.concatenate([values, jnp.zeros(1, values.dtype)])
        return fun(padded.at[index].set(z)[:n], *args)

    programs = {
        "unmasked": (jax.value_and_grad(fun), (x0, *args)),
        "masked": (lambda x, f, v, *a: jax.value_and_grad(fixedopt.fix(fun, f, v))(x, *a),
                   (x0, fixed, x0, *args)),
        "pinned": (jax.value_and_grad(pinned), (x0, fixed, *args)),
        "split": (jax.value_and_grad(split), (z, index, x0, *args)),
    }  # fmt: skip
    compiled = {name: (jax.jit(jax.vmap(f)), inputs) for name, (f, inputs) in programs.items()}
    return {name: (lambda f=f, i=i: jax.block_until_ready(f(*i))) for name, (f, i) in
            compiled.items()}  # fmt: skip


def objective_overhead(sizes, rounds: int) -> list[dict]:
    """Masked vs unmasked vs split objective + gradient on each problem and size."""
    records = []
    for name, batch, n in sizes:
        problem = BATCHED[name](batch, n, SEED)
        inner = max(3, min(200, 2_000_000 // (batch * n)))
        fields = {"kind": "objective", "problem": name, "B": batch, "n": n,
                  "split_width": packed_width(problem.fixed), "target": MASK_TARGET}  # fmt: skip
        records.append(compared(objective_calls(problem), "unmasked", rounds, inner, **fields))
    return records


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


def keep_fixed(size: int, rounds: int, steps: int) -> dict:
    """Adam steps plain, masked and the reference; whether fixed parameters kept their bits."""
    programs, donate = adam_steps(size)
    record, calls = measure("keep_fixed", programs, donate, size, rounds, steps)
    params, _, _, fixed = calls["masked"].inputs
    params, fixed, start = np.asarray(params), np.asarray(fixed), programs["masked"][1]()[0]
    per_step = {k: record[f"{k}_step_time_median_s"] for k in ("reference", "plain", "masked")}
    return record | {
        "reference_GBps": 7 * 4 * size / per_step["reference"] / 1e9,  # 4 read, 3 written
        "plain_vs_reference": per_step["plain"] / per_step["reference"],
        "masked_vs_reference": per_step["masked"] / per_step["reference"],
        "fixed_bit_identical": bool(np.array_equal(params[fixed], np.asarray(start)[fixed])),
    }


def dispatch(batch: int, n: int, rounds: int) -> dict:
    """The public call vs the same solve inside the caller's ``jit`` (Python overhead)."""
    solve, inputs = fixedopt_call(BATCHED["quad"](batch, n, SEED), Settings())
    inside = jitted(solve)
    calls = {"public": lambda: jax.block_until_ready(solve(*inputs)),
             "jitted": lambda: jax.block_until_ready(inside(*inputs))}  # fmt: skip
    record = compared(calls, "jitted", rounds, 5, kind="dispatch", problem="quad", B=batch, n=n)
    return record | {"public_minus_jitted_s": record["public_s"] - record["jitted_s"]}


def compiles_during(call) -> dict:
    """Programs compiled for fixedopt's solves, and XLA compilations, during ``call()``."""
    before = compiled_solves()
    with compile_monitor() as monitor:
        call()
    return {"cache_growth": compiled_solves() - before, "backend_compiles": monitor["count"]}


def new_mask_compiles(batch: int, n: int) -> list[dict]:
    """Compilations of the public call when only the mask changes, for ``minimize`` (quad)
    and ``least_squares`` (spectra)."""
    records = []
    for name, size in (("quad", n), ("spectra", 10)):
        problem = BATCHED[name](batch, size, SEED)
        blocked_call(problem)()  # compiles here unless an earlier call did
        counts = compiles_during(blocked_call(problem.with_mask(SEED + 1)))
        ok = counts["cache_growth"] == counts["backend_compiles"] == 0
        records.append({"kind": "new_mask", "problem": name, "B": batch, "n": size, **counts,
                        "ok": ok})  # fmt: skip
    return records


def split_compiles(batch: int, n: int, free_counts) -> list[dict]:
    """Compilations under ``split`` per free count (a fresh objective: nothing cached)."""
    base = BATCHED["quad"](batch, n, SEED)
    base = dataclasses.replace(base, jax_fun=lambda x, *args, f=base.jax_fun: f(x, *args))
    rng, seen, records = np.random.default_rng(SEED + 3), set(), []
    for count in free_counts:
        order = np.argsort(rng.random((batch, n)), axis=1)  # each row's free entries first
        fixed = np.argsort(order, axis=1) >= count
        problem = dataclasses.replace(base, fixed=fixed)
        width, expected = packed_width(fixed), int(packed_width(fixed) not in seen)
        counts = compiles_during(blocked_call(problem, strategy="split"))
        seen.add(width)
        records.append({"kind": "split_compiles", "B": batch, "n": n, "free_count": count,
                        "width": width, **counts, "expected_new": expected,
                        "ok": counts["cache_growth"] == expected})  # fmt: skip
    return records


def run(objective, adam_size, adam_steps, compiles, split_free_counts, rounds=7,
        dispatch_size=(256, 8)) -> list[dict]:  # fmt: skip
    """Every micro-benchmark, in order of increasing risk of running out of memory."""
    return [
        *new_mask_compiles(*compiles),
        *split_compiles(*compiles, split_free_counts),
        *objective_overhead(objective, rounds),
        dispatch(*dispatch_size, rounds),
        keep_fixed(adam_size, rounds, adam_steps),
    ]


SIZES = {  # the cpu suite's (the gpu suite's: objective at B = 2**17, n = 64)
    "objective": (("quad", 16384, 64), ("quad", 2048, 512), ("dquad", 16384, 64),
                  ("dquad", 2048, 512), ("rosen", 16384, 64), ("rosen", 2048, 512)),
    "adam_size": 2**24, "adam_steps": 5, "compiles": (256, 64),
    "split_free_counts": (20, 28, 32, 33, 48, 64, 17, 16),
}  # fmt: skip
QUICK = {"objective": (("quad", 64, 16),), "adam_size": 2**14, "adam_steps": 2,
         "compiles": (16, 8), "split_free_counts": (3, 4, 2), "rounds": 3,
         "dispatch_size": (16, 8)}  # fmt: skip

if __name__ == "__main__":
    records = run(**(QUICK if "--quick" in sys.argv else SIZES))
    print(json.dumps(records, indent=1, default=str))
