"""How far the covariance from the float32 solver's own J^T J (summed in float32) is from
the one from the Jacobian evaluated again and summed in float64, per case: relative
errors of the covariance entries (to sqrt(var_i var_j)) and cond of the unit-column G.
Run: PYTHONPATH=. python investigations/2026-12-06-h6-covariance32/accuracy.py"""

import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, "investigations/2026-12-06-h6-covariance32")
import share  # noqa: E402
from fixedopt._results import solver_covariance  # noqa: E402
from fixedopt._results.row_covariance import Rule  # noqa: E402

CAPTURED = []
_original = solver_covariance.fit_covariance


def _capture(solution, *args, **kwargs):
    CAPTURED.append((solution, args, kwargs))
    return _original(solution._replace(normal=None), *args, **kwargs)


def main() -> None:
    solver_covariance.fit_covariance = _capture
    solver_covariance.pays = lambda dtype, n: n <= 8
    for label, make in (("decay", lambda: share.decay_case(10_000)),
                        ("spectra", lambda: share.spectra_case(2_000)),
                        ("gpufit", lambda: share.gpufit_case(100_000))):
        _, pcov = share.ours(make(), jnp.float32)()
        solution, args, kwargs = CAPTURED[-1]
        normal = np.asarray(solution.normal, float)
        d = np.sqrt(np.einsum("bii->bi", normal))
        d = np.where(d > 0, d, 1.0)
        unit = normal / d[:, :, None] / d[:, None, :]
        cond = np.linalg.cond(unit)
        rule = Rule(kwargs["absolute_sigma"], kwargs["at_bound"] == "fixed", kwargs["pseudo_inverse"])
        shape = solver_covariance._residual_shape(args[0], solver_covariance._avals((solution.x[:1], kwargs["args"])), None) if False else None
        ref = np.asarray(pcov, float)
        # the solver's float32 matrix through the normal path's arithmetic
        m = np.asarray(kwargs["args"][1]).shape[-1] if np.ndim(kwargs["args"][1]) else 0
        found, certified = solver_covariance._from_normal(rule, solution, (np.asarray(kwargs["args"][1]).shape[-1],), kwargs["sigma"])
        ours = np.asarray(found.covariance, float)
        scale = np.sqrt(np.abs(np.einsum("bii,bjj->bij", ref, ref)))
        ok = np.isfinite(ref).all(axis=(1, 2)) & (scale > 0).all(axis=(1, 2)) | False
        rel = np.abs(ours - ref) / np.where(scale > 0, scale, np.inf)
        worst = np.nanmax(rel.reshape(len(rel), -1), axis=1)
        finite = np.isfinite(worst)
        q = np.quantile(worst[finite], [0.5, 0.9, 0.99, 1.0])
        print(f"{label}: cond(G unit) median {np.median(cond):.3g} 90% {np.quantile(cond, 0.9):.3g} max {cond.max():.3g}; "
              f"certified now {np.mean(np.asarray(certified)):.3f}; worst rel error per row quantiles 50/90/99/100%: "
              + " ".join(f"{v:.2e}" for v in q))


if __name__ == "__main__" and len(sys.argv) == 1:
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()


def bounds() -> None:
    """Per row, the first-order error bound of the unit-column inverse from float32 sums,
    |E_kl| <= g a_k a_l (a: column absolute sums of G^-1 on the free block; |J_i|^T|J_j|
    <= 1), relative to sqrt(inv_kk inv_ll): g = m u (rigorous) or lambda sqrt(m) u
    (Higham & Mary 2019, lambda = 7); the fraction of rows within sqrt(eps) / 16."""
    solver_covariance.fit_covariance = _capture
    solver_covariance.pays = lambda dtype, n: n <= 8
    u, target = 2.0**-24, np.sqrt(np.finfo(np.float32).eps) / 16
    for label, make, m in (("decay", lambda: share.decay_case(10_000), 128),
                           ("spectra", lambda: share.spectra_case(2_000), 301),
                           ("gpufit", lambda: share.gpufit_case(100_000), 25)):
        share.ours(make(), jnp.float32)()
        solution = CAPTURED[-1][0]
        normal = np.asarray(solution.normal, float)
        free = ~np.asarray(solution.fixed) & (np.einsum("bii->bi", normal) > 0)
        worst = []
        for g, f in zip(normal, free):
            block = g[np.ix_(f, f)]
            d = np.sqrt(np.diag(block))
            inv = np.linalg.inv(block / d[:, None] / d[None, :])
            a = np.abs(inv).sum(axis=0)
            worst.append(np.max(a**2 / np.diag(inv)))
        worst = np.asarray(worst)
        for name, g in (("rigorous m u", m * u), ("probabilistic 7 sqrt(m) u", 7 * np.sqrt(m) * u)):
            found = g * worst
            print(f"{label} {name}: bound quantiles 50/90% {np.quantile(found, 0.5):.2e} "
                  f"{np.quantile(found, 0.9):.2e}; rows within {target:.2e}: {np.mean(found <= target):.3f}")


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "bounds":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    bounds()
