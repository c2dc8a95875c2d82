"""The built-in lineshapes, in ``jax.numpy``, with lmfit's parameters and conventions.

Each takes the independent variable first and scalar (one fit's) parameters after it,
with lmfit's names and defaults: ``amplitude`` is the area under a peak, ``sigma`` its
width parameter, and a width or a center in a denominator is kept from zero as lmfit
keeps it (``max(1e-15, sigma)``), so that the values equal ``lmfit.lineshapes``' to
rounding (tests/models/test_lineshapes.py checks 1e-12 relative in float64).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf, erfc, gammaln

from fixedopt._models.faddeeva import wofz
from fixedopt._models.gamma import log_gamma_ratio

TINY = 1.0e-15  # lmfit.lineshapes.tiny
_S2PI = float(np.sqrt(2.0 * np.pi))
_S2 = float(np.sqrt(2.0))
_LOG2 = float(np.log(2.0))
STEP_FORMS = ("linear", "atan", "arctan", "erf", "logistic")

Value = Any  # a scalar, an array or a tracer


def _not_zero(value: Value) -> Value:
    """``value`` kept at least ``TINY`` from zero, with its sign (lmfit's ``not_zero``)."""
    value = jnp.asarray(value)
    return jnp.where(value < 0, -1.0, 1.0) * jnp.maximum(TINY, jnp.abs(value))


def constant(x: Value, c: Value = 0.0) -> Value:
    """``c`` at every ``x``."""
    return c * jnp.ones(jnp.shape(x))


def linear(x: Value, slope: Value = 1.0, intercept: Value = 0.0) -> Value:
    """``slope * x + intercept``."""
    return slope * jnp.asarray(x) + intercept


def parabolic(x: Value, a: Value = 0.0, b: Value = 0.0, c: Value = 0.0) -> Value:
    """``a * x**2 + b * x + c``."""
    x = jnp.asarray(x)
    return a * x**2 + b * x + c


def polynomial(x: Value, *coefficients: Value) -> Value:
    """``c0 + c1 x + c2 x**2 + ...`` (Horner's rule)."""
    x = jnp.asarray(x)
    out = jnp.zeros_like(x)
    for c in reversed(coefficients):
        out = out * x + c
    return out


def exponential(x: Value, amplitude: Value = 1.0, decay: Value = 1.0) -> Value:
    """``amplitude * exp(-x / decay)``."""
    return amplitude * jnp.exp(-jnp.asarray(x) / _not_zero(decay))


def biexponential(
    x: Value,
    amplitude1: Value = 1.0,
    decay1: Value = 1.0,
    amplitude2: Value = 1.0,
    decay2: Value = 10.0,
) -> Value:
    """``amplitude1 * exp(-x / decay1) + amplitude2 * exp(-x / decay2)``: a decay with
    two lifetimes (fluorescence lifetimes, FLIM)."""
    return exponential(x, amplitude1, decay1) + exponential(x, amplitude2, decay2)


def powerlaw(x: Value, amplitude: Value = 1.0, exponent: Value = 1.0) -> Value:
    """``amplitude * x**exponent``."""
    return amplitude * jnp.asarray(x) ** exponent


def gaussian(x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0) -> Value:
    """``amplitude / (sigma sqrt(2 pi)) * exp(-(x - center)**2 / (2 sigma**2))``."""
    x = jnp.asarray(x)
    scale = amplitude / jnp.maximum(TINY, _S2PI * sigma)
    return scale * jnp.exp(-((x - center) ** 2) / jnp.maximum(TINY, 2.0 * sigma**2))


def gaussian2d(
    x: Value,
    y: Value = 0.0,
    amplitude: Value = 1.0,
    centerx: Value = 0.0,
    centery: Value = 0.0,
    sigmax: Value = 1.0,
    sigmay: Value = 1.0,
) -> Value:
    """``amplitude`` times the product of two unit-area Gaussians, in ``x`` and ``y``
    (a spot in localization microscopy)."""
    return amplitude * (gaussian(x, 1.0, centerx, sigmax) * gaussian(y, 1.0, centery, sigmay))


def lorentzian(x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0) -> Value:
    """``amplitude / (pi sigma) / (1 + ((x - center) / sigma)**2)``."""
    x = jnp.asarray(x)
    arg = (x - center) / jnp.maximum(TINY, sigma)
    return (amplitude / (1.0 + arg**2)) / jnp.maximum(TINY, np.pi * sigma)


def voigt(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    gamma: Value = None,
) -> Value:
    """``amplitude * Re w(z) / (sigma sqrt(2 pi))``, ``z = (x - center + i gamma) /
    (sigma sqrt 2)``: the convolution of a Gaussian (``sigma``) and a Lorentzian
    (half width ``gamma``; ``sigma`` when not given)."""
    if gamma is None:
        gamma = sigma
    x = jnp.asarray(x)
    real = (x - center) / jnp.maximum(TINY, sigma * _S2)
    imag = jnp.broadcast_to(gamma / jnp.maximum(TINY, sigma * _S2), jnp.shape(real))
    w = wofz(jax.lax.complex(real, imag.astype(real.dtype)))
    return amplitude * jnp.real(w) / jnp.maximum(TINY, sigma * _S2PI)


def pvoigt(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    fraction: Value = 0.5,
) -> Value:
    """``(1 - fraction)`` Gaussian plus ``fraction`` Lorentzian, of one area
    ``amplitude`` and one FWHM ``2 sigma``."""
    sigma_g = sigma / float(np.sqrt(2.0 * _LOG2))
    return (1.0 - fraction) * gaussian(x, amplitude, center, sigma_g) + fraction * lorentzian(
        x, amplitude, center, sigma
    )


def pearson7(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    expon: Value = 1.0,
) -> Value:
    """``amplitude (1 + arg**2)**(-expon) / (sigma B(expon - 1/2, 1/2))``, ``arg =
    (x - center) / sigma``."""
    x = jnp.asarray(x)
    expon = jnp.maximum(TINY, expon)
    arg = (x - center) / jnp.maximum(TINY, sigma)
    log_norm = gammaln(expon) - gammaln(expon - 0.5) - float(0.5 * np.log(np.pi))
    scale = amplitude * jnp.exp(log_norm)
    return scale * (1.0 + arg**2) ** (-expon) / jnp.maximum(TINY, sigma)


def damped_oscillator(
    x: Value, amplitude: Value = 1.0, center: Value = 1.0, sigma: Value = 0.1
) -> Value:
    """``amplitude / sqrt((1 - (x/center)**2)**2 + (2 sigma x / center)**2)``: the
    amplitude of a driven, damped harmonic oscillator."""
    x = jnp.asarray(x)
    center = jnp.maximum(TINY, jnp.abs(center))
    return amplitude / jnp.sqrt((1.0 - (x / center) ** 2) ** 2 + (2.0 * sigma * x / center) ** 2)


def skewed_gaussian(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    gamma: Value = 0.0,
) -> Value:
    """A Gaussian times ``1 + erf(gamma (x - center) / (sigma sqrt 2))`` (the skew
    normal distribution)."""
    x = jnp.asarray(x)
    skew = 1.0 + erf(gamma * (x - center) / jnp.maximum(TINY, _S2 * sigma))
    return skew * gaussian(x, amplitude, center, sigma)


def _rise(arg: jax.Array, form: str) -> Value:
    """A step from 0 to 1 at ``arg = 0`` of the given ``form``."""
    if form == "erf":
        return 0.5 * (1.0 + erf(arg))
    if form == "logistic":
        return 1.0 - 1.0 / (1.0 + jnp.exp(arg))
    if form in ("atan", "arctan"):
        return 0.5 + jnp.arctan(arg) / np.pi
    if form == "linear":
        return jnp.minimum(1.0, jnp.maximum(0.0, arg + 0.5))
    raise ValueError(f"`form` must be one of {STEP_FORMS}, got {form!r}")


def step(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    form: str = "linear",
) -> Value:
    """A step from 0 to ``amplitude`` (falling for ``sigma < 0``), its half at
    ``center``; ``form`` is ``"linear"``, ``"atan"``, ``"erf"`` or ``"logistic"``."""
    x = jnp.asarray(x)
    sigma = jnp.asarray(sigma)
    arg = jnp.sign(sigma) * (x - center) / jnp.maximum(TINY * TINY, jnp.abs(sigma))
    return amplitude * _rise(arg, form)


def rectangle(
    x: Value,
    amplitude: Value = 1.0,
    center1: Value = 0.0,
    sigma1: Value = 1.0,
    center2: Value = 1.0,
    sigma2: Value = 1.0,
    form: str = "linear",
) -> Value:
    """A step up at ``center1`` (width ``sigma1``) and down at ``center2``, height
    ``amplitude``, of the given ``form`` (as :func:`step`)."""
    x = jnp.asarray(x)
    up = (x - center1) / jnp.maximum(TINY, sigma1)
    down = (center2 - x) / jnp.maximum(TINY, sigma2)
    if form == "linear":  # lmfit's ramps run over [-1, 1], not the step's [-1/2, 1/2]
        ramps = jnp.clip(up, -1.0, 1.0) + jnp.clip(down, -1.0, 1.0)
        return amplitude * 0.5 * ramps
    if form == "erf":
        return amplitude * 0.5 * (erf(up) + erf(down))
    if form == "logistic":
        return amplitude * (1.0 - 1.0 / (1.0 + jnp.exp(up)) - 1.0 / (1.0 + jnp.exp(down)))
    if form in ("atan", "arctan"):
        return amplitude * (jnp.arctan(up) + jnp.arctan(down)) / np.pi
    raise ValueError(f"`form` must be one of {STEP_FORMS}, got {form!r}")


def moffat(
    x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0, beta: Value = 1.0
) -> Value:
    """``amplitude / (((x - center) / sigma)**2 + 1)**beta`` (``amplitude`` is the height)."""
    x = jnp.asarray(x)
    return amplitude / (((x - center) / jnp.maximum(TINY, sigma)) ** 2 + 1.0) ** beta


def students_t(x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0) -> Value:
    """Student's t-distribution of ``sigma`` degrees of freedom, area ``amplitude``:
    ``amplitude Gamma((sigma + 1)/2) / (sqrt(sigma pi) Gamma(sigma/2)) (1 + (x -
    center)**2 / sigma)**(-(sigma + 1)/2)``."""
    x = jnp.asarray(x)
    half = (sigma + 1.0) / 2.0
    ratio = jnp.exp(gammaln(half) - gammaln(jnp.maximum(TINY, sigma / 2.0)))
    norm = ratio / jnp.maximum(TINY, jnp.sqrt(sigma * np.pi))
    return amplitude * (1.0 + (x - center) ** 2 / jnp.maximum(TINY, sigma)) ** (-half) * norm


def lognormal(x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0) -> Value:
    """``amplitude / (x sigma sqrt(2 pi)) exp(-(log(x) - center)**2 / (2 sigma**2))``,
    ``x`` kept at least ``TINY`` (as lmfit)."""
    x = jnp.maximum(TINY, jnp.asarray(x))
    spread = jnp.exp(-((jnp.log(x) - center) ** 2) / jnp.maximum(TINY, 2.0 * sigma**2))
    return amplitude / (x * jnp.maximum(TINY, sigma * _S2PI)) * spread


def split_lorentzian(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    sigma_r: Value = 1.0,
) -> Value:
    """A Lorentzian of half width ``sigma`` left of ``center`` and ``sigma_r`` right of
    it, of area ``amplitude``."""
    x = jnp.asarray(x)
    left, right = jnp.maximum(TINY, sigma), jnp.maximum(TINY, sigma_r)
    width = jnp.where(x < center, left, right)
    squared = (x - center) ** 2
    return 2.0 * amplitude / (np.pi * (left + right)) * (width * width / (width * width + squared))


def breit_wigner(
    x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0, q: Value = 1.0
) -> Value:
    """The Breit–Wigner–Fano lineshape ``amplitude (q sigma/2 + x - center)**2 /
    ((sigma/2)**2 + (x - center)**2)``."""
    x = jnp.asarray(x)
    half = sigma / 2.0
    return amplitude * (q * half + x - center) ** 2 / (half * half + (x - center) ** 2)


def dho(
    x: Value, amplitude: Value = 1.0, center: Value = 1.0, sigma: Value = 1.0, gamma: Value = 1.0
) -> Value:
    """A damped harmonic oscillator's response with its Bose factor (lmfit's ``dho``):
    ``amplitude sigma / pi (1/((x - center)**2 + sigma**2) - 1/((x + center)**2 +
    sigma**2)) / (1 - exp(-x / gamma))``, its limit at ``|x| <= 1e-8``."""
    x = jnp.asarray(x)
    bose = 1.0 - jnp.exp(-x / jnp.maximum(TINY, gamma))
    bose = jnp.where(jnp.isnan(bose) | (jnp.abs(bose) <= TINY), TINY, bose)
    near = 1.0 / ((x - center) ** 2 + sigma**2)
    far = 1.0 / ((x + center) ** 2 + sigma**2)
    at_zero = 4.0 * gamma * center / (center**2 + sigma**2) ** 2
    factor = amplitude * sigma / np.pi
    return factor * jnp.where(jnp.abs(x) <= 1e-8, at_zero, (near - far) / bose)


def doniach(
    x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0, gamma: Value = 0.0
) -> Value:
    """The Doniach–Šunjić lineshape of photoemission: ``amplitude / sigma**(1 - gamma)
    cos(pi gamma / 2 + (1 - gamma) arctan(arg)) / (1 + arg**2)**((1 - gamma)/2)``,
    ``arg = (x - center) / sigma``."""
    x = jnp.asarray(x)
    arg = (x - center) / jnp.maximum(TINY, sigma)
    rest = 1.0 - gamma
    scale = amplitude / jnp.maximum(TINY, sigma**rest)
    return (
        scale * jnp.cos(np.pi * gamma / 2.0 + rest * jnp.arctan(arg)) / (1.0 + arg**2) ** (rest / 2)
    )


def expgaussian(
    x: Value, amplitude: Value = 1.0, center: Value = 0.0, sigma: Value = 1.0, gamma: Value = 1.0
) -> Value:
    """The exponentially modified Gaussian: ``amplitude gamma/2 exp(gamma (center +
    gamma sigma**2 / 2 - x)) erfc((center + gamma sigma**2 - x) / (sqrt(2) sigma))``.

    Where the ``erfc`` argument is positive the product is taken as ``exp(a - b**2)
    erfcx(b)`` (``erfcx(b) = Re w(i b)``): the same value, finite where lmfit's
    ``exp`` overflows (far left of the peak: ``inf * 0``)."""
    x = jnp.asarray(x)
    spread = gamma * sigma * sigma
    a = gamma * (center + spread / 2.0 - x)
    b = (center + spread - x) / jnp.maximum(TINY, _S2 * sigma)
    tail = b > 0
    t = jnp.where(tail, b, 0.0)  # each branch sees finite inputs (no NaN in derivatives)
    scaled = jnp.real(wofz(jax.lax.complex(jnp.zeros_like(t), t)))
    stable = jnp.exp(jnp.where(tail, a - t * t, 0.0)) * scaled
    direct = jnp.exp(jnp.where(tail, 0.0, a)) * erfc(jnp.where(tail, 0.0, b))
    return amplitude * (gamma / 2.0) * jnp.where(tail, stable, direct)


def skewed_voigt(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    gamma: Value = None,
    skew: Value = 0.0,
) -> Value:
    """A Voigt profile times ``1 + erf(skew (x - center) / (sqrt(2) sigma))``."""
    x = jnp.asarray(x)
    asymmetry = 1.0 + erf(skew / jnp.maximum(TINY, _S2 * sigma) * (x - center))
    return asymmetry * voigt(x, amplitude, center, sigma, gamma)


def pearson4(
    x: Value,
    amplitude: Value = 1.0,
    center: Value = 0.0,
    sigma: Value = 1.0,
    expon: Value = 1.0,
    skew: Value = 0.0,
) -> Value:
    """The Pearson type IV distribution of area ``amplitude``: ``amplitude / sigma
    |Gamma(expon + i skew/2) / Gamma(expon)|**2 / B(expon - 1/2, 1/2) (1 + arg**2)**(-expon)
    exp(-skew arctan(arg))``, ``arg = (x - center) / sigma``."""
    x = jnp.asarray(x)
    expon, sigma = jnp.maximum(TINY, expon), jnp.maximum(TINY, sigma)
    arg = (x - center) / sigma
    beta = gammaln(expon - 0.5) + gammaln(0.5) - gammaln(expon)
    log_norm = 2.0 * log_gamma_ratio(expon, skew / 2.0) - beta
    return (
        amplitude
        / sigma
        * jnp.exp(log_norm - expon * jnp.log1p(arg * arg) - skew * jnp.arctan(arg))
    )


def sine(x: Value, amplitude: Value = 1.0, frequency: Value = 1.0, shift: Value = 0.0) -> Value:
    """``amplitude * sin(frequency x + shift)``."""
    return amplitude * jnp.sin(jnp.asarray(x) * frequency + shift)


THERMAL_FORMS = {"bose": -1.0, "maxwell": 0.0, "fermi": 1.0}


def thermal_offset(form: str) -> float:
    """The denominator's offset of a thermal distribution's ``form`` (lmfit's: the
    name's start, any case); a ValueError naming the forms for another."""
    offset = next((v for k, v in THERMAL_FORMS.items() if str(form).lower().startswith(k)), None)
    if offset is None:
        raise ValueError(f"`form` must be one of {tuple(THERMAL_FORMS)}, got {form!r}")
    return offset


def thermal_distribution(
    x: Value, amplitude: Value = 1.0, center: Value = 0.0, kt: Value = 1.0, form: str = "bose"
) -> Value:
    """``1 / (amplitude exp((x - center) / kt) + offset)``: Bose–Einstein (``form``
    ``"bose"``, offset -1), Maxwell–Boltzmann (``"maxwell"``, 0) or Fermi–Dirac
    (``"fermi"``, +1); the denominator kept from zero as lmfit keeps it (the real part
    of ``1 / (d + i TINY)``)."""
    d = amplitude * jnp.exp((jnp.asarray(x) - center) / _not_zero(kt)) + thermal_offset(form)
    large = jnp.abs(d) >= TINY
    safe = jnp.where(large, d, 1.0)
    return jnp.where(large, 1.0 / (d + TINY * (TINY / safe)), d / (TINY * TINY + d * d))
