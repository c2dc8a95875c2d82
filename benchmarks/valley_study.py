"""Study (issue 59): can a first-order or Gauss-Newton test stop the float32
bi-exponential voxels 16 and 106 (Levenberg-Marquardt, CONVERGED (GTOL) 4.4e-4 of the
cost above the minimum; allowed 3.45e-4) without the loop's second derivatives?

Prints, for the status_truth family (256 rows, float32): truthful rows, false CONVERGED
and steps with the defaults and with ``gtol=0`` (no cosine test), and per CONVERGED row
at its returned point (float64): MINPACK's cosine, the Gauss-Newton decrement
``g.(J^T J)^-1 g / 2`` and the undamped step's ``|D s| / |D x|``, the gap to scipy's
minimum (all relative to the cost). Run: ``python -m benchmarks.valley_study``."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import status_families as sf  # noqa: E402


def solve(options):
    starts, (lower, upper), data = sf.biexponential_data(256)
    f32 = lambda a: jnp.asarray(a, jnp.float32)
    sol = fixedopt.least_squares(sf.biexponential, f32(starts), False, args=(f32(data),),
                                 batched=True, args_axes=(0,), bounds=(f32(lower), f32(upper)),
                                 **options)  # fmt: skip
    rows = []
    for i in range(256):
        d = jnp.asarray(data[i])
        fun = lambda z, d=d: np.asarray(sf.biexponential(jnp.asarray(z), d))
        x = np.asarray(sol.x[i], float)
        ref = sf._reference(fun, np.clip(x, lower, upper), lower, upper)
        accurate = sf.judge(fun, starts[i], x, ref, np.float32)
        jac = np.asarray(jax.jacfwd(lambda z, d=d: sf.biexponential(z, d))(jnp.asarray(x)))
        r = fun(x)
        g, normal, f = jac.T @ r, jac.T @ jac, 0.5 * r @ r
        free = ~(((x <= lower) & (g > 0)) | ((x >= upper) & (g < 0))) & (np.diag(normal) > 0)
        nf, gf = normal[np.ix_(free, free)], g[free]
        step = np.linalg.solve(nf, -gf)
        d2 = np.sqrt(np.diag(nf))
        cos = np.max(np.abs(gf) / d2 / np.linalg.norm(r))
        best = min(0.5 * np.sum(fun(ref) ** 2), f)
        rows.append(
            (
                i,
                fixedopt.Reason(int(sol.reason[i])).name,
                bool(sol.converged[i]),
                int(sol.steps[i]),
                accurate,
                cos,
                -0.5 * gf @ step / f,
                np.linalg.norm(d2 * step) / np.linalg.norm(d2 * x[free]),
                (f - best) / best,
            )
        )
    return rows


if __name__ == "__main__":
    for options in ({}, {"gtol": 0.0}):
        rows = solve(options)
        false = [r[0] for r in rows if r[2] and not r[4]]
        print(options, "truthful", sum(r[2] == r[4] for r in rows), "false CONVERGED", false,
              "steps", sum(r[3] for r in rows))  # fmt: skip
        if not options:
            print("row reason steps accurate cosine gn_decrement gn_step gap")
            for r in sorted(rows, key=lambda r: -r[6])[:16]:
                print(r[0], r[1], r[3], r[4], *(f"{v:.2e}" for v in r[5:]))
