import time, jax, numpy as np, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
from fixedopt.testing_problems import decay, decay_batch, hyperbola, hyperbola_batch, reference_fits
c=[0]
jax.monitoring.register_event_duration_secs_listener(lambda e,*a,**k: c.__setitem__(0,c[0]+(e=="/jax/core/compile/backend_compile_duration")))
for model, batch in ((hyperbola, hyperbola_batch), (decay, decay_batch)):
    x0, fixed, y = batch()
    for f in (model, jax.jit(model)):
        t=time.process_time(); p=c[0]
        r = reference_fits(x0, fixed, y, f)
        print(model.__name__, x0.shape, round(time.process_time()-t,2), c[0]-p)
    print(np.max(np.abs(reference_fits(x0, fixed, y, model)/reference_fits(x0, fixed, y, jax.jit(model))-1)))
