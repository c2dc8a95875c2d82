"""The three solves of test_certify's precision-verdict test, and other lanes, one at a
time (process CPU s, a fresh process, FIXEDOPT_CACHE=0). Args: the configurations."""
import os, time, dataclasses
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt import testing_problems
from fixedopt.testing import no_compiles_ahead

@dataclasses.dataclass(frozen=True)
class NothingLeft(fixedopt.LBFGS):
    def certify(self, problem, x, value, grad, state):
        return fixedopt.Certificate(jnp.zeros((), value.dtype), jnp.zeros_like(x), state)

t=time.process_time()
problem = testing_problems.quad(100_000, 8)
rows = [10246, 18372, 1261, 4479, 4975, *range(300)]
args = tuple(jnp.asarray(a[rows]) for a in problem.args)
print("problem", time.process_time()-t)
import sys
configs = {"nl253": (NothingLeft(), 253), "lb253": (fixedopt.LBFGS(), 253), "lb8": (fixedopt.LBFGS(), 8),
           "nl8": (NothingLeft(), 8), "lb64": (fixedopt.LBFGS(), 64), "lbdef": (fixedopt.LBFGS(), None)}
with no_compiles_ahead():
  for name in sys.argv[1:]:
    solver, lanes = configs[name]
    t=time.process_time()
    s = fixedopt.minimize(problem.jax_fun, jnp.asarray(problem.x0[rows]), jnp.asarray(problem.fixed[rows]), args=args, batched=True, args_axes=0, solver=solver, lanes=lanes)
    jax.block_until_ready(s)
    print(name, round(time.process_time()-t,2), bool(jnp.all(s.converged)), int(jnp.max(s.steps)))
