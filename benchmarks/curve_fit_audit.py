"""A one-off audit of false verdicts (the lead): fixedopt.curve_fit (float32 with x64
off, or float64) against scipy's curve_fit in float64 per row,
physical units, bounds, per-row fixed. Prints, per case, statuses and how many CONVERGED
rows are farther than 0.05 stderr from scipy's answer at a cost above scipy's by 1e-4.
``python -m benchmarks.curve_fit_audit 200 float32`` (every case), ``... 1000
float32,float64 gauss`` (the peaks in both dtypes)."""

import collections
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize as so

import fixedopt

if "float64" in (sys.argv[2] if len(sys.argv) > 2 else ""):
    jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(3)


def decay(t, a, tau, c):
    return a * jnp.exp(-t / tau) + c


def decay_np(t, a, tau, c):
    return a * np.exp(-t / tau) + c


def gauss(x, a, mu, s, c):
    return a * jnp.exp(-0.5 * ((x - mu) / s) ** 2) + c


def gauss_np(x, a, mu, s, c):
    return a * np.exp(-0.5 * ((x - mu) / s) ** 2) + c


def case_decay(rows, tscale, ascale, counts):
    t = np.linspace(0, 5, 60) * tscale
    a = ascale * rng.uniform(0.5, 2, rows)
    tau = tscale * rng.uniform(0.5, 2, rows)
    c = ascale * rng.uniform(0.01, 0.1, rows)
    y = decay_np(t[None], a[:, None], tau[:, None], c[:, None])
    y = rng.poisson(y).astype(float) if counts else y * (1 + 0.01 * rng.normal(size=y.shape))
    truth = np.stack([a, tau, c], 1)
    p0 = truth * rng.uniform(0.7, 1.4, truth.shape)
    fixed = rng.random((rows, 3)) < 0.25
    p0 = np.where(fixed, truth, p0)
    lb = np.array([0, 1e-3 * tscale, -np.inf])
    ub = np.array([np.inf, 1e3 * tscale, np.inf])
    return decay, decay_np, t, y, p0, fixed, (lb, ub)


def case_gauss(rows, xscale, ascale):
    x = np.linspace(500, 700, 101) * xscale
    a = ascale * rng.uniform(0.5, 2, rows)
    mu = xscale * rng.uniform(580, 620, rows)
    s = xscale * rng.uniform(5, 15, rows)
    c = ascale * rng.uniform(0, 0.1, rows)
    truth = np.stack([a, mu, s, c], 1)
    y = gauss_np(x[None], *(truth[:, i, None] for i in range(4))) + 0.01 * ascale * rng.normal(
        size=(rows, x.size)
    )
    p0 = truth * rng.uniform(0.8, 1.25, truth.shape)
    p0[:, 1] = truth[:, 1] + truth[:, 2] * rng.uniform(-0.5, 0.5, rows)
    fixed = rng.random((rows, 4)) < 0.25
    p0 = np.where(fixed, truth, p0)
    lb = np.array([0, 500 * xscale, 0.1 * xscale, -np.inf])
    ub = np.array([np.inf, 700 * xscale, 100 * xscale, np.inf])
    return gauss, gauss_np, x, y, p0, fixed, (lb, ub)


def scipy_row(fnp, x, y, p0, fixed, lb, ub):
    free = ~fixed

    def f(xx, *q):
        p = p0.copy()
        p[free] = q
        return fnp(xx, *p)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            q, cov = so.curve_fit(f, x, y, p0=p0[free], bounds=(lb[free], ub[free]), method="trf")
        except Exception:
            return None, None
    p = p0.copy()
    p[free] = q
    e = np.full(p.shape, np.nan)
    e[free] = np.sqrt(np.diag(cov))
    return p, e


def run(name, spec, dtype):
    f, fnp, x, y, p0, fixed, (lb, ub) = spec
    rows = y.shape[0]
    t0 = time.perf_counter()
    _, _, res = fixedopt.curve_fit(
        f,
        x.astype(dtype),
        y.astype(dtype),
        p0=p0.astype(dtype),
        fixed=fixed,
        bounds=(lb, ub),
        batched=True,
        result=True,
    )
    popt = np.asarray(res.popt, float)
    st = np.asarray(res.solution.status)
    sec = time.perf_counter() - t0
    bad = []
    n_conv = 0
    worst = 0
    for i in range(rows):
        if st[i] != fixedopt.Status.CONVERGED:
            continue
        n_conv += 1
        p, e = scipy_row(fnp, x, y[i], p0[i], fixed[i], lb, ub)
        if p is None:
            continue
        d = np.nanmax(np.abs(popt[i] - p) / e)
        c_fo = np.sum((fnp(x, *popt[i]) - y[i]) ** 2)
        c_sp = np.sum((fnp(x, *p) - y[i]) ** 2)
        worst = max(worst, d)
        if d > 0.05 and c_fo / c_sp > 1 + 1e-4:
            bad.append(
                (
                    i,
                    round(float(d), 3),
                    float(c_fo / c_sp),
                    popt[i].tolist(),
                    p.tolist(),
                    int(res.solution.reason[i]),
                    int(res.solution.steps[i]),
                )
            )
    cnt = collections.Counter(fixedopt.Status(int(s)).name for s in st)
    fx = np.all(np.where(fixed, popt == p0.astype(dtype).astype(float), True))
    print(
        f"{name} {dtype}: {dict(cnt)} conv={n_conv} far(>0.05 se)={len(bad)}",
        f"worst={worst:.3g} fixed_exact={fx} {sec:.1f}s",
    )
    for b in bad[:6]:
        print("   ", b)
    print("", flush=True)


rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200
DTYPES = sys.argv[2].split(",") if len(sys.argv) > 2 else ["float32"]
ONLY_GAUSS = len(sys.argv) > 3 and sys.argv[3] == "gauss"
for dtype in DTYPES:
    if not ONLY_GAUSS:
        for ts, as_ in ((1e-6, 1e6), (1.0, 1.0), (1e3, 1e-3), (1e-3, 1e4)):
            run(
                f"decay counts t{ts:g} a{as_:g}",
                case_decay(rows, ts, as_, counts=as_ >= 1e4),
                dtype,
            )
    for xs, as_ in ((1.0, 1.0), (1e-9, 1e6), (1e3, 1e-6)):
        run(f"gauss x{xs:g} a{as_:g}", case_gauss(rows, xs, as_), dtype)
