import time, jax, numpy as np, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt.testing import no_compiles_ahead
from fixedopt.testing_problems import quad
c=[0]
jax.monitoring.register_event_duration_secs_listener(lambda e,*a,**k: c.__setitem__(0,c[0]+(e=="/jax/core/compile/backend_compile_duration")))
with no_compiles_ahead():
    problem = quad(256, 64, 0, "float32")
    x0, fixed, *args = (jnp.asarray(a) for a in (problem.x0, problem.fixed, *problem.args))
    args=tuple(a.astype(np.float32) for a in args)
    tol = {"abs_gtol": 1e-4, "gtol": 0.0, "ftol": 0.0, "xtol": 0.0}
    sol = fixedopt.minimize(problem.jax_fun, x0.astype(np.float32), fixed, args=args, batched=True, max_steps=2000, **tol)
    rng = np.random.default_rng(3)
    batch, n = 256, 64
    scale = np.exp(rng.uniform(-3, 3, size=(batch, n)))
    target = rng.normal(size=(batch, n))
    fx = rng.random((batch, n)) < 0.3
    lap = np.zeros((batch, n)); lap[:,1:]+=0.2; lap[:,:-1]+=0.2
    diag = scale + lap; off = np.full((batch, n-1), -0.2); b = scale*target
    a2 = tuple(jnp.asarray(a, np.float32) for a in (diag, off, b))
    t=time.process_time(); p=c[0]
    s = fixedopt.minimize(problem.jax_fun, jnp.zeros((batch,n),np.float32), jnp.asarray(fx), args=a2, batched=True, max_steps=2000)
    print("stag", np.unique(np.asarray(s.status), return_counts=True), int(s.steps.max()), c[0]-p, round(time.process_time()-t,1))
    def fun(x, scale, target):
        return 0.5 * jnp.sum(scale * (x - target) ** 2) + 0.1 * jnp.sum(jnp.diff(x) ** 2)
    s2 = fixedopt.minimize(fun, jnp.zeros((batch,n),np.float32), jnp.asarray(fx), args=(jnp.asarray(scale,np.float32), jnp.asarray(target,np.float32)), batched=True, max_steps=2000)
    print("orig-form", np.unique(np.asarray(s2.status), return_counts=True), int(s2.steps.max()), float(np.max(np.abs(s2.x-s.x))))
