"""The fusion suite as it was: does the fixed mask cost a pass over memory? Masked vs
plain Adam steps and objectives, timed side by side, with the arrays each compiled
program writes (``PYTHONPATH=. python studies/2026-11-30-fusion/fusion.py``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.micro import adam_steps, measure


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


def run(quick: bool = False) -> list[dict]:
    """2^24 entries, 21 repeats (quick: 2^14, 3)."""
    size, repeats = (1 << 14, 3) if quick else (1 << 24, 21)
    cases = {"keep_fixed(adam) step, donated": adam_steps(size),
             "fix(fun) value+grad, (B, 64)": objective_steps(size)}  # fmt: skip
    return [
        {"case": name} | measure("fusion", *case, size, repeats)[0] for name, case in cases.items()
    ]


if __name__ == "__main__":
    for record in run():
        print(record)
