"""27 solves x float32/float64, each result hashed bit for bit.

Run from a checkout's root: python hash_solves.py > hashes.txt; diff two checkouts' files.
Also covers a least-squares model with a loop (RK4) and >=256 residuals (the solves that
the lanes started inside their steps before issue 60)."""
import hashlib
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

import fixedopt


def h(tree):
    d = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        a = np.asarray(leaf)
        d.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return d.hexdigest()[:16]


def sol_hash(sol):
    return h((sol.x, sol.value, sol.status, sol.reason, sol.steps))


def run(dt):
    rng = np.random.default_rng(0)
    B, m = 24, 40
    t = jnp.asarray(np.linspace(0, 2, m), dt)
    truth = np.column_stack([rng.uniform(1, 3, B), rng.uniform(0.5, 2, B), rng.uniform(-1, 1, B)])
    y = jnp.asarray(truth[:, :1] * np.exp(-truth[:, 1:2] * np.asarray(t)) + truth[:, 2:] + 0.01 * rng.standard_normal((B, m)), dt)
    x0 = jnp.asarray(np.tile([1.0, 1.0, 0.0], (B, 1)) + 0.1 * rng.standard_normal((B, 3)), dt)
    fixed = jnp.asarray(rng.random((B, 3)) < 0.3)

    def res(p, y):
        return p[0] * jnp.exp(-p[1] * t) + p[2] - y

    def vres(p, y):  # vectorized: the lane batch
        return p[:, :1] * jnp.exp(-p[:, 1:2] * t) + p[:, 2:] - y

    def fun(p, y):
        return 0.5 * jnp.sum(res(p, y) ** 2) + 0.01 * jnp.sum(p ** 4)

    lo = jnp.full((B, 3), -0.5, dt); hi = jnp.full((B, 3), 2.5, dt)
    kw = dict(args=(y,), batched=True)
    out = {}
    ls = fixedopt.least_squares
    out["ls_plain"] = sol_hash(ls(res, x0, fixed, **kw))
    out["ls_sigma"] = sol_hash(ls(res, x0, fixed, sigma=jnp.full((B, m), 0.5, dt), **kw))
    out["ls_bounds"] = sol_hash(ls(res, x0, fixed, bounds=(lo, hi), **kw))
    out["ls_soft_l1"] = sol_hash(ls(res, x0, fixed, loss="soft_l1", **kw))
    out["ls_lanes8"] = sol_hash(ls(res, x0, fixed, lanes=8, **kw))
    out["ls_split"] = sol_hash(ls(res, x0, fixed, strategy="split", **kw))
    counts = jnp.asarray(rng.poisson(5.0, (B, m)), dt)
    pres = lambda p, c: jnp.exp(p[0]) * jnp.exp(-p[1] * t) + 1.0 + 0 * p[2]
    out["ls_poisson"] = sol_hash(ls(pres, x0, fixed, estimator="poisson", counts=counts, args=(counts,), batched=True))
    out["ls_vectorized"] = sol_hash(ls(vres, x0, fixed, vectorized=True, **kw))
    out["ls_single"] = sol_hash(ls(res, x0[0], fixed[0], args=(y[0],)))
    out["min_plain"] = sol_hash(fixedopt.minimize(fun, x0, fixed, **kw))
    out["min_bounds"] = sol_hash(fixedopt.minimize(fun, x0, fixed, bounds=(lo, hi), **kw))
    g = lambda d: jax.grad(lambda y: jnp.sum(ls(res, x0, fixed, differentiate=d, args=(y,), batched=True).x))(y)
    out["grad_implicit"] = h(g("implicit"))
    out["grad_unroll"] = h(g("unroll"))
    sol = ls(res, x0, fixed, **kw)
    out["covariance"] = h(fixedopt.covariance(sol, res, fixed, args=(y,), batched=True))
    f = lambda x, a, b, c: a * jnp.exp(-b * x) + c
    out["curve_fit"] = h(fixedopt.curve_fit(f, t, y[0], p0=x0[0]))
    # A model with a loop (RK4) and one with >= 256 residuals, through the lanes.
    ts = jnp.asarray(np.linspace(0, 1, 300), dt)
    big = lambda p, y: p[0] * jnp.exp(-p[1] * ts) + p[2] - y
    yb = jnp.asarray(np.asarray(y[:, :1]) + np.zeros((B, 300)), dt)
    out["ls_300_residuals"] = sol_hash(ls(big, x0, fixed, args=(yb,), batched=True))

    def rk4(p, y):
        def f(u, _):
            k = -p[1] * u
            u = u + 0.05 * (k + 2 * k + 2 * k + k) / 6
            return u, u
        _, us = jax.lax.scan(f, p[0], None, length=m)
        return us + p[2] - y
    out["ls_rk4"] = sol_hash(ls(rk4, x0, fixed, **kw))
    out["ls_rk4_lanes4"] = sol_hash(ls(rk4, x0, fixed, lanes=4, **kw))
    out["ls_300_bounds"] = sol_hash(ls(big, x0, fixed, args=(yb,), batched=True, bounds=(lo, hi)))
    out["ls_300_soft_l1"] = sol_hash(ls(big, x0, fixed, args=(yb,), batched=True, loss="soft_l1"))
    out["ls_300_five"] = sol_hash(ls(big, x0[:5], fixed[:5], args=(yb[:5],), batched=True))
    out["ls_300_max1"] = sol_hash(ls(big, x0, fixed, args=(yb,), batched=True, max_steps=1))
    out["ls_300_max0"] = sol_hash(ls(big, x0, fixed, args=(yb,), batched=True, max_steps=0))
    bad = x0.at[3, 0].set(jnp.nan).at[5].set(2.5)
    out["ls_300_bad"] = sol_hash(ls(big, bad, fixed, args=(yb,), batched=True, bounds=(lo, hi)))
    # the first_call spectra with a slow row (a tail), and the spot
    from benchmarks.first_call_cases import spectra_data, SPECTRA_BOUNDS, X_SPECTRA, spectrum
    for nb in (20, 300):
        p0, fx, yy = spectra_data(nb, slow=True)
        cf = fixedopt.curve_fit(spectrum, np.asarray(X_SPECTRA, dt), np.asarray(yy, dt), np.asarray(p0, dt),
                                bounds=tuple(np.asarray(b, dt) for b in SPECTRA_BOUNDS), fixed=fx, batched=True)
        out[f"spectra_slow_{nb}"] = h(cf)
    from fixedopt.testing_problems import gaussian_fits, gaussian_model
    from benchmarks.tiny import GPUFIT
    fits = gaussian_fits(2000, 0)
    spot = fixedopt.least_squares(lambda p, y: gaussian_model(p) - y, jnp.asarray(fits.x0, dt), fits.fixed, args=(jnp.asarray(fits.data, dt),), batched=True, **GPUFIT)
    out["spot_2000"] = sol_hash(spot)
    return out


for dt in (jnp.float32, jnp.float64):
    for k, v in run(dt).items():
        print(jnp.dtype(dt).name, k, v)
        sys.stdout.flush()
