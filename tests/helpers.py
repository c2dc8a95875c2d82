"""What the test modules share: the solver table, problems, references and assertions.

Test modules import these from here, never from each other (``tests/test_layout.py``
checks it); the problems of the status-truth suite live in the public module
``fixedopt.testing_problems``, which the tests and the benchmarks both read (one definition).
"""

import contextlib
import threading

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize

import fixedopt

# ------------------------------------------------------------------------------ solvers

SOLVERS = {
    "lbfgs": fixedopt.LBFGS(),
    "gradient_descent": fixedopt.GradientDescent(),
    "optax_adam": fixedopt.Optax(optax.adam(0.05)),
    "levenberg_marquardt": fixedopt.LevenbergMarquardt(),
    "gauss_newton": fixedopt.GaussNewton(),
}
RESIDUAL_SOLVERS = {name: solver for name, solver in SOLVERS.items() if solver.needs_residuals}


def float16_compiles() -> bool:
    """Whether XLA:CPU compiles a float16 program on this CPU. Not with
    ``XLA_FLAGS=--xla_cpu_max_isa=SSE4_2``: without F16C instructions jaxlib 0.10's JIT
    needs the runtime symbol ``__extendhfsf2``, which it does not link ("LLVM
    compilation error: Symbols not found"), so every float16 program fails there,
    fixedopt's or not. bfloat16 compiles."""
    try:
        jax.block_until_ready(jax.jit(lambda a: a.astype(jnp.float32))(jnp.ones(2, jnp.float16)))
    except jax.errors.JaxRuntimeError:
        return False
    return True


# ------------------------------------------------------------------ bits and solutions


def bits(array):
    """Raw bits of floats, bfloat16 included (so -0.0, 0.0 and NaN payloads differ);
    other arrays as is."""
    array = np.asarray(array)
    if not jnp.issubdtype(array.dtype, jnp.floating):
        return array
    return array.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])


def assert_rows_identical(solution, reference, rows=slice(None), err_msg=""):
    """Every field of ``solution`` (each leaf of it), at ``rows``, bit-identical to
    ``reference``'s: a solution of exactly those rows, or by default of the same
    batch."""
    for field in fixedopt.Solution._fields:
        mine, theirs = getattr(solution, field), getattr(reference, field)
        message = f"{err_msg} {field}".strip()
        assert jax.tree.structure(mine) == jax.tree.structure(theirs), message
        for leaf, other in zip(jax.tree.leaves(mine), jax.tree.leaves(theirs)):
            np.testing.assert_array_equal(
                bits(np.asarray(leaf)[rows]), bits(other), err_msg=message
            )


# ------------------------------------------------- Moré, Garbow, Hillstrom (1981) problems


def extended_rosenbrock(x):
    odd, even = x[0::2], x[1::2]
    return jnp.sum(100.0 * (even - odd**2) ** 2 + (1.0 - odd) ** 2)


def extended_powell_singular(x):
    a, b, c, d = x[0::4], x[1::4], x[2::4], x[3::4]
    return jnp.sum(
        (a + 10.0 * b) ** 2 + 5.0 * (c - d) ** 2 + (b - 2.0 * c) ** 4 + 10.0 * (a - d) ** 4
    )


def trigonometric(x):
    n = x.shape[0]
    i = jnp.arange(1, n + 1, dtype=x.dtype)
    residuals = n - jnp.sum(jnp.cos(x)) + i * (1.0 - jnp.cos(x)) - jnp.sin(x)
    return jnp.sum(residuals**2)


def wood(x):
    x1, x2, x3, x4 = x[0], x[1], x[2], x[3]
    return (
        100.0 * (x2 - x1**2) ** 2
        + (1.0 - x1) ** 2
        + 90.0 * (x4 - x3**2) ** 2
        + (1.0 - x3) ** 2
        + 10.1 * ((x2 - 1.0) ** 2 + (x4 - 1.0) ** 2)
        + 19.8 * (x2 - 1.0) * (x4 - 1.0)
    )


def broyden_tridiagonal(x):
    padded = jnp.concatenate([jnp.zeros(1, x.dtype), x, jnp.zeros(1, x.dtype)])
    residuals = (3.0 - 2.0 * x) * x - padded[:-2] - 2.0 * padded[2:] + 1.0
    return jnp.sum(residuals**2)


MGH = {  # name: (objective, standard start)
    "extended_rosenbrock": (extended_rosenbrock, np.tile([-1.2, 1.0], 4)),
    "extended_powell_singular": (extended_powell_singular, np.tile([3.0, -1.0, 0.0, 1.0], 2)),
    "trigonometric": (trigonometric, np.full(6, 1.0 / 6.0)),
    "wood": (wood, np.array([-3.0, -1.0, -3.0, -1.0])),
    "broyden_tridiagonal": (broyden_tridiagonal, -np.ones(8)),
}


def heterogeneous_masks(rng, batch, n, rate=0.3):
    """Random per-row masks; row 0 none fixed, row 1 all fixed, row 2 one fixed."""
    fixed = rng.random((batch, n)) < rate
    fixed[0] = False
    fixed[1] = True
    fixed[2] = False
    fixed[2, n // 2] = True
    return fixed


# ------------------------------------------------------------------- scipy's L-BFGS-B

SCIPY_OPTIONS = {"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000, "maxfun": 50_000}


def scipy_lbfgsb(value_and_grad, x0, fixed, lower=None, upper=None, args=()):
    """scipy's L-BFGS-B on one row, with ``lb == ub == x0`` on the fixed entries (the
    way scipy users fix parameters), to tighter tolerances than fixedopt's;
    ``(x, value)``."""
    n = x0.size
    lower = np.full(n, -np.inf) if lower is None else np.array(lower, np.float64)
    upper = np.full(n, np.inf) if upper is None else np.array(upper, np.float64)
    lower[fixed], upper[fixed] = x0[fixed], x0[fixed]
    bounds = [
        (lo if np.isfinite(lo) else None, hi if np.isfinite(hi) else None)
        for lo, hi in zip(lower, upper)
    ]

    def fun(z):
        value, grad = value_and_grad(z, *args)
        return float(value), np.asarray(grad, np.float64)

    result = scipy.optimize.minimize(
        fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, options=SCIPY_OPTIONS
    )
    return result.x, result.fun


# ---------------------------------------------------------- rows for the line searches


def smooth(x, weights, shift, curvature):
    """Nonconvex but bounded below along every ray: quartic growth plus cosines."""
    return jnp.sum(curvature * (x - shift) ** 2 + 0.05 * x**4 + weights * jnp.cos(2.0 * x))


def smooth_batch(seed, rows=64, n=12):
    """``(x, weights, shift, curvature, fixed, step)`` of ``rows`` rows of
    :func:`smooth`: badly scaled, 30% fixed, first steps from 1e-3 to 1e2."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, n))
    weights, shift = rng.uniform(0.0, 2.0, (rows, n)), rng.normal(size=(rows, n))
    curvature = np.exp(rng.uniform(-3, 3, (rows, n)))  # badly scaled rows
    fixed = rng.random((rows, n)) < 0.3
    step = np.exp(rng.uniform(np.log(1e-3), np.log(1e2), rows))  # too short and too long
    return tuple(map(jnp.asarray, (x, weights, shift, curvature, fixed, step)))


# ----------------------------------------------- a coupled quadratic, batches of it


def quadratic(x, curvature, center):
    """A separable quadratic coupled by neighbour differences."""
    return 0.5 * jnp.sum(curvature * (x - center) ** 2) + 0.5 * jnp.sum(jnp.diff(x) ** 2)


def quadratic_rows(size=100, n=8, seed=1):
    """``(x0, fixed, (curvature, center))``: ``size`` rows of :func:`quadratic`, curvatures
    from 1 to 100, about 30% of the entries fixed."""
    rng = np.random.default_rng(seed)
    args = (jnp.asarray(rng.uniform(1, 100, (size, n))), jnp.asarray(rng.normal(size=(size, n))))
    return jnp.zeros((size, n)), jnp.asarray(rng.random((size, n)) < 0.3), args


TWO_PROCESS_LANES = 2  # 4 rows per device (2 processes, 2 devices each): lanes refill
TWO_PROCESS_MAX_STEPS = 3  # some rows of each process stop at MAX_STEPS, the rest converge
# (L-BFGS with Hager-Zhang searches, the default at n = 4, solves these rows in 2 to 5 steps)


def two_process_batch(size=16, n=4, seed=3):
    """``tests/entry/test_distributed.py``'s global batch, with rows of every kind in both
    processes' halves: a NaN target at row 9 (NONFINITE); of the rest, about half need
    more than ``TWO_PROCESS_MAX_STEPS`` steps."""
    rng = np.random.default_rng(seed)
    curvature = rng.uniform(1.0, 100.0, (size, n))
    center = rng.normal(size=(size, n))
    center[9, 2] = np.nan
    fixed = rng.random((size, n)) < 0.3
    return np.zeros((size, n)), fixed, curvature, center


def two_process_solve(x0, fixed, curvature, center):
    """The solve every process of ``tests/entry/test_distributed.py`` runs on its rows."""
    return fixedopt.minimize(
        quadratic, x0, fixed, args=(curvature, center), batched=True,
        lanes=TWO_PROCESS_LANES, max_steps=TWO_PROCESS_MAX_STEPS,
    )  # fmt: skip


@contextlib.contextmanager
def persistent_cache(folder):
    """JAX's persistent compilation cache in ``folder`` meanwhile (every program
    written), then the suite's own again."""
    from jax.experimental.compilation_cache import compilation_cache

    config = jax.config
    saved = config.jax_compilation_cache_dir, config.jax_persistent_cache_min_compile_time_secs
    config.update("jax_compilation_cache_dir", str(folder))
    config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        config.update("jax_compilation_cache_dir", saved[0])
        config.update("jax_persistent_cache_min_compile_time_secs", saved[1])
        compilation_cache.reset_cache()


def compiling_threads(call, program):
    """``call()``, and the names of the threads that compiled the XLA program ``program``
    (JAX's name of it, e.g. ``"jit(_rows)"``) meanwhile: the caller's, or fixedopt's
    ``ahead`` thread."""
    threads, compiled = [], ("/jax/core/compile/backend_compile_duration", program)

    def listen(event, seconds, **kwargs):
        if (event, kwargs.get("fun_name")) == compiled:
            threads.append(threading.current_thread().name)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        return call(), threads
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
