"""test_lanes' refill-cost rule tried on gradient descent (the slow-row test's program)."""
import time, sys, io, contextlib
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
import fixedopt
from fixedopt.testing import no_compiles_ahead
from tests.driver.test_lanes import batch_with_stragglers, solve
from tests.helpers import assert_rows_identical, quadratic_rows

def trips_of(fn):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        sol = fn(); jax.block_until_ready(sol); jax.effects_barrier()
    lines = buf.getvalue().splitlines()
    return sol, max(int(l.split()[2].rstrip(":")) for l in lines if l.startswith("fixedopt: step"))

with no_compiles_ahead():
    t = time.process_time()
    x0, fixed, args = batch_with_stragglers(batch=400)
    gd = fixedopt.GradientDescent()
    dear, dt = trips_of(lambda: solve(x0, fixed, args, lanes=50, solver=gd, progress=1))
    print("dear", dt, time.process_time() - t, flush=True)
    fixedopt.GradientDescent.evaluations_per_step = 4.0
    jax.clear_caches()
    t = time.process_time()
    cheap, ct = trips_of(lambda: solve(x0, fixed, args, lanes=50, solver=fixedopt.GradientDescent(), progress=1))
    print("cheap", ct, time.process_time() - t, ct / dt, flush=True)
    assert_rows_identical(cheap, dear)
    print("bits ok")
    fixedopt.GradientDescent.evaluations_per_step = 1.0
    jax.clear_caches()
    t = time.process_time()
    x0, fixed, args = quadratic_rows(size=512, n=8)
    c, c1 = trips_of(lambda: solve(x0, fixed, args, lanes=64, progress=1))
    print("lbfgs cheap", c1, time.process_time() - t, flush=True)
