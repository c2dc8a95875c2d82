"""Per-row statuses/steps of the status_truth L-BFGS families (minimize auto, hessian, MGH LBFGS), appended as JSON lines."""
import json, math, os, sys, tempfile
os.environ.setdefault("FIXEDOPT_CACHE", tempfile.mkdtemp())
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, scipy.optimize
import fixedopt
from fixedopt import testing_problems as known
from benchmarks import status_truth
out = open(sys.argv[1], "a")
dtypes = (np.float32, np.float64)
for part in sys.argv[2:]:
    if part in ("auto", "hessian"):
        solver = None if part == "auto" else fixedopt.LBFGS(scaling="hessian")
        for name, problem in known.MINIMIZE.items():
            for r in status_truth.minimize_cases({name: problem}, dtypes, solver):
                out.write(json.dumps({k: r[k] for k in ("kind", "scaling", "problem", "start", "dtype", "scale", "status", "steps", "accurate", "truthful")}) + "\n")
            out.flush()
            jax.clear_caches()
    elif part == "mgh":
        for name, problem in known.LEAST_SQUARES.items():
            fun = lambda z, problem=problem: np.asarray(problem.residuals(jnp.asarray(z)))
            minima = [scipy.optimize.least_squares(fun, np.asarray(x, float), **status_truth.TIGHT).x for x, _ in problem.minima]
            for dtype in dtypes:
                x0 = jnp.asarray(problem.start, dtype)
                s = fixedopt.least_squares(problem.residuals, x0, jnp.zeros(x0.shape, bool), solver=fixedopt.LBFGS(), max_steps=2000)
                error = min(known.relative_error(np.asarray(s.x, float), m) for m in minima)
                accurate = bool(error <= 100 * math.sqrt(float(np.finfo(dtype).eps)))
                out.write(json.dumps({"kind": "truth", "solver": "LBFGS", "problem": name, "dtype": np.dtype(dtype).name,
                                      "status": status_truth.status_names(s)[0], "steps": int(s.steps), "accurate": accurate,
                                      "truthful": accurate == bool(s.converged)}) + "\n")
            out.flush()
            jax.clear_caches()
