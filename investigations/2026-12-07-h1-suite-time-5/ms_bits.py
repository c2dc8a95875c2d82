"""Run multistart calls (the test module's and more), save every output's bits."""
import sys, numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
print(fixedopt.__file__, file=sys.stderr)
T = jnp.linspace(0.0, 4.0, 9)
decay = lambda p, y: p[0] * jnp.exp(-p[1] * T) - y
double_well = lambda x, tilt: jnp.sum((x**2 - 1.0) ** 2 + tilt * x)
out = {}
def save(tag, result):
    best, every, chosen = result
    for name, tree in (("best", best), ("every", every)):
        for i, leaf in enumerate(jax.tree.leaves(tree)):
            out[f"{tag}_{name}_{i}"] = np.asarray(leaf)
    out[f"{tag}_chosen"] = np.asarray(chosen)
save("one", fixedopt.multistart(fixedopt.minimize, double_well, jnp.array([1.5, 1.5]), False, starts=jnp.array([[-1.5, -1.5], [-1.5, 1.5]]), args=(0.3,), return_all=True))
save("one_drawn", fixedopt.multistart(fixedopt.minimize, double_well, jnp.array([1.5, 0.0]), False, starts=6, args=(0.3,), return_all=True))
y = jnp.stack([5.0 * jnp.exp(-1.5 * T), 2.0 * jnp.exp(-0.5 * T), 3.0 * jnp.exp(-2.0 * T)])
save("decay", fixedopt.multistart(fixedopt.least_squares, decay, jnp.array([[1.0, -3.0], [2.0, -1.0], [3.0, 1.0]]), jnp.array([[False, False], [True, False], [False, False]]), args=(y,), batched=True, starts=5, return_all=True))
for dtype in (jnp.float32, jnp.float64):
    rng = np.random.default_rng(0)
    x0 = jnp.asarray(rng.uniform(0.5, 1.5, (4, 5)) * [1e-6, 1.0, 1e6, 1.0, 1.0], dtype)
    x0 = x0.at[0, 1].set(-0.0).at[2, 3].set(np.pi * 1e-6)
    fixed = jnp.asarray(rng.random((4, 5)) < 0.4).at[0, 1].set(True).at[2, 3].set(True)
    lower = jnp.asarray([-1.0, -2.0, -jnp.inf, -jnp.inf, 0.0], dtype)
    upper = jnp.asarray([1.0, 2.0, jnp.inf, jnp.inf, jnp.inf], dtype)
    target = jnp.asarray(rng.normal(size=(4, 5)), dtype)
    fun = lambda x, t: jnp.sum((x - t) ** 2) + 0.1 * jnp.sum(x**4)
    save(f"bits{dtype.__name__}", fixedopt.multistart(fixedopt.minimize, fun, x0, fixed, args=(target,), bounds=(lower, upper), batched=True, starts=4, key=3, return_all=True))
    save(f"spread{dtype.__name__}", fixedopt.multistart(fixedopt.minimize, fun, x0, fixed, args=(target,), batched=True, starts=9, key=jax.random.key(5), spread=2.5, return_all=True))
save("box", fixedopt.multistart(fixedopt.minimize, double_well, jnp.full((6, 1), 1.2), False, args=(0.3,), batched=True, args_axes=None, bounds=(-2.0, 2.0), starts=8, return_all=True))
y2 = jnp.stack([5.0 * jnp.exp(-1.5 * T) + 0.1 * jnp.sin(7 * T), 2.0 * jnp.exp(-0.5 * T)])
sigma = jnp.array([[0.5], [2.0]]) * jnp.ones((2, 9))
save("sigma", fixedopt.multistart(fixedopt.least_squares, decay, jnp.array([[4.0, 1.0], [1.0, 1.0]]), False, starts=3, args=(y2,), batched=True, sigma=sigma, return_all=True))
np.savez(sys.argv[1], **out)
print(len(out), "arrays", file=sys.stderr)
