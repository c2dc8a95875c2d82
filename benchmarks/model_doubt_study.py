"""Study (issue 59): at the float32 bi-exponential rows 16, 106, 158 as a checkout
returns them, the Gauss-Newton decrement, the true Hessian's and MINPACK's cosine
(float64). ``python benchmarks/model_doubt_study.py PATH_TO_CHECKOUT``."""
import sys, jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, sys.argv[1])  # the checkout studied (main before the change)
import fixedopt
sys.path.insert(0, ".")
from tests.solvers.test_biexponential_verdicts import DATA, LOWER, UPPER, biexponential
starts = np.stack([DATA[:, 0], np.full(3, 0.5), np.full(3, 20.0), np.full(3, 500.0)], 1)
sol = fixedopt.least_squares(biexponential, jnp.asarray(starts, jnp.float32), False,
        args=(jnp.asarray(DATA, jnp.float32),), batched=True,
        bounds=(jnp.asarray(LOWER, jnp.float32), jnp.asarray(UPPER, jnp.float32)))
print(fixedopt.__file__, sol.status, sol.reason, sol.steps)
for row in range(3):
    x = np.asarray(sol.x[row], np.float64); d = DATA[row]
    r = lambda p: biexponential(p, d)
    f = lambda p: 0.5*jnp.sum(r(p)**2)
    J = np.asarray(jax.jacfwd(r)(x)); g = np.asarray(jax.grad(f)(x)); H = np.asarray(jax.hessian(f)(x))
    free = (x > LOWER + 1e-9) & (x < UPPER - 1e-9)
    Jf, gf, Hf = J[:, free], g[free], H[np.ix_(free, free)]
    s = 1/np.sqrt(np.diag(Hf))
    gn = gf @ np.linalg.solve(Jf.T @ Jf, gf); tr = gf @ np.linalg.solve(Hf, gf)
    cos = np.max(np.abs(Jf.T @ np.asarray(r(x))) / (np.linalg.norm(Jf, axis=0) * np.linalg.norm(r(x))))
    print(row, "free", free, "cost", float(f(x)), "GN dec/cost", gn/float(f(x)), "true dec/cost", tr/float(f(x)), "cos", cos, "eig", np.linalg.eigvalsh(s[:,None]*Hf*s[None]))
