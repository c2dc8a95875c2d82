
import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import scipy.optimize as so

import fixedopt
from benchmarks.curve_fit import BINS, decay, decay_numpy, decays

truth, data, sigma, fixed, start = decays(12, seed=3)
rows = []
for b in range(12):
    for s in (None, sigma[b]):
        sp = so.curve_fit(decay_numpy, BINS, data[b], p0=start[b], sigma=s)[0]
        ours = np.asarray(fixedopt.curve_fit(decay, BINS, data[b], p0=start[b], sigma=s)[0])
        w = 1.0 if s is None else s
        def jac(p, w=w):
            e1, e2 = np.exp(-BINS / p[1]), np.exp(-BINS / p[3])
            J = np.stack([e1, p[0] * BINS / p[1]**2 * e1, e2, p[2] * BINS / p[3]**2 * e2, np.ones_like(BINS)], -1)
            return J / np.asarray(w)[..., None] if np.ndim(w) else J
        ref = so.least_squares(lambda p: (decay_numpy(BINS, *p) - data[b]) / w, sp, jac=jac, xtol=1e-15, ftol=1e-15, gtol=1e-15, method="lm").x
        rows.append((s is None, np.max(abs(ours/sp-1)), np.max(abs(ours/ref-1)), np.max(abs(sp/ref-1))))
r = np.array(rows, float)
for flag in (1.0, 0.0):
    m = r[r[:,0]==flag]
    print("no sigma" if flag else "sigma", "median/max ours-scipy", np.median(m[:,1]), m[:,1].max(), "ours-ref", np.median(m[:,2]), m[:,2].max(), "scipy-ref", np.median(m[:,3]), m[:,3].max())
