"""A finished study (was the at_bound suite): are the error bars of ``curve_fit``
calibrated when a bound is
active? Two-exponential decays plus a background bounded below by 0, whose fit sits
on the bound in a sizeable share of the rows; one lifetime known (fixed) in half the
rows. Per ``at_bound`` option and weighting: the robust spread (``median(|z|) /
0.6745``, bias included) of the z-scores ``(fit - truth) / stderr`` of the free
parameters not at a bound, in the rows with an active bound and in the others (1 is
calibrated)."""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)  # before any array exists

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402

BINS = np.linspace(0.0, 10.0, 128)
TRUTH = np.array([1000.0, 0.5, 300.0, 3.0, 0.0])  # a1, tau1, a2, tau2, background
NAMES = ("a1", "tau1", "a2", "tau2", "background")
NOISE = 10.0  # the standard deviation of every bin
BACKGROUNDS = (0.0, 2.0, 4.0)  # the true background, in the rows of a batch: thirds


def decay(t, a1, tau1, a2, tau2, background):
    return a1 * jnp.exp(-t / tau1) + a2 * jnp.exp(-t / tau2) + background


def simulate(batch: int, seed: int, background: float):
    """Truth (each times U(0.8, 1.2), the background ``background``), Gaussian noise
    of standard deviation ``NOISE``, the start and the mask."""
    rng = np.random.default_rng(seed)
    truth = TRUTH * rng.uniform(0.8, 1.2, (batch, 5))
    truth[:, 4] = background
    mu = np.asarray(jax.vmap(lambda p: decay(jnp.asarray(BINS), *p))(jnp.asarray(truth)))
    sigma = np.full_like(mu, NOISE)
    data = mu + sigma * rng.normal(size=mu.shape)
    fixed = np.zeros((batch, 5), bool)
    fixed[::2, 3] = True  # tau2 known in half the rows
    start = np.where(fixed, truth, TRUTH * np.array([1.1, 0.9, 0.9, 1.1, 1.0]) + [0, 0, 0, 0, 1])
    return truth, data, sigma, fixed, start


def robust_spread(z: np.ndarray) -> float:
    """``median(|z|) / 0.6745``: 1 for unit-normal z-scores; a bias counts (unlike the
    IQR, which a shift of the z-scores leaves unchanged): it measures the coverage of
    the error bars."""
    if z.size < 10:
        return float("nan")
    return float(np.median(np.abs(z)) / 0.6745)


def calibration(batch: int, background: float, seed: int = 0) -> list[dict]:
    """One record per (weighting, at_bound): z-score spreads and the share at a bound."""
    truth, data, sigma, fixed, start = simulate(batch, seed, background)
    bounds = (np.zeros(5), np.full(5, np.inf))
    records = []
    for weighting in ("unweighted", "weighted"):
        weights = {"sigma": sigma, "absolute_sigma": True} if weighting == "weighted" else {}
        for at_bound in ("free", "fixed"):
            _, _, result = fixedopt.curve_fit(
                decay, BINS, data, start, bounds=bounds, fixed=fixed, batched=True,
                at_bound=at_bound, result=True, **weights,
            )  # fmt: skip
            records.append(_record(result, truth, fixed, weighting, at_bound))
    return records


def _record(result, truth, fixed, weighting: str, at_bound: str) -> dict:
    popt, perr = np.asarray(result.popt), np.asarray(result.perr)
    converged = np.asarray(result.solution.converged)
    on_bound = np.asarray(result.covariance.at_bound)
    rows_at_bound = on_bound.any(axis=1)
    usable = ~fixed & ~on_bound & (perr > 0) & converged[:, None]
    z = (popt - truth) / np.where(perr > 0, perr, 1.0)
    record = {"kind": "at_bound", "background": float(truth[0, 4]), "weighting": weighting,
              "at_bound": at_bound, "B": len(popt), "converged_frac": float(converged.mean()),
              "rows_at_bound_frac": float(rows_at_bound.mean()),
              "spread_rows_at_bound": robust_spread(z[usable & rows_at_bound[:, None]]),
              "spread_other_rows": robust_spread(z[usable & ~rows_at_bound[:, None]])}  # fmt: skip
    for k in range(4):  # each parameter, in the rows at a bound
        chosen = usable[:, k] & rows_at_bound
        record[f"spread_{NAMES[k]}_at_bound_rows"] = robust_spread(z[chosen, k])
    return record


def run(quick: bool, args) -> list[dict]:
    batch, backgrounds = (500, BACKGROUNDS[:2]) if quick else (20000, BACKGROUNDS)
    return [r for background in backgrounds for r in calibration(batch, background)]


if __name__ == "__main__":  # PYTHONPATH=. python studies/2026-12-01-at_bound/at_bound.py
    import json

    print(json.dumps(run(quick=False, args=None), indent=1))
