# A copy of investigations/2026-12-07-poisson-peaks-h2/verdict_peaks.py (commit 0d786a4), unchanged:
# h4's rerun of benchmarks/verdict_audit.py (commit 600179a), the Poisson peak alone (its
# data drawn after the decay's, which is drawn and not fit), printing every flagged row
# where a 1e-6 step still lowers the deviance and saving those rows for trace.py and
# nudge.py: PYTHONPATH=<tree> .venv/bin/python <this file> float64 300 rows.npz
"""An audit of CONVERGED verdicts in users' conditions, per row against a float64
reference: ``curve_fit(estimator="poisson")`` against scipy's L-BFGS-B on the Poisson
deviance, ``Model.fit`` (Gaussian + Linear) against lmfit, ``minimize`` with bounds
against scipy's L-BFGS-B (``lb == ub`` for fixed entries). Each reference runs from the
start and from fixedopt's answer (tight tolerances), and keeps the lower cost.

    python -m benchmarks.verdict_audit float32 300
    python -m benchmarks.verdict_audit float64 300

Prints, per case, the statuses, the reasons of the CONVERGED rows, the worst cost gap
and distance, the rows past the thresholds (a false verdict's candidates) and whether
fixed entries came back bit-identical.
"""

import collections
import contextlib
import sys
import warnings

import jax

DTYPE = sys.argv[1] if len(sys.argv) > 1 else "float32"
jax.config.update("jax_enable_x64", DTYPE == "float64")

import jax.numpy as jnp  # noqa: E402
import lmfit  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize as so  # noqa: E402

import fixedopt  # noqa: E402
from fixedopt.models import GaussianModel, LinearModel  # noqa: E402

RNG = np.random.default_rng(7)
FAR_SE, FAR_COST = 0.05, 1e-4  # the lead's thresholds: both past them is a candidate


def decay(t, a, tau, c):
    return a * jnp.exp(-t / tau) + c


def peak(x, a, mu, s, c):
    return a * jnp.exp(-0.5 * ((x - mu) / s) ** 2) + c


def as_given(value):
    """``value`` as the solve receives it (cast to the dtype), back in float64: the
    reference solves the same problem."""
    return np.asarray(value).astype(DTYPE).astype(float)


def numpy_of(f):
    return lambda x, *p: np.asarray(f(np.asarray(x, float), *(float(v) for v in p)))


def poisson_case(kind: str, rows: int):
    """Counts from 0.1 to 1e6 per bin (a log-uniform scale per row); a background of 0
    (its bound active) in a fifth of the rows; 25% of the entries fixed at the truth."""
    scale = 10.0 ** RNG.uniform(-1, 6, rows)
    bg = np.where(RNG.random(rows) < 0.2, 0.0, scale * RNG.uniform(0.02, 0.2, rows))
    if kind == "decay":
        x, f = np.linspace(0, 5, 60), decay
        truth = np.stack([scale, RNG.uniform(0.5, 2, rows), bg], 1)
        lb, ub = np.array([0, 1e-3, 0.0]), np.array([np.inf, 1e3, np.inf])
    else:
        x, f = np.linspace(500, 700, 101), peak
        truth = np.stack([scale, RNG.uniform(580, 620, rows), RNG.uniform(5, 15, rows), bg], 1)
        lb, ub = np.array([0, 500, 0.1, 0.0]), np.array([np.inf, 700, 100, np.inf])
    counts = RNG.poisson(np.array([numpy_of(f)(x, *t) for t in truth])).astype(float)
    p0 = np.clip(truth * RNG.uniform(0.7, 1.4, truth.shape), lb, ub)
    p0[:, -1] = np.maximum(p0[:, -1], 0.05 * scale)  # a start inside, off the bound
    fixed = RNG.random(truth.shape) < 0.25
    bounds = (as_given(lb), as_given(ub))
    return f, as_given(x), counts, as_given(np.where(fixed, truth, p0)), fixed, bounds


def distance(ours, reference, errors):
    """The largest ``|ours - reference|`` in standard errors (0 where none counts)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        far = np.abs(ours - reference) / errors
    return float(np.nanmax(far)) if np.isfinite(far).any() else 0.0


def deviance_residuals(mu, y):
    """Residuals whose sum of squares is the deviance."""
    mu = np.maximum(mu, 1e-300)
    terms = mu - y + np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0)
    return np.sign(y - mu) * np.sqrt(2 * np.maximum(terms, 0))


def deviance(mu, y):
    mu = np.maximum(mu, 1e-300)
    return 2 * np.sum(mu - y + np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0))


def free_vector(p, fixed, free_values):
    out = p.copy()
    out[~fixed] = free_values
    return out


def lbfgsb_best(cost, starts, lb, ub, scale):
    """scipy's L-BFGS-B in float64 on ``cost`` in units of ``scale``, from each start;
    the lowest end."""
    best = None
    for start in starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = so.minimize(lambda q: cost(q * scale), start / scale, method="L-BFGS-B",
                              bounds=list(zip(lb / scale, ub / scale)),
                              options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})  # fmt: skip
        if best is None or out.fun < best.fun:
            best = out
    return best.x * scale, best.fun


def jacobian(g, p, free):
    """The float64 central-difference Jacobian of ``g`` in the free entries of ``p``."""
    columns = []
    for j in np.flatnonzero(free):
        h = 1e-6 * max(abs(p[j]), 1e-12)
        up, down = p.copy(), p.copy()
        up[j] += h
        down[j] -= h
        columns.append((g(up) - g(down)) / (2 * h))
    return np.stack(columns, 1)


def poisson_reference(f, x, y, p0, fixed, popt, lb, ub):
    """The reference's parameters and deviance, and its standard errors (inverse Fisher)."""
    g = lambda p: numpy_of(f)(x, *p)
    free = ~fixed
    cost = lambda q: deviance(g(free_vector(p0, fixed, q)), y)
    scale = np.maximum(np.abs(p0[free]), 1e-3)
    inside = np.clip(popt[free], lb[free], ub[free])
    q, best = lbfgsb_best(cost, [p0[free], inside], lb[free], ub[free], scale)
    for start in (p0[free], inside):  # and scipy's trf on the signed deviance residuals
        residual = lambda v: deviance_residuals(g(free_vector(p0, fixed, v)), y)
        out = so.least_squares(residual, start, bounds=(lb[free], ub[free]), x_scale="jac",
                               ftol=1e-15, xtol=1e-15, gtol=1e-15, method="trf")  # fmt: skip
        if 2 * out.cost < best:
            q, best = out.x, 2 * out.cost
    p = free_vector(p0, fixed, q)
    jac = jacobian(g, p, free)
    fisher = jac.T @ (jac / np.maximum(g(p), 1e-300)[:, None])
    errors = np.full(p.shape, np.nan)
    with contextlib.suppress(np.linalg.LinAlgError):  # a Fisher matrix of NaN (0 counts)
        errors[free] = np.sqrt(np.abs(np.diag(np.linalg.pinv(fisher))))
    at_bound = (p <= lb) | (p >= ub)  # both answers there: no distance to count
    return p, best, np.where(at_bound | (errors == 0), np.nan, errors)


def small_step_descends(cost, p, fixed, lb, ub, relative=1e-6):
    """Whether a step of ``relative`` times an entry's size (at least 1e-6), in one free
    entry and either direction within the bounds, lowers ``cost`` by 1e-9 relative."""
    base = cost(p)
    for j in np.flatnonzero(~fixed):
        for sign in (-1.0, 1.0):
            q = p.copy()
            q[j] = np.clip(p[j] + sign * relative * max(abs(p[j]), 1.0), lb[j], ub[j])
            if q[j] != p[j] and cost(q) < base * (1 - 1e-9):
                return True
    return False


def poisson_audit(kind: str, rows: int):
    f, x, y, p0, fixed, (lb, ub) = poisson_case(kind, rows)
    _, _, res = fixedopt.curve_fit(f, x.astype(DTYPE), y.astype(DTYPE), p0.astype(DTYPE),
                                   fixed=fixed, bounds=(lb, ub), batched=True, result=True,
                                   estimator="poisson")  # fmt: skip
    popt = np.asarray(res.popt, float)
    report = Report(f"poisson {kind}", res.solution, popt, p0, fixed)
    for i in report.converged():
        p, best, errors = poisson_reference(f, x, y[i], p0[i], fixed[i], popt[i], lb, ub)
        cost = lambda p, i=i: deviance(numpy_of(f)(x, *p), y[i])
        gap = (cost(popt[i]) - best) / max(best, 1.0)
        descends = lambda i, cost=cost: small_step_descends(cost, popt[i], fixed[i], lb, ub)
        report.row(i, gap, distance(popt[i], p, errors), descends=descends)
    report.show()
    if len(sys.argv) > 3:  # save the descending rows' problems for tracing
        rows_ = np.array(report.descending, int)
        np.savez(sys.argv[3], rows=rows_, x=x, y=y[rows_], p0=p0[rows_], fixed=fixed[rows_],
                 lb=lb, ub=ub, popt=popt[rows_], reason=report.reason[rows_],
                 steps=report.steps[rows_])


class Report:
    """A case's statuses, reasons and the per-row comparisons of its CONVERGED rows."""

    def __init__(self, name, solution, values, p0, fixed):
        self.name, self.solution, self.values = name, solution, values
        self.status = np.asarray(solution.status)
        self.reason = np.asarray(solution.reason)
        self.steps = np.asarray(solution.steps)
        held = np.asarray(p0).astype(DTYPE).astype(float)
        self.fixed = np.asarray(fixed)
        self.fixed_exact = bool(np.all(np.where(fixed, values == held, True)))
        self.gaps, self.distances, self.flagged = [], [], []

    def converged(self):
        """The CONVERGED rows with a free entry (those to compare)."""
        compared = (self.status == fixedopt.Status.CONVERGED) & ~self.fixed.all(1)
        return np.flatnonzero(compared)

    def row(self, i, gap, distance, far=FAR_SE, descends=None):
        """Record row ``i``; past both thresholds, flag it (with ``descends(i)``: whether a
        step of 1e-6 relative in one free entry, within the bounds, still lowers the cost)."""
        self.gaps.append(gap)
        self.distances.append(distance)
        if gap > FAR_COST and distance > far:
            reason = fixedopt.Reason(int(self.reason[i])).name
            flagged = (int(i), reason, int(self.steps[i]), f"{gap:.3g}", f"{distance:.3g}")
            self.flagged.append((*flagged, "descends" if descends and descends(i) else ""))

    def show(self):
        statuses = collections.Counter(fixedopt.Status(int(s)).name for s in self.status)
        converged = self.status == fixedopt.Status.CONVERGED
        reasons = collections.Counter(fixedopt.Reason(int(r)).name for r in self.reason[converged])
        gaps, distances = np.array(self.gaps), np.array(self.distances)
        print(f"{self.name} {DTYPE}: {dict(statuses)} converged reasons {dict(reasons)}")
        print(f"   cost gap: max {gaps.max():.3g}, 99th pct {np.percentile(gaps, 99):.3g}, "
              f"median {np.median(gaps):.3g}; "
              f"distance: max {distances.max():.3g}, median {np.median(distances):.3g}; "
              f"past both thresholds {len(self.flagged)}; "
              f"fixed bit-identical {self.fixed_exact}")  # fmt: skip
        descending = sum(f[-1] == "descends" for f in self.flagged)
        print(
            f"   flagged rows where a small step still lowers the cost: {descending}; "
            f"at 0 steps: {sum(f[2] == 0 for f in self.flagged)}"
        )
        for flagged in [f for f in self.flagged if f[-1]]:
            print("   ", flagged)
        self.descending = [f[0] for f in self.flagged if f[-1]]
        sys.stdout.flush()


def model_case(rows: int):
    """Gaussian + Linear, 101 points, noise 1% of the peak; per-fit fixed values
    (``vary=False`` at the truth, 25%), ``sigma >= 0.5`` active in the narrow rows."""
    x = as_given(np.linspace(-10, 10, 101))
    scale = 10.0 ** RNG.uniform(-3, 3, rows)
    truth = {"amplitude": scale * RNG.uniform(2, 8, rows), "center": RNG.uniform(-3, 3, rows),
             "sigma": np.where(RNG.random(rows) < 0.15, 0.3, RNG.uniform(0.8, 2.5, rows)),
             "slope": scale * RNG.uniform(-0.05, 0.05, rows),
             "intercept": scale * RNG.uniform(0, 0.5, rows)}  # fmt: skip
    amplitude = truth["amplitude"] / (truth["sigma"] * np.sqrt(2 * np.pi))
    curve = amplitude[:, None] * np.exp(-0.5 * ((x - truth["center"][:, None])
                                                / truth["sigma"][:, None]) ** 2)  # fmt: skip
    curve += truth["slope"][:, None] * x + truth["intercept"][:, None]
    data = as_given(curve + 0.01 * (amplitude * RNG.normal(size=(x.size, rows))).T)
    start = {k: v * RNG.uniform(0.8, 1.25, rows) for k, v in truth.items()}
    start["center"] = truth["center"] + RNG.uniform(-0.5, 0.5, rows)
    start["sigma"] = np.maximum(start["sigma"], 0.6)
    fixed = {k: RNG.random(rows) < 0.25 for k in truth}
    values = {k: as_given(np.where(fixed[k], truth[k], start[k])) for k in truth}
    values["sigma"] = np.maximum(values["sigma"], 0.5)  # a fixed value inside its bound
    return x, data, values, fixed


def lmfit_reference(x, y, values, fixed, ours):
    """lmfit's fit of one row from the start and (tight) from fixedopt's answer: the one
    of lower chi-square, its chi-square and standard errors."""
    model = lmfit.models.GaussianModel() + lmfit.models.LinearModel()
    fits = []
    for start, options in ((values, {}), (ours, {"ftol": 1e-15, "xtol": 1e-15, "gtol": 1e-15})):
        params = model.make_params()
        for name in values:
            params[name].set(value=float(start[name]), vary=not fixed[name])
        params["sigma"].set(min=0.5)
        params["sigma"].set(value=max(params["sigma"].value, 0.5))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(model.fit(y, params, x=x, fit_kws=options))
    return min(fits, key=lambda fit: fit.chisqr)


def least_squares_errors(g, p, fixed, y, sigma_min):
    """curve_fit's standard errors at ``p`` (float64; NaN for fixed entries and for a
    ``sigma`` at its bound)."""
    free = ~fixed
    jac = jacobian(g, p, free)
    scale = np.sum((g(p) - y) ** 2) / (y.size - free.sum())
    errors = np.full(p.shape, np.nan)
    errors[free] = np.sqrt(np.abs(np.diag(np.linalg.pinv(jac.T @ jac))) * scale)
    errors[2] = np.nan if p[2] <= sigma_min else errors[2]
    return errors


def model_audit(rows: int):
    x, data, values, fixed = model_case(rows)
    model = GaussianModel() + LinearModel()
    params = model.make_params()
    for name in values:
        params[name].set(value=values[name].tolist(), vary=(~fixed[name]).tolist())
    params["sigma"].set(min=0.5)
    result = model.fit(data.astype(DTYPE), params, x=x.astype(DTYPE))
    names = list(values)
    got = np.stack([np.asarray(result.best_values[n], float) for n in names], 1)
    p0 = np.stack([values[n] for n in names], 1)
    report = Report("Model.fit gauss+linear", result.solution, got, p0,
                    np.stack([fixed[n] for n in names], 1))  # fmt: skip
    plain = lambda p: (p[0] / (p[2] * np.sqrt(2 * np.pi)) * np.exp(-0.5 * ((x - p[1]) / p[2]) ** 2)
                       + p[3] * x + p[4])  # fmt: skip
    for i in report.converged():
        row = lambda d, i=i: {n: d[n][i] for n in names}
        fit = lmfit_reference(x, data[i], row(values), row(fixed), dict(zip(names, got[i])))
        chisqr = np.sum((plain(got[i]) - data[i]) ** 2)
        reference = np.array([fit.params[n].value for n in names])
        errors = least_squares_errors(plain, reference, report.fixed[i], data[i], 0.5)
        report.row(i, (chisqr - fit.chisqr) / fit.chisqr, distance(got[i], reference, errors))
    report.show()


def quartic_case(rows: int, n: int = 6):
    """``f = z'Az/2 - b'z + sum(w z^4)/4`` with ``z = x / units``, units 1e-6..1e6 per
    entry, ``A``'s eigenvalues 1..1e3; an upper bound that cuts the minimum in some
    entries; 25% of the entries fixed at the start."""
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


def quartic_gradient_hessian(x, a, b, w, units):
    """The float64 gradient and Hessian in ``x``."""
    z = x / units
    grad = (a @ z - b + w * z**3) / units
    hess = (a + np.diag(3 * w * z**2)) / np.outer(units, units)
    return grad, hess


def quartic_row(x, args, x0, fixed, lb, ub, claimed):
    """The relative cost gap to scipy, and the gradient test measured with the exact
    Hessian on the free entries off their bounds, ``sqrt(g'H^-1 g / (2|f|))``, in units
    of the tolerance the row claims."""
    lo, hi = np.where(fixed, x0, lb), np.where(fixed, x0, ub)
    cost = lambda v: quartic_np(v, *args)
    _, best = lbfgsb_best(cost, [x0, np.clip(x, lo, hi)], lo, hi, args[3])
    ours = cost(x)
    grad, hess = quartic_gradient_hessian(x, *args)
    active = fixed | ((x <= lb) & (grad > 0)) | ((x >= ub) & (grad < 0))
    g, h = grad[~active], hess[np.ix_(~active, ~active)]
    test = np.sqrt(abs(g @ np.linalg.solve(h, g)) / (2 * abs(ours))) if g.size else 0.0
    return (ours - best) / abs(best), test / claimed


def quartic_audit(rows: int):
    args, x0, fixed, (lb, ub) = quartic_case(rows)
    given = tuple(np.asarray(v, DTYPE) for v in args)
    solution = fixedopt.minimize(quartic, x0.astype(DTYPE), fixed, bounds=(lb, ub), args=given,
                                 batched=True)  # fmt: skip
    x = np.asarray(solution.x, float)
    report = Report("minimize quad+quartic", solution, x, x0, fixed)
    claimed = np.sqrt(np.finfo(DTYPE).eps)
    for i in report.converged():
        row_args = tuple(v[i] for v in args)
        gap, test = quartic_row(x[i], row_args, x0[i], fixed[i], lb[i], ub[i], claimed)
        report.row(i, gap, test, far=10.0)
    report.show()


if __name__ == "__main__":
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    poisson_case("decay", count)  # the peak's data follow the decay's from one generator
    poisson_audit("peak", count)
