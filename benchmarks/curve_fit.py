"""The curve_fit suite: ``fixedopt.curve_fit`` on a whole batch against the loops a
user would write instead (``scipy.optimize.curve_fit``, lmfit's ``Model.fit``; nlsq
where it installs), on a subsample, timed interleaved; fits per second and agreement
with scipy. Then the Poisson likelihood on 2D spots against the Cramér–Rao bound."""

import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import fixedopt
from benchmarks.timing import first_call, interleaved

BINS = np.linspace(0.0, 10.0, 128)
TRUTH = np.array([1000.0, 0.5, 300.0, 3.0, 5.0])  # a1, tau1, a2, tau2, background
SIZE = 7
GRID_ROWS, GRID_COLUMNS = np.mgrid[0:SIZE, 0:SIZE].astype(float)
PIXELS = np.stack([GRID_COLUMNS.ravel(), GRID_ROWS.ravel()])
SPOT = np.array([1000.0, 3.0, 3.0, 1.0, 10.0])  # photons, x0, y0, width, background


def decay(t, a1, tau1, a2, tau2, background):
    return a1 * jnp.exp(-t / tau1) + a2 * jnp.exp(-t / tau2) + background


def decay_numpy(t, a1, tau1, a2, tau2, background):
    return a1 * np.exp(-t / tau1) + a2 * np.exp(-t / tau2) + background


def spot(xy, photons, x0, y0, width, background):
    r2 = (xy[0] - x0) ** 2 + (xy[1] - y0) ** 2
    return photons / (2 * jnp.pi * width**2) * jnp.exp(-r2 / (2 * width**2)) + background


def decays(batch: int, seed: int = 0):
    """Truth (each times U(0.8, 1.2)), noisy curves (sd sqrt(mu)), sigma, start, mask
    (tau2 known in half the fits)."""
    rng = np.random.default_rng(seed)
    truth = TRUTH * rng.uniform(0.8, 1.2, (batch, 5))
    mu = decay_numpy(BINS, *truth.T[:, :, None])
    sigma = np.sqrt(mu)
    fixed = np.zeros((batch, 5), bool)
    fixed[::2, 3] = True
    start = np.where(fixed, truth, TRUTH * np.array([1.1, 0.9, 0.9, 1.1, 1.0]))
    return truth, mu + sigma * rng.normal(size=mu.shape), sigma, fixed, start


def scipy_loop(data, sigma, fixed, start, rows):
    """``curve_fit`` per fit on its reduced model (fixed parameters closed over)."""
    popt, perr = np.array(start[:rows], float), np.zeros((rows, 5))
    for b in range(rows):
        free = ~fixed[b]

        def reduced(t, *q, b=b, free=free):
            p = list(start[b])
            for k, value in zip(np.flatnonzero(free), q):
                p[k] = value
            return decay_numpy(t, *p)

        q, cov = scipy.optimize.curve_fit(
            reduced, BINS, data[b], start[b][free], sigma=sigma[b], bounds=(0.0, np.inf)
        )
        popt[b, free], perr[b, free] = q, np.sqrt(np.diag(cov))
    return popt, perr


def lmfit_loop(data, sigma, fixed, start, rows):
    import lmfit

    model = lmfit.Model(decay_numpy)
    popt, perr = np.array(start[:rows], float), np.zeros((rows, 5))
    names = ("a1", "tau1", "a2", "tau2", "background")
    for b in range(rows):
        params = model.make_params(**dict(zip(names, start[b])))
        for k, name in enumerate(names):
            params[name].set(min=0.0, vary=not fixed[b, k])
        out = model.fit(data[b], params, t=BINS, weights=1.0 / sigma[b])
        popt[b] = [out.params[n].value for n in names]
        perr[b] = [out.params[n].stderr or 0.0 for n in names]
    return popt, perr


def nlsq_skipped() -> str | None:
    try:
        import nlsq  # noqa: F401
    except ImportError:
        version = ".".join(map(str, sys.version_info[:2]))
        return f"nlsq is not installed (it needs Python >= 3.12; this is {version})"
    return "nlsq installed but not wired in (its API was not available to check here)"


def decay_records(batch: int, rows: int, dtype, rounds: int) -> list[dict]:
    """fixedopt on the whole batch vs the loops on ``rows`` fits, interleaved."""
    _truth, data, sigma, fixed, start = decays(batch)
    cast = lambda a: jnp.asarray(a, dtype)
    inputs = (cast(BINS), cast(data), cast(start))

    def ours():
        popt, pcov = fixedopt.curve_fit(
            decay, *inputs, sigma=cast(sigma), bounds=(0.0, np.inf), fixed=fixed, batched=True
        )
        return jax.block_until_ready((popt, pcov))

    compile_info = first_call(ours)
    calls = {"fixedopt": ours, "scipy": lambda: scipy_loop(data, sigma, fixed, start, rows),
             "lmfit": lambda: lmfit_loop(data, sigma, fixed, start, rows)}  # fmt: skip
    times, outputs = interleaved(calls, {"fixedopt": rounds, "scipy": 2, "lmfit": 2})
    timed = {name: batch if name == "fixedopt" else rows for name in calls}
    per_fit = {name: statistics.median(times[name]) / timed[name] for name in calls}
    popt, pcov = (np.asarray(a, float) for a in outputs["fixedopt"])
    perr = np.sqrt(np.diagonal(pcov, axis1=1, axis2=2))
    reference, reference_err = outputs["scipy"]
    records = []
    for method in calls:
        fitted, errors = (popt, perr) if method == "fixedopt" else outputs[method]
        free = ~fixed[:rows]
        # in units of scipy's error bars (a relative difference means little at a
        # background of ~0 on its bound)
        distance = np.abs(fitted[:rows] - reference) / np.where(reference_err > 0, reference_err, 1)
        ratio = errors[:rows][free] / reference_err[free]
        records.append({"kind": "curve_fit", "problem": "decay (2 exp + bg, 128 bins)",
                        "dtype": np.dtype(dtype).name, "method": method, "B": batch,
                        "fits_timed": batch if method == "fixedopt" else rows,
                        "fits_per_s": 1.0 / per_fit[method],
                        "speedup_vs_scipy": per_fit["scipy"] / per_fit[method],
                        "median_popt_diff_over_stderr": float(np.median(distance[free])),
                        "max_popt_diff_over_stderr": float(np.max(distance[free])),
                        "stderr_ratio_median_vs_scipy": float(np.median(ratio)),
                        "stderr_ratio_max_dev_vs_scipy": float(np.max(np.abs(ratio - 1)))}
                       | (compile_info if method == "fixedopt" else {}))  # fmt: skip
    return [*records, {"kind": "curve_fit", "method": "nlsq", "skipped": nlsq_skipped()}]


def spots(count: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    params = np.tile(SPOT, (count, 1))
    params[:, 1:3] += rng.uniform(-0.5, 0.5, (count, 2))
    mu = np.asarray(jax.vmap(lambda p: spot(PIXELS, *p))(jnp.asarray(params)))
    start = params * np.array([1.1, 1.0, 1.0, 1.1, 0.9])
    start[:, 1:3] += 0.2
    return params, rng.poisson(mu).astype(float), start


def crlb_records(count: int) -> list[dict]:
    """Spread of the fitted centres over the Cramér–Rao bound, Poisson vs least squares."""
    params, counts, start = spots(count)
    model = lambda p: spot(PIXELS, *p)
    jacobian = jax.vmap(jax.jacfwd(model))(jnp.asarray(params))
    information = jnp.einsum("bmi,bm,bmj->bij", jacobian, 1.0 / jax.vmap(model)(params), jacobian)
    bound = np.asarray(jnp.linalg.inv(information))
    crlb = np.mean(np.stack([bound[:, 1, 1], bound[:, 2, 2]]))
    records = []
    for estimator in ("poisson", "least_squares"):
        started = time.perf_counter()
        popt, _, result = fixedopt.curve_fit(
            spot, PIXELS, counts, start, batched=True, estimator=estimator, result=True
        )
        jax.block_until_ready(popt)
        error = np.asarray(popt)[:, 1:3] - params[:, 1:3]
        perr = np.asarray(result.perr)[:, 1:3]
        records.append({"kind": "crlb", "estimator": estimator, "spots": count,
                        "converged_frac": float(np.mean(np.asarray(result.solution.converged))),
                        "spread_over_crlb": float(np.sqrt(np.mean(error**2) / crlb)),
                        "stderr_over_crlb": float(np.sqrt(np.mean(perr**2) / crlb)),
                        "time_with_compile_s": time.perf_counter() - started})  # fmt: skip
    return records


def run(quick: bool, args) -> list[dict]:
    batch, rows, rounds = (64, 4, 2) if quick else (20000, 200, 5)
    records = []
    for dtype in (np.float64,) if quick else (np.float64, np.float32):
        records += decay_records(batch, rows, dtype, rounds)
    return records + crlb_records(100 if quick else 10000)
