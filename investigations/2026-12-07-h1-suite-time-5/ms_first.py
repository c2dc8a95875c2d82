import time, resource
t0 = time.perf_counter(); c0 = time.process_time()
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt.testing import no_compiles_ahead
T = jnp.linspace(0.0, 4.0, 9)
y = jnp.stack([5.0 * jnp.exp(-1.5 * T), 2.0 * jnp.exp(-0.5 * T), 3.0 * jnp.exp(-2.0 * T)])
decay = lambda p, y: p[0] * jnp.exp(-p[1] * T) - y
x0 = jnp.array([[1.0, -3.0], [2.0, -1.0], [3.0, 1.0]])
t1 = time.perf_counter(); c1 = time.process_time()
with no_compiles_ahead():
    best = fixedopt.multistart(fixedopt.least_squares, decay, x0, False, args=(y,), batched=True, starts=5)
    best.x.block_until_ready()
print(f"first call {time.perf_counter()-t1:.2f} s wall, {time.process_time()-c1:.2f} s CPU")
