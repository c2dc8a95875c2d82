"""The unrolled Cholesky factor and solve of a base tree (BASE's small_linalg.py) and of
this tree, jitted alone under two vmaps (20,000 x 2 SPD systems of n = 2..5), entry by
entry; then, for float32 n = 5's entry L[3][2] where the two differ, which of the four
roundings of its two multiply-subtracts (each fused or not) each one gives.
Run from the tree's root: BASE=/path/to/base python factor_bits.py"""
import importlib.util
import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


new = load("fixedopt/_solvers/small_linalg.py", "new_linalg")
old = load(os.path.join(os.environ["BASE"], "fixedopt/_solvers/small_linalg.py"), "old_linalg")


def factor(module, n):
    def one(m):
        rows = module.cholesky_columns(m)
        return jnp.stack([jnp.stack(r + [jnp.zeros_like(r[0])] * (n - len(r))) for r in rows])
    return jax.jit(jax.vmap(jax.vmap(one)))


def solve(module):
    return jax.jit(jax.vmap(jax.vmap(module.spd_solve)))


def sub(c, a, b, fused):
    f32 = np.float32
    return f32(np.float64(c) - np.float64(a) * np.float64(b)) if fused else f32(c - f32(a * b))


rng = np.random.default_rng(0)
for dtype in (np.float32, np.float64):
    for n in (2, 3, 4, 5):
        a = rng.standard_normal((20000, 2, 3 * n, n)).astype(dtype)
        m = jnp.asarray(np.einsum("bkij,bkil->bkjl", a, a) + 1e-3 * np.eye(n, dtype=dtype))
        rhs = jnp.asarray(rng.standard_normal((20000, 2, n)).astype(dtype))
        lo, ln = np.asarray(factor(old, n)(m)), np.asarray(factor(new, n)(m))
        so, sn = np.asarray(solve(old)(m, rhs)), np.asarray(solve(new)(m, rhs))
        rel = float(np.max(np.abs(so - sn) / np.abs(so)))
        print(f"{dtype.__name__} n={n}: factor entries differ {int((lo != ln).sum())} of {lo.size}, "
              f"solution entries {int((so != sn).sum())} of {so.size}, max rel {rel:.2e}")
        if dtype is np.float32 and n == 5:
            matches = {}
            for r in np.argwhere((lo != ln)[..., 3, 2])[:200]:
                i = tuple(r)
                M, L = np.asarray(m[i]), lo[i]
                inverse = np.float32(np.float32(1.0) / L[2, 2])
                got = {}
                for fused in itertools.product([0, 1], repeat=2):
                    c = sub(sub(M[3, 2], L[3, 0], L[2, 0], fused[0]), L[3, 1], L[2, 1], fused[1])
                    got[fused] = np.float32(c * inverse)
                for name, value in (("base", lo[i][3, 2]), ("tree", ln[i][3, 2])):
                    key = (name, tuple(k for k, v in got.items() if v == value))
                    matches[key] = matches.get(key, 0) + 1
            for key, count in sorted(matches.items()):
                print("  L[3][2]", key[0], "equals the roundings (fused?)", key[1], ":", count)
