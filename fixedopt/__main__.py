"""``python -m fixedopt demo``: a short demonstration on a built-in example."""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt


def keep_fixed_demo(batch: int, n: int, steps: int, seed: int) -> bool:
    """A batch of vectors, each row with its own fixed components, fitted with adamw."""
    rng = np.random.default_rng(seed)
    x0 = jnp.asarray(rng.normal(size=(batch, n)))
    fixed = jnp.asarray(rng.random((batch, n)) < 0.3)
    target = jnp.asarray(rng.normal(size=(batch, n)))

    def loss(x):  # rows coupled to their neighbours: the fixed entries matter
        return jnp.sum((x - target) ** 2) + jnp.sum((x[:, 1:] - x[:, :-1]) ** 2)

    def run(tx):
        def step(carry, _):
            x, state = carry
            updates, state = tx.update(jax.grad(loss)(x), state, x)
            return (optax.apply_updates(x, updates), state), None

        (x, _), _ = jax.lax.scan(step, (x0, tx.init(x0)), None, length=steps)
        return x

    adamw = optax.adamw(0.05, weight_decay=0.1)
    naive = jax.jit(lambda: run(optax.adamw(0.05, weight_decay=0.1)))()
    zero_fixed_grads = optax.stateless(lambda g, _: jnp.where(fixed, 0.0, g))
    zeroed = jax.jit(lambda: run(optax.chain(zero_fixed_grads, adamw)))()
    exact = jax.jit(lambda: run(fixedopt.keep_fixed(adamw, fixed)))()

    def drift(x):
        return float(jnp.max(jnp.where(fixed, jnp.abs(x - x0), 0.0)))

    print(
        f"{batch} rows x {n} components, {int(fixed.sum())} fixed entries "
        f"(a different set in each row), {steps} adamw steps with weight decay"
    )
    print(f"  {'method':<44} {'max |drift| of fixed':>22} {'loss':>10}")
    for name, x in [
        ("plain adamw", naive),
        ("gradients zeroed before adamw", zeroed),
        ("fixedopt.keep_fixed(adamw, fixed)", exact),
    ]:
        print(f"  {name:<44} {drift(x):>22.3e} {float(loss(x)):>10.4f}")
    identical = bool(jnp.all(jnp.where(fixed, exact == x0, True)))
    print(f"every fixed entry bit-identical with keep_fixed: {identical}")
    return identical


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fixedopt", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the built-in demonstration")
    demo.add_argument("--batch", type=int, default=1024, help="rows in the batch")
    demo.add_argument("--n", type=int, default=16, help="components per row")
    demo.add_argument("--steps", type=int, default=200)
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    ok = keep_fixed_demo(args.batch, args.n, args.steps, args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
