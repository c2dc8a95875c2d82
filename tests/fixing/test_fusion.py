"""The fixed mask fuses into the passes the plain program makes anyway.

Compiled-HLO structure, so it cannot regress silently: the masked Adam step and the
masked objective have as many array-sized fusions (passes over memory) as the plain
ones and store no other array: no mask widened to a float, no second masking pass.
In a training loop each pass reads the boolean mask itself, one byte an entry, never
a widened copy hoisted out of the loop or folded into a constant.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fixedopt

SIZE = 1 << 12
RNG = np.random.default_rng(0)
X = jnp.asarray(RNG.normal(size=SIZE), jnp.float32)
GRAD = jnp.asarray(RNG.normal(size=SIZE), jnp.float32)
FIXED = jnp.asarray(RNG.random(SIZE) < 0.3)


def adam_programs():
    """One Adam step on ``SIZE`` float32 entries, buffers donated: plain and masked."""
    adam = optax.adam(1e-3)

    def step(params, state, grad, fixed=None):
        optimizer = adam if fixed is None else fixedopt.keep_fixed(adam, fixed)
        updates, state = optimizer.update(grad, state, params)
        return optax.apply_updates(params, updates), state

    masked_state = fixedopt.keep_fixed(adam, FIXED).init(X)
    return {"plain": (step, (X, adam.init(X), GRAD)),
            "masked": (step, (X, masked_state, GRAD, FIXED))}, (0, 1)  # fmt: skip


def objective_programs():
    """Value and gradient of a batched quartic, unmasked and through ``fixedopt.fix``."""
    fun = lambda x: jnp.sum(x**2 + 0.1 * x**4)
    x, fixed, values = X.reshape(-1, 64), FIXED.reshape(-1, 64), GRAD.reshape(-1, 64)
    masked = lambda x, fixed, values: jax.value_and_grad(fixedopt.fix(fun, fixed, values))(x)
    return {"plain": (jax.value_and_grad(fun), (x,)),
            "masked": (masked, (x, fixed, values))}, ()  # fmt: skip


def materialized(hlo: str) -> list[str]:
    """Types of the arrays of ``SIZE`` entries or more the program writes (a pass each)."""
    found = []
    for line in hlo[hlo.index("\nENTRY") :].splitlines()[1:]:
        match = re.match(r"\s*(?:ROOT )?%\S+ = ([a-z]+[0-9]*)\[([0-9,]*)\]\S* (\S+?)\(", line)
        if not match or match[3] in ("parameter", "tuple"):
            continue
        if int(np.prod([int(d) for d in match[2].split(",") if d])) >= SIZE:
            found.append(f"{match[1]}:{match[3]}")
    return sorted(found)


@pytest.mark.parametrize("cases", [adam_programs, objective_programs], ids=["adam", "objective"])
def test_masked_program_makes_no_extra_pass(cases):
    programs, donate = cases()
    written = {
        name: materialized(jax.jit(fun, donate_argnums=donate).lower(*inputs).compile().as_text())
        for name, (fun, inputs) in programs.items()
    }
    assert written["plain"], "the parser found no array-sized result"
    assert all(kind.endswith(":fusion") for kind in written["masked"]), written
    assert written["masked"] == written["plain"], written


def loop_programs():
    """Ten Adam steps in a ``fori_loop``, plain and masked (the mask an argument, and
    closed over: a constant of the program)."""
    adam = optax.adam(1e-3)

    def run(x, target, fixed=None):
        optimizer = adam if fixed is None else fixedopt.keep_fixed(adam, fixed)

        def body(_, carry):
            x, state = carry
            updates, state = optimizer.update(2.0 * (x - target), state, x)
            return optax.apply_updates(x, updates), state

        return jax.lax.fori_loop(0, 10, body, (x, optimizer.init(x)))[0]

    return {"plain": (run, (X, GRAD)), "argument": (run, (X, GRAD, FIXED)),
            "closed over": (lambda x, target: run(x, target, FIXED), (X, GRAD))}  # fmt: skip


def loop_reads(hlo: str) -> list[list[str]]:
    """Per array-sized fusion of the while loop's body: the types of the arrays of
    ``SIZE`` entries it reads (its fused computation's parameters)."""
    signatures = dict(re.findall(r"^%(\S+) \((.*)\) -> .* \{$", hlo, re.MULTILINE))
    body = re.search(r"while\(.*body=%([^,\s]+)", hlo)[1]
    text = hlo[hlo.index(f"\n%{body} (") :]
    text = text[: text.index("\n}\n")]
    found = []
    for line in text.splitlines():
        match = re.search(r"= (\S+) fusion\(.*calls=%([^,\s]+)", line)
        if match:
            types = re.findall(r": ([a-z0-9]+)\[" + str(SIZE) + r"\]", signatures[match[2]])
            if types or match[1].endswith(f"[{SIZE}]{{0}}"):
                found.append(sorted(types))
    return found


def test_masked_training_loop_reads_the_mask_as_bytes():
    reads = {
        name: loop_reads(jax.jit(fun).lower(*inputs).compile().as_text())
        for name, (fun, inputs) in loop_programs().items()
    }
    assert reads["plain"] and all("f32" in r for r in reads["plain"]), reads
    for name in ("argument", "closed over"):
        # Each pass reads what the plain one reads, plus the mask as pred (1 byte).
        assert [[t for t in r if t != "pred"] for r in reads[name]] == reads["plain"], reads
        assert all(r.count("pred") <= 1 for r in reads[name]), reads
