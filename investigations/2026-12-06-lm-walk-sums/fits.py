"""Final x/status/steps/reason of: decay (LM, GN; also in units of 1e-20), Gpufit (LM, GN),
200 bi-exponential voxels (LM, GN; float32, float64, bounds). usage (from a tree, tests
importing): PYTHONPATH=. python fits.py OUT.npz"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import fixedopt  # noqa: E402
from fixedopt.testing_problems import FIT_MODELS, decay_fits, gaussian_fits  # noqa: E402

sys.path.insert(0, "tests/solvers")
from test_biexponential_verdicts import DATA, LOWER, UPPER, biexponential  # noqa: E402

out = {}


def put(name, sol):
    for k in ("x", "status", "steps", "reason"):
        out[f"{name}_{k}"] = np.asarray(getattr(sol, k))


GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}
for fits, options, size in ((gaussian_fits, GPUFIT, 20_000), (decay_fits, {}, 4_000)):
    fits = fits(size)
    model = FIT_MODELS[fits.name][0]
    for solver in (fixedopt.LevenbergMarquardt(), fixedopt.GaussNewton()):
        for scale in (1.0, 1e-20):
            if scale != 1.0 and fits.name == "gaussian":
                continue
            res = lambda p, data, model=model, scale=scale: (model(p) - data) * scale
            sol = fixedopt.least_squares(
                res,
                jnp.asarray(fits.x0),
                jnp.asarray(fits.fixed),
                args=(jnp.asarray(fits.data),),
                batched=True,
                solver=solver,
                **options,
            )
            put(f"{fits.name}_{type(solver).__name__}_{scale}", sol)
rng = np.random.default_rng(0)
data = np.concatenate(
    [
        DATA,
        DATA[rng.integers(0, 3, 200)] * rng.uniform(0.8, 1.2, (200, 1))
        + rng.normal(0, 10, (200, 32)),
    ]
)
starts = np.stack(
    [data[:, 0], np.full(len(data), 0.5), np.full(len(data), 20.0), np.full(len(data), 500.0)], 1
)
for dt in (jnp.float32, jnp.float64):
    sol = fixedopt.least_squares(
        biexponential,
        jnp.asarray(starts, dt),
        False,
        args=(jnp.asarray(data, dt),),
        batched=True,
        bounds=(jnp.asarray(LOWER, dt), jnp.asarray(UPPER, dt)),
    )
    put(f"biexp_{jnp.dtype(dt).name}", sol)
    sol = fixedopt.least_squares(
        biexponential,
        jnp.asarray(starts, dt),
        False,
        args=(jnp.asarray(data, dt),),
        batched=True,
        bounds=(jnp.asarray(LOWER, dt), jnp.asarray(UPPER, dt)),
        solver=fixedopt.GaussNewton(),
    )
    put(f"biexp_gn_{jnp.dtype(dt).name}", sol)
np.savez(sys.argv[1], **out)
print(sorted({k.rsplit("_", 1)[0] for k in out}))
# compare two dumps: python -c "import numpy as np; a, b = np.load(A), np.load(B); ..."
