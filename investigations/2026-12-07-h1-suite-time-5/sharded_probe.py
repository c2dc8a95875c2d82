import os, sys, time, resource
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
t0 = cpu()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt.testing import no_compiles_ahead, compiled_solves
from tests.helpers import quadratic, quadratic_rows
import contextlib
ctx = no_compiles_ahead() if os.environ.get("NOAHEAD") else contextlib.nullcontext()
jax.config.update("jax_disable_most_optimizations", bool(os.environ.get("FEWER")))
print("import", round(cpu() - t0, 2))
with ctx:
    x0, fixed, args = quadratic_rows(size=64)
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    rows = NamedSharding(mesh, P("batch"))
    put = lambda a: jax.device_put(a, rows)
    @jax.jit
    def solve(x0, fixed, curvature, center):
        return fixedopt.minimize(quadratic, x0, fixed, args=(curvature, center), batched=True)
    t = cpu(); sharded = solve(put(x0), put(fixed), *map(put, args)); sharded.x.block_until_ready(); print("jit sharded", round(cpu() - t, 2))
    t = cpu(); reference = fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True); reference.x.block_until_ready(); print("reference", round(cpu() - t, 2), compiled_solves())
    per_device = jax.jit(jax.shard_map(
        lambda x0, fixed, curvature, center: fixedopt.minimize(
            quadratic, x0, fixed, args=(curvature, center), batched=True, lanes=4),
        mesh=mesh, in_specs=P("batch"), out_specs=P("batch"), check_vma=False))
    t = cpu(); mapped = per_device(put(x0), put(fixed), *map(put, args)); mapped.x.block_until_ready(); print("shard_map", round(cpu() - t, 2))
    np.testing.assert_allclose(sharded.x, reference.x, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(mapped.x, reference.x, rtol=1e-10, atol=1e-10)
from fixedopt.testing import wait_for_compiles_ahead
wait_for_compiles_ahead()
print("total", round(cpu() - t0, 2))
