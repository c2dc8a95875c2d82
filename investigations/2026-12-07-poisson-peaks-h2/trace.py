"""Per flagged row of verdict_peaks.py (its saved npz): the float64 measures at
fixedopt's answer: deviance, the cosine per free entry with the Fisher columns and
|r| = sqrt(deviance), the bounds, the best 1e-6 step's relative drop, and the share
of the cost a coordinate Newton step (the true curvature) removes:

    PYTHONPATH=. .venv/bin/python <this dir>/trace.py rows.npz
"""

import sys

import numpy as np

data = np.load(sys.argv[1])
x = data["x"]


def model(p):
    a, mu, s, c = p
    return a * np.exp(-0.5 * ((x - mu) / s) ** 2) + c


def half_deviance(p, y):
    mu = np.maximum(model(p), 1e-300)
    return np.sum(mu - y + np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0))


def columns(p):
    """d mu / d p, analytic."""
    a, mu, s, _ = p
    e = np.exp(-0.5 * ((x - mu) / s) ** 2)
    return np.stack([e, a * e * (x - mu) / s**2, a * e * (x - mu) ** 2 / s**3, np.ones_like(x)], 1)


def row(k):
    p, y, fixed = data["popt"][k], data["y"][k], data["fixed"][k]
    lb, ub = data["lb"], data["ub"]
    mu = model(p)
    f = half_deviance(p, y)
    jm = columns(p)
    grad = jm.T @ (1 - y / mu)
    fisher = np.sum(jm**2 / mu[:, None], 0)
    names = ["a", "mu", "s", "c"]
    print(f"row {data['rows'][k]} reason {data['reason'][k]} steps {data['steps'][k]} "
          f"f {f:.6g} p {np.array2string(p, precision=6)} min mu {mu.min():.3g}")
    for j in np.flatnonzero(~fixed):
        cos = abs(grad[j]) / np.sqrt(fisher[j] * 2 * f)
        h = 1e-6 * max(abs(p[j]), 1.0)
        drops = []
        for sign in (-1, 1):
            q = p.copy()
            q[j] = np.clip(p[j] + sign * h, lb[j], ub[j])
            drops.append((f - half_deviance(q, y)) / f if q[j] != p[j] else 0.0)
        hh = 1e-4 * max(abs(p[j]), 1.0)
        up, dn = p.copy(), p.copy()
        up[j] += hh
        dn[j] -= hh
        curv = (half_deviance(up, y) - 2 * f + half_deviance(dn, y)) / hh**2
        newton = grad[j] ** 2 / (2 * curv) / f if curv > 0 else np.inf
        bound = "lb" if p[j] <= lb[j] else "ub" if p[j] >= ub[j] else ""
        print(f"   {names[j]}: g {grad[j]:.3g} cos {cos:.3g} fisher {fisher[j]:.3g} "
              f"curv {curv:.3g} newton share {newton:.3g} drop1e-6 {max(drops):.3g} {bound}")


for k in range(len(data["rows"])):
    row(k)


def measures(k, tol):
    """fixedopt's three tests, recomputed in float64 at the answer with ``D^2`` the
    Fisher diagonal there (fixedopt's is its running maximum): the box-cut cosine over
    the free entries against ``gtol``, the Gauss-Newton step's ``|D s| / |D x|`` (and
    without the centre) against ``xtol``, and the model's predicted share of ``f``."""
    p, y, fixed = data["popt"][k], data["y"][k], data["fixed"][k]
    lb, ub = data["lb"], data["ub"]
    mu = model(p)
    f = half_deviance(p, y)
    jm = columns(p) / np.sqrt(mu)[:, None]
    grad = jm.T @ ((mu - y) / np.sqrt(mu))
    fisher = jm.T @ jm
    held = fixed | ((p <= lb) & (grad > 0)) | ((p >= ub) & (grad < 0))
    free = ~held
    cos = np.zeros(4)
    for j in np.flatnonzero(free):
        step = -grad[j] / fisher[j, j]
        room = (lb[j] - p[j]) if step < 0 else (ub[j] - p[j])
        q = min(1.0, room / step) if step != 0 else 1.0
        cos[j] = abs(grad[j]) / np.sqrt(fisher[j, j] * 2 * f) * np.sqrt(q * (2 - q))
    block = np.ix_(free, free)
    s = np.zeros(4)
    s[free] = np.linalg.lstsq(fisher[block], -grad[free], rcond=None)[0]
    d = np.sqrt(np.diag(fisher))
    dx = np.where(fixed, 0.0, d * p)
    relative = np.linalg.norm(d * s) / np.linalg.norm(dx)
    no_centre = np.linalg.norm(d * s) / np.linalg.norm(np.delete(dx, 1))
    predicted = -(grad @ s + 0.5 * s @ fisher @ s) / f
    centre = "held" if held[1] and not fixed[1] else ("fixed" if fixed[1] else "free")
    print(f"   row {data['rows'][k]}: cosine {cos.max():.2g} (gtol {tol:.2g}), |Ds|/|Dx| "
          f"{relative:.2g} (xtol {tol:.2g}; without the centre {no_centre:.2g}), predicted "
          f"share {predicted:.2g}; centre {centre} at {p[1]:.6g}, held entries "
          f"{np.flatnonzero(held & ~fixed).tolist()}")


tolerance = float(sys.argv[2]) if len(sys.argv) > 2 else np.sqrt(np.finfo(np.float64).eps)
for k in range(len(data["rows"])):
    measures(k, tolerance)


def distance_to_minimum(k):
    """``|D (x* - x)| / |D x|`` (``D^2`` the Fisher diagonal at ``x``, over free entries)
    from fixedopt's answer ``x`` to the nearest minimum ``x*`` (scipy's L-BFGS-B from
    ``x``, float64, tight), and the cost's share left: what xtol's claim is about."""
    import scipy.optimize as so

    p, y, fixed = data["popt"][k], data["y"][k], data["fixed"][k]
    lb, ub, free = data["lb"], data["ub"], ~fixed
    scale = np.maximum(np.abs(p[free]), 1e-3)

    def cost(q):
        full = p.copy()
        full[free] = q * scale
        return half_deviance(full, y)

    out = so.minimize(cost, p[free] / scale, method="L-BFGS-B",
                      bounds=list(zip(lb[free] / scale, ub[free] / scale)),
                      options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})  # fmt: skip
    best = p.copy()
    best[free] = out.x * scale
    mu = model(p)
    d = np.sqrt(np.sum(columns(p) ** 2 / mu[:, None], 0))
    dx = np.where(fixed, 0.0, d * p)
    moved = np.linalg.norm(d * (best - p)) / np.linalg.norm(dx)
    f = half_deviance(p, y)
    print(f"   row {data['rows'][k]}: to the nearest minimum |D dx|/|D x| {moved:.2g}, "
          f"cost left {(f - out.fun) / f:.2g} of f, there {np.array2string(best, precision=6)}")


for k in range(len(data["rows"])):
    distance_to_minimum(k)
