"""The cases of :mod:`benchmarks.first_call`: each a builder ``case(batch, seed)`` of a
model no process has compiled, returning its timed calls: ``call`` first (then, spectra:
``forward``, ``gradient``). In float32 mode (:func:`use_float32`, for a TPU: 64-bit mode
off, the data on the device) every case runs in float32, as ``spot`` always does.

- ``spectra``: ``curve_fit`` of two pseudo-Voigt peaks and a line (8 parameters, 301
  points, bounds, a fixed set per spectrum), clean data: no row is slow;
- ``spectra_slow``: the same with one degenerate spectrum (no peak: the peaks' centres
  and widths are then undetermined, and the fit runs long), as real data have
  (``docs/decisions.md``, "One degenerate spectrum in 2,000"): its block has a tail;
- ``models``: the same spectra (the slow one too) through ``fixedopt.models``
  (``PseudoVoigtModel`` twice and ``LinearModel``, per-spectrum values and fixed sets);
- ``rk4``, ``spot`` (Gpufit's protocol), ``quad64``: below;
- ``optax_quad64``: the peer a TPU's first call is held to (issue 62: within twice
  its): ``quad64``'s batch by optax's L-BFGS, masked, under ``jit(vmap)`` (the
  ``tpu_peers`` recipe, ``benchmarks.methods.optax_program``).
"""

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.tiny import GPUFIT
from fixedopt.testing_problems import gaussian_fits, gaussian_model, quad_jax

# The float type of the cases' data (but spot's, float32 always): float64, or float32
# after use_float32().
REAL = [np.float64]


def use_float32() -> None:
    """Every case in float32, 64-bit mode off (a TPU's first call, as its users meet it)."""
    jax.config.update("jax_enable_x64", False)
    REAL[0] = np.float32


def real(array):
    """``array`` in the cases' float type: on the device in float32 mode, else NumPy's."""
    if REAL[0] is np.float32:
        return jnp.asarray(np.asarray(array, np.float32))
    return np.asarray(array, np.float64)


X_SPECTRA = np.linspace(0.0, 30.0, 301)
SPECTRA_BOUNDS = (np.array([0.0, 0.0, 0.05, 0.0, 0.0, 0.05, -np.inf, -np.inf]),
                  np.array([np.inf, 30.0, 10.0, np.inf, 30.0, 10.0, np.inf, np.inf]))  # fmt: skip


def pvoigt(x, a, c, s):
    """lmfit's pseudo-Voigt of area ``a``, fraction 0.37 of Lorentzian."""
    g = jnp.exp(-((x - c) ** 2) / (2 * s**2)) / (s * jnp.sqrt(2 * jnp.pi))
    lorentz = s / (jnp.pi * ((x - c) ** 2 + s**2))
    return a * (0.37 * lorentz + 0.63 * g)


def spectrum(x, a1, c1, s1, a2, c2, s2, slope, offset):
    """Two pseudo-Voigt peaks on a linear baseline (8 parameters)."""
    return pvoigt(x, a1, c1, s1) + pvoigt(x, a2, c2, s2) + slope * x + offset


spectrum_residual = lambda p, y: spectrum(X_SPECTRA, *p) - y


PEAKS = np.array([40.0, 11.0, 1.2, 25.0, 18.0, 1.6, 0.05, 2.0])
SLOW_SEED = 103  # the degenerate spectrum's: 77 steps (the others at most 19), at any B


def spectra_data(batch: int, seed: int = 0, slow: bool = False) -> tuple:
    """``(p0, fixed, y)`` of ``batch`` noisy spectra; ``slow``: the last one degenerate,
    the same at every ``batch``: no peak (noise on a line), started where a spectrum's
    peaks would be, every parameter free (float64: 77 steps where the others take at
    most 19, a tail at B = 20 and 2000)."""
    rng = np.random.default_rng(seed)
    truth = PEAKS * rng.uniform(0.9, 1.1, size=(batch, 8))
    noise = rng.normal(0.0, 0.2, size=(batch, X_SPECTRA.size))  # drawn in issue 40's order
    fixed = rng.random((batch, 8)) < 0.25
    p0 = np.where(fixed, truth, truth * rng.uniform(0.85, 1.15, size=truth.shape))
    if slow:
        own = np.random.default_rng(SLOW_SEED)
        truth[-1] = PEAKS * own.uniform(0.9, 1.1, 8)
        p0[-1], fixed[-1] = truth[-1] * own.uniform(0.85, 1.15, 8), False
        truth[-1, [0, 3]] = 0.0
        noise[-1] = own.normal(0.0, 0.2, X_SPECTRA.size)
    clean = np.asarray(jax.jit(jax.vmap(lambda p: spectrum(X_SPECTRA, *p)))(real(truth)))
    return real(p0), fixed, real(clean + noise)


def spectra(batch: int, seed: int = 0, slow: bool = False) -> dict:
    """``curve_fit`` of two pseudo-Voigt peaks + a line (8 parameters, 301 points, per-row
    fixed sets, bounds); ``forward`` and ``gradient``: one row's fit, its centre's gradient."""
    p0, fixed, y = spectra_data(batch, seed, slow)
    x, bounds = real(X_SPECTRA), tuple(real(b) for b in SPECTRA_BOUNDS)

    def centre(y):
        one = fixedopt.least_squares(spectrum_residual, p0[0], fixed[0], args=(y,))
        return one.x[1]

    return {"call": lambda: fixedopt.curve_fit(spectrum, x, y, p0, bounds=bounds, fixed=fixed,
                                               batched=True),
            "forward": lambda: centre(y[0]),
            "gradient": lambda: jax.grad(centre)(jnp.asarray(y[0]))}  # fmt: skip


def spectra_slow(batch: int, seed: int = 0) -> dict:
    """:func:`spectra`, its last spectrum degenerate: the first batch has a tail."""
    return {"call": spectra(batch, seed, slow=True)["call"]}


MODEL_NAMES = ("p1_amplitude", "p1_center", "p1_sigma", "p2_amplitude", "p2_center",
               "p2_sigma", "slope", "intercept")  # fmt: skip  # spectrum's order


def models(batch: int, seed: int = 0) -> dict:
    """The spectra of ``spectra_slow`` through ``fixedopt.models``: the same peaks
    (``PseudoVoigtModel``, fraction fixed at 0.37) and line, each spectrum's own values
    and fixed set, the bounds of ``SPECTRA_BOUNDS``."""
    from fixedopt.models import LinearModel, PseudoVoigtModel

    p0, fixed, y = spectra_data(batch, seed, slow=True)
    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = model.make_params()
    start, lower, upper = np.asarray(p0), *SPECTRA_BOUNDS
    for i, name in enumerate(MODEL_NAMES):
        params[name].set(value=start[:, i].tolist(), vary=(~fixed[:, i]).tolist(),
                         min=float(lower[i]), max=float(upper[i]))  # fmt: skip
    for name in ("p1_fraction", "p2_fraction"):
        params[name].set(value=0.37, vary=False)
    x = real(X_SPECTRA)
    return {"call": lambda: model.fit(y, params, x=x).best_values}


RK4_STEPS, RK4_DT = 200, 0.05


def trajectory(p):
    """A damped driven oscillator's position at 200 times, integrated by RK4;
    ``p = (omega, zeta, drive, frequency, x0, v0)``."""
    omega, zeta, drive, frequency, x0, v0 = p

    def field(t, s):
        position, velocity = s
        force = drive * jnp.cos(frequency * t) - 2 * zeta * omega * velocity
        return jnp.stack([velocity, force - omega**2 * position])

    def step(s, t):
        k1 = field(t, s)
        k2 = field(t + RK4_DT / 2, s + RK4_DT / 2 * k1)
        k3 = field(t + RK4_DT / 2, s + RK4_DT / 2 * k2)
        k4 = field(t + RK4_DT, s + RK4_DT * k3)
        s = s + RK4_DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return s, s[0]

    return jax.lax.scan(step, jnp.stack([x0, v0]), jnp.arange(RK4_STEPS) * RK4_DT)[1]


trajectory_residual = lambda p, y: trajectory(p) - y


def rk4(batch: int, seed: int = 0) -> dict:
    """``least_squares`` of damped driven oscillators integrated by RK4 (6 parameters)."""
    rng = np.random.default_rng(seed)
    truth = np.array([2.0, 0.1, 1.3, 1.7, 1.0, 0.0]) * rng.uniform(0.9, 1.1, (batch, 6))
    truth[:, 5] = rng.normal(0.0, 0.1, batch)
    y = np.asarray(jax.jit(jax.vmap(trajectory))(real(truth)))
    y = real(y + rng.normal(0.0, 0.02, y.shape))
    fixed = np.zeros((batch, 6), bool)
    fixed[np.arange(batch), rng.integers(0, 6, batch)] = True
    p0 = real(np.where(fixed, truth, truth * rng.uniform(0.95, 1.05, truth.shape)))
    return {"call": lambda: fixedopt.least_squares(trajectory_residual, p0, fixed, args=(y,),
                                                   batched=True)}  # fmt: skip


spot_residual = lambda p, y: gaussian_model(p) - y  # one function: a new batch reuses it


def spot(batch: int, seed: int = 0) -> dict:
    """Gpufit's protocol (float32, tolerance 1e-4, at most 10 steps) by ``least_squares``."""
    fits = gaussian_fits(batch, seed)
    options = dict(args=(fits.data,), batched=True, **GPUFIT)
    return {"call": lambda: fixedopt.least_squares(spot_residual, fits.x0, fits.fixed, **options)}


def quad64_data(batch: int, seed: int = 0) -> tuple:
    """``quad64``'s ``(x0, fixed, (diag, off, b))``: per-row tridiagonal quadratics."""
    rng = np.random.default_rng(seed)
    diag, off = rng.uniform(2.0, 4.0, (batch, 64)), rng.uniform(-0.9, 0.9, (batch, 63))
    b, x0 = rng.normal(size=(batch, 64)), rng.normal(size=(batch, 64))
    diag, off, b, x0 = map(real, (diag, off, b, x0))
    fixed = rng.random((batch, 64)) < 0.3
    return x0, fixed, (diag, off, b)


def quad64(batch: int, seed: int = 0) -> dict:
    """``minimize`` of per-row tridiagonal quadratics, n = 64."""
    x0, fixed, args = quad64_data(batch, seed)
    return {"call": lambda: fixedopt.minimize(quad_jax, x0, fixed, args=args, batched=True)}


def optax_quad64(batch: int, seed: int = 0) -> dict:
    """``quad64``'s batch by optax's L-BFGS, the objective masked, each row in its own
    ``while_loop`` under ``jit(vmap)`` (``tpu_peers``' recipe, its float32 tolerance)."""
    from benchmarks.methods import GTOL, optax_program

    x0, fixed, args = quad64_data(batch, seed)
    program = optax_program(quad_jax, GTOL["float32"], 500)  # a row that only rounds: 5000
    x0, fixed = jnp.asarray(x0), jnp.asarray(fixed)
    return {"call": lambda: program(x0, fixed, *args)}


BUILDERS = {"spectra": spectra, "spectra_slow": spectra_slow, "models": models, "rk4": rk4,
            "spot": spot, "quad64": quad64, "optax_quad64": optax_quad64}  # fmt: skip
