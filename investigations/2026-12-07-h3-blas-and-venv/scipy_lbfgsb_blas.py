"""CPU time of scipy's L-BFGS-B per evaluation on an MGH reference row, as the tests
call it (tests/helpers.py): run from the checkout's root, once as it is and once with
OPENBLAS_NUM_THREADS=1, and compare "cpu per eval"."""

import sys
import time

sys.path.insert(0, ".")
import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

from tests.helpers import MGH, SCIPY_OPTIONS, heterogeneous_masks  # noqa: E402

name = "extended_rosenbrock"
fun, standard = MGH[name]
rng = np.random.default_rng(sum(map(ord, name)))
x0 = standard + 0.1 * rng.normal(size=(32, standard.size))
fixed = heterogeneous_masks(rng, 32, standard.size)
value_and_grad = jax.jit(jax.value_and_grad(fun))
value_and_grad(x0[0])
count = [0]


def evaluate(z):
    count[0] += 1
    value, grad = value_and_grad(z)
    return float(value), np.asarray(grad, np.float64)


start = time.process_time()
for b in range(4):
    lower, upper = np.full(standard.size, -np.inf), np.full(standard.size, np.inf)
    lower[fixed[b]] = upper[fixed[b]] = x0[b][fixed[b]]
    bounds = [(lo if np.isfinite(lo) else None, hi if np.isfinite(hi) else None)
              for lo, hi in zip(lower, upper)]  # fmt: skip
    scipy.optimize.minimize(evaluate, x0[b], jac=True, method="L-BFGS-B", bounds=bounds,
                            options=SCIPY_OPTIONS)  # fmt: skip
print("evaluations", count[0], "cpu per eval us", 1e6 * (time.process_time() - start) / count[0])
start = time.process_time()
for _ in range(2000):
    evaluate(x0[5])
print("the evaluation alone, us", 1e6 * (time.process_time() - start) / 2000)
