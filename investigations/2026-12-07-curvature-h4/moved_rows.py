"""The solves of hash_solves.py (4ec2ea5) whose bits moved, their outputs saved: python
moved_rows.py OUT.npz (run from each tree's root), then python moved_rows.py A.npz B.npz
compares them (per solve: rows whose x differ, the largest relative difference of x and
of the value, statuses and steps equal)."""
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402


def solves(dt):
    import fixedopt
    rng = np.random.default_rng(0)
    B, m = 24, 40
    t = jnp.asarray(np.linspace(0, 2, m), dt)
    truth = np.column_stack([rng.uniform(1, 3, B), rng.uniform(0.5, 2, B), rng.uniform(-1, 1, B)])
    y = jnp.asarray(truth[:, :1] * np.exp(-truth[:, 1:2] * np.asarray(t)) + truth[:, 2:]
                    + 0.01 * rng.standard_normal((B, m)), dt)
    x0 = jnp.asarray(np.tile([1.0, 1.0, 0.0], (B, 1)) + 0.1 * rng.standard_normal((B, 3)), dt)
    fixed = jnp.asarray(rng.random((B, 3)) < 0.3)
    res = lambda p, y: p[0] * jnp.exp(-p[1] * t) + p[2] - y
    lo, hi = jnp.full((B, 3), -0.5, dt), jnp.full((B, 3), 2.5, dt)
    kw = dict(args=(y,), batched=True)
    out = {}
    for name, extra in (("ls_bounds", dict(bounds=(lo, hi))), ("ls_soft_l1", dict(loss="soft_l1"))):
        sol = fixedopt.least_squares(res, x0, fixed, **extra, **kw)
        out |= {f"{name}_{k}": np.asarray(getattr(sol, k)) for k in ("x", "value", "status", "steps")}
        out[f"{name}_fixed_ok"] = np.asarray(np.all(np.where(fixed, sol.x == x0, True)))
    grad = jax.grad(lambda y: jnp.sum(fixedopt.least_squares(res, x0, fixed, differentiate="unroll",
                                                              args=(y,), batched=True).x))(y)
    out["grad_unroll"] = np.asarray(grad)
    return out


if len(sys.argv) == 2:
    saved = {}
    for dt in (jnp.float32, jnp.float64):
        saved |= {f"{jnp.dtype(dt).name}_{k}": v for k, v in solves(dt).items()}
    np.savez(sys.argv[1], **saved)
else:
    a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
    for key in a.files:
        x, z = a[key].astype(np.float64), b[key].astype(np.float64)
        rows = np.sum(np.any((x != z).reshape(len(x), -1), axis=1)) if x.ndim else int(x != z)
        scale = np.maximum(np.abs(x), np.finfo(np.float32).tiny)
        print(f"{key}: {rows} rows differ, largest relative {np.max(np.abs(x - z) / scale):.2e}")
