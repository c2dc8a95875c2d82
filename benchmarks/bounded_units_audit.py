"""Bounded ``minimize`` (L-BFGS) in units 1e-6..1e6: the verdict audit's quartic case
(``benchmarks/verdict_audit.py``, commit 5c06669; the same draws of the same generator),
each CONVERGED row against scipy's L-BFGS-B in float64 and the exact test
``sqrt(g'H^-1 g / (2|f|))`` on the free entries off their bounds. One-off (an
investigation's script, removed after its commit).

    python -m benchmarks.bounded_units_audit float32 300
    python -m benchmarks.bounded_units_audit float64 300

Prints the statuses, the CONVERGED rows' reasons, the cost gaps, the rows flagged (gap
above 1e-4 and the exact test above 10 ``sqrt(eps)``), the other rows, the total steps
and whether fixed entries came back bit-identical.
"""

import collections
import sys

import jax

DTYPE = sys.argv[1] if len(sys.argv) > 1 else "float32"
jax.config.update("jax_enable_x64", DTYPE == "float64")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize as so  # noqa: E402

import fixedopt  # noqa: E402

RNG = np.random.default_rng(7)


def as_given(value):
    return np.asarray(value).astype(DTYPE).astype(float)


def _decay(t, a, tau, c):
    return a * jnp.exp(-t / tau) + c


def _peak(x, a, mu, s, c):
    return a * jnp.exp(-0.5 * ((x - mu) / s) ** 2) + c


def skip_poisson_case(kind, rows):
    """The audit's Poisson case's draws (consumed, not used: the quartic's come after)."""
    scale = 10.0 ** RNG.uniform(-1, 6, rows)
    bg = np.where(RNG.random(rows) < 0.2, 0.0, scale * RNG.uniform(0.02, 0.2, rows))
    if kind == "decay":
        x, f = np.linspace(0, 5, 60), _decay
        truth = np.stack([scale, RNG.uniform(0.5, 2, rows), bg], 1)
    else:
        x, f = np.linspace(500, 700, 101), _peak
        truth = np.stack([scale, RNG.uniform(580, 620, rows), RNG.uniform(5, 15, rows), bg], 1)
    x = as_given(x)
    model = lambda t: np.asarray(f(np.asarray(x, float), *(float(v) for v in t)))
    RNG.poisson(np.array([model(t) for t in truth]))
    RNG.uniform(0.7, 1.4, truth.shape)
    RNG.random(truth.shape)


def skip_model_case(rows):
    """The audit's ``Model.fit`` case's draws (consumed, not used)."""
    RNG.uniform(-3, 3, rows)
    RNG.uniform(2, 8, rows), RNG.uniform(-3, 3, rows)
    RNG.random(rows), RNG.uniform(0.8, 2.5, rows)
    RNG.uniform(-0.05, 0.05, rows), RNG.uniform(0, 0.5, rows)
    RNG.normal(size=(101, rows))
    for _ in range(5):
        RNG.uniform(0.8, 1.25, rows)
    RNG.uniform(-0.5, 0.5, rows)
    for _ in range(5):
        RNG.random(rows)


def quartic_case(rows, n=6):
    units = 10.0 ** RNG.uniform(-6, 6, (rows, n))
    q = np.linalg.qr(RNG.normal(size=(rows, n, n)))[0]
    a = q @ (10.0 ** RNG.uniform(0, 3, (rows, n, 1)) * np.swapaxes(q, 1, 2))
    b = RNG.normal(size=(rows, n)) * 10.0
    w = RNG.uniform(0.01, 1, (rows, n))
    lb, ub = -3 * units, units * RNG.uniform(0.05, 3, (rows, n))
    x0 = units * RNG.uniform(-1, 0, (rows, n))
    fixed = RNG.random((rows, n)) < 0.25
    given = tuple(as_given(v) for v in (a, b, w, units))
    return given, as_given(x0), fixed, (as_given(lb), as_given(ub))


def quartic(x, a, b, w, units):
    z = x / units
    return 0.5 * z @ (a @ z) - b @ z + 0.25 * jnp.sum(w * z**4)


def quartic_np(x, a, b, w, units):
    z = x / units
    return 0.5 * z @ (a @ z) - b @ z + 0.25 * np.sum(w * z**4)


def exact_test(x, a, b, w, units, fixed, lb, ub):
    z = x / units
    grad = (a @ z - b + w * z**3) / units
    hess = (a + np.diag(3 * w * z**2)) / np.outer(units, units)
    held = fixed | ((x <= lb) & (grad > 0)) | ((x >= ub) & (grad < 0))
    g, h = grad[~held], hess[np.ix_(~held, ~held)]
    value = quartic_np(x, a, b, w, units)
    return np.sqrt(abs(g @ np.linalg.solve(h, g)) / (2 * abs(value))) if g.size else 0.0


def scipy_best(args, x, x0, fixed, lb, ub):
    lo, hi = np.where(fixed, x0, lb), np.where(fixed, x0, ub)
    scale = args[3]
    best = np.inf
    for start in (x0, np.clip(x, lo, hi)):
        out = so.minimize(lambda q: quartic_np(q * scale, *args), start / scale,
                          method="L-BFGS-B", bounds=list(zip(lo / scale, hi / scale)),
                          options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000,
                                   "maxcor": 20})  # fmt: skip
        best = min(best, out.fun)
    return best


def main(rows):
    skip_poisson_case("decay", rows)
    skip_poisson_case("peak", rows)
    skip_model_case(rows)
    args, x0, fixed, (lb, ub) = quartic_case(rows)
    given = tuple(np.asarray(v, DTYPE) for v in args)
    solution = fixedopt.minimize(quartic, x0.astype(DTYPE), fixed, bounds=(lb, ub), args=given,
                                 batched=True)  # fmt: skip
    x = np.asarray(solution.x, float)
    status, reason = np.asarray(solution.status), np.asarray(solution.reason)
    steps = np.asarray(solution.steps)
    name = lambda s: fixedopt.Status(int(s)).name
    converged = status == fixedopt.Status.CONVERGED
    exact = bool(np.all(np.where(fixed, x == x0.astype(DTYPE), True)))
    print(DTYPE, dict(collections.Counter(name(s) for s in status)), "reasons",
          dict(collections.Counter(fixedopt.Reason(int(r)).name for r in reason[converged])),
          "steps", int(steps.sum()), "fixed bit-identical", exact)  # fmt: skip
    claimed = np.sqrt(np.finfo(DTYPE).eps)
    gaps, flagged, others = [], [], []
    for i in np.flatnonzero(~fixed.all(1)):
        row = tuple(v[i] for v in args)
        ours = quartic_np(x[i], *row)
        gap = (ours - scipy_best(row, x[i], x0[i], fixed[i], lb[i], ub[i])) / abs(ours)
        test = exact_test(x[i], *row, fixed[i], lb[i], ub[i]) / claimed
        entry = (int(i), name(status[i]), int(steps[i]), f"{gap:.3g}", f"{test:.3g}")
        if converged[i]:
            gaps.append(gap)
            if gap > 1e-4 and test > 10:
                flagged.append(entry)
        else:
            others.append(entry)
    gaps = np.array(gaps)
    print(f"gap max {gaps.max():.3g}, 99th pct {np.percentile(gaps, 99):.3g}, median "
          f"{np.median(gaps):.3g}; flagged {len(flagged)}: {flagged}")  # fmt: skip
    print("not CONVERGED (row, status, steps, gap, exact test / sqrt(eps)):", others)


if __name__ == "__main__":
    main(int(sys.argv[2]) if len(sys.argv) > 2 else 300)
