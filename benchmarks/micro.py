"""Micro-benchmarks: masked objective, ``keep_fixed`` step, dispatch, split vs mask, and
compilations when only the mask (must be 0) or, under ``split``, the free count changes."""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks.cases import SEED, quality
from benchmarks.methods import Settings, as_rows, device_inputs, fixedopt_call, jitted
from benchmarks.timing import compared, compile_monitor, interleaved, summary
from fixedopt.testing import compiled_solves
from fixedopt.testing_problems import BATCHED

MASK_TARGET = 1.05
PATTERNS = {"per-row 30% fixed": (0.3, False), "shared 30% fixed": (0.3, True),
            "per-row 90% fixed": (0.9, False), "shared 90% fixed": (0.9, True)}  # fmt: skip


def packed_width(fixed: np.ndarray) -> int:
    """``split``'s packed width: the least power of two >= every row's free count, <= n."""
    largest = max(int(np.max(np.sum(~fixed, axis=-1), initial=0)), 1)
    return min(1 << (largest - 1).bit_length(), fixed.shape[-1])


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


def blocked_call(problem, **options):
    """The public call on ``problem``, blocked (``least_squares`` for a residual form)."""
    call, inputs = fixedopt_call(problem, Settings(), problem.jax_residual is not None, **options)
    return lambda: jax.block_until_ready(call(*inputs))


def split_vs_mask(batch: int, n: int, rounds: int) -> list[dict]:
    """Whole solves of ``quad`` with both strategies, per mask pattern (public calls)."""
    records = []
    for pattern, (fraction, shared) in PATTERNS.items():
        problem = BATCHED["quad"](batch, n, SEED).with_mask(SEED + 7, fraction, shared)
        calls = {s: blocked_call(problem, strategy=s) for s in ("mask", "split")}
        record = compared(calls, "mask", rounds, kind="strategy", problem="quad", B=batch, n=n,
                          pattern=pattern, split_width=packed_width(problem.fixed))  # fmt: skip
        mask_rows, split_rows = (as_rows(calls[s]()) for s in ("mask", "split"))
        agree = quality(problem, split_rows, mask_rows, Settings.gtol)
        records.append(record | {"split_max_rel_obj_diff_vs_mask": agree["max_rel_obj_diff"],
                                 "steps_mean": float(np.mean(mask_rows.steps))})  # fmt: skip
    return records


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


def run(objective, adam_size, adam_steps, strategy, compiles, split_free_counts, rounds=7,
        dispatch_size=(256, 8)) -> list[dict]:  # fmt: skip
    """Every micro-benchmark, in order of increasing risk of running out of memory."""
    return [
        *new_mask_compiles(*compiles),
        *split_compiles(*compiles, split_free_counts),
        *objective_overhead(objective, rounds),
        dispatch(*dispatch_size, rounds),
        *split_vs_mask(*strategy, rounds=max(3, rounds // 2)),
        keep_fixed(adam_size, rounds, adam_steps),
    ]
