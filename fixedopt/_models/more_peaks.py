"""lmfit's other built-in models: asymmetric and heavy-tailed peaks, the sine and the
thermal distributions, with lmfit's hints, derived parameters and ``guess``.

Derived parameters use exact constants where lmfit rounds them (its split Lorentzian's
``height`` divides by ``3.1415927``); the Pearson IV ``height`` is lmfit's expression,
with the log-gamma function of a complex argument (``loggammafcn``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from fixedopt._models import lineshapes
from fixedopt._models.builtin import Hints, _Builtin, _rows, _squeeze, peak_guess

_T = repr(lineshapes.TINY)


class MoffatModel(_Builtin):
    """A Moffat peak: ``amplitude`` (its height), ``center``, ``sigma``, ``beta``."""

    func = staticmethod(lineshapes.moffat)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0},
        "fwhm": {"expr": "2*{prefix}sigma*sqrt(2**(1.0/max(1e-3, {prefix}beta))-1)"},
        "height": {"expr": "{prefix}amplitude"},
    }
    guess_scale = (0.5, 1.0)


class LognormalModel(_Builtin):
    """A log-normal peak in ``x``: ``amplitude`` (area), ``center`` and ``sigma`` of
    ``log(x)``. ``guess`` gives lmfit's fixed start (1, 0, 0.25), not one from the data."""

    func = staticmethod(lineshapes.lognormal)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0},
        "height": {
            "expr": f"{{prefix}}amplitude/max({_T}, ({{prefix}}sigma*sqrt(2*pi)))"
            "*exp({prefix}sigma**2/2-{prefix}center)"
        },
        "fwhm": {
            "expr": "exp({prefix}center-{prefix}sigma**2+{prefix}sigma*sqrt(2*log(2)))"
            "-exp({prefix}center-{prefix}sigma**2-{prefix}sigma*sqrt(2*log(2)))"
        },
    }

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        rows = len(_rows(data, x)[0])
        start = {"amplitude": 1.0, "center": 0.0, "sigma": 0.25}
        return _squeeze(data, {k: np.full(rows, v) for k, v in start.items()})


class StudentsTModel(_Builtin):
    """Student's t-distribution: ``amplitude`` (area), ``center``, ``sigma`` (the
    degrees of freedom)."""

    func = staticmethod(lineshapes.students_t)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0, "max": 100.0},
        "height": {
            "expr": "{prefix}amplitude*gamfcn(({prefix}sigma+1)/2)/"
            "(sqrt({prefix}sigma*pi)*gamfcn({prefix}sigma/2))"
        },
        "fwhm": {"expr": "2*sqrt(2**(2/({prefix}sigma+1))*{prefix}sigma-{prefix}sigma)"},
    }


class SplitLorentzianModel(_Builtin):
    """A Lorentzian of half width ``sigma`` on the left and ``sigma_r`` on the right."""

    func = staticmethod(lineshapes.split_lorentzian)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0},
        "sigma_r": {"min": 0.0},
        "fwhm": {"expr": "{prefix}sigma+{prefix}sigma_r"},
        "height": {
            "expr": f"2*{{prefix}}amplitude/pi/max({_T}, {{prefix}}sigma+{{prefix}}sigma_r)"
        },
    }

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        guessed = peak_guess(data, x, 1.25)
        return {**guessed, "sigma_r": guessed["sigma"]}


class BreitWignerModel(_Builtin):
    """The Breit–Wigner–Fano lineshape: ``amplitude``, ``center``, ``sigma``, ``q``."""

    func = staticmethod(lineshapes.breit_wigner)
    hint_table: ClassVar[Hints] = {"sigma": {"min": 0.0}}

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        return {**peak_guess(data, x), "q": 1.0}


class DampedHarmonicOscillatorModel(_Builtin):
    """A damped harmonic oscillator with its Bose factor (lmfit's ``dho``):
    ``amplitude``, ``center``, ``sigma``, ``gamma``."""

    func = staticmethod(lineshapes.dho)
    hint_table: ClassVar[Hints] = {
        "center": {"min": 0.0},
        "sigma": {"min": 0.0},
        "gamma": {"min": 1.0e-19},
        "height": {
            "expr": f"({{prefix}}amplitude*{{prefix}}sigma)/max({_T}, (pi*(1-exp("
            f"-{{prefix}}center/max({_T}, {{prefix}}gamma)))))*(1/max({_T}, "
            f"{{prefix}}sigma**2)-1/max({_T}, (4*{{prefix}}center**2+{{prefix}}sigma**2)))"
        },
        "fwhm": {"expr": "2.0*{prefix}sigma"},
    }

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        return {**peak_guess(data, x, 0.1, 0.1), "gamma": 1.0}


class DoniachModel(_Builtin):
    """The Doniach–Šunjić lineshape: ``amplitude``, ``center``, ``sigma``, ``gamma``."""

    func = staticmethod(lineshapes.doniach)
    hint_table: ClassVar[Hints] = {
        "height": {
            "expr": f"{{prefix}}amplitude/max({_T}, ({{prefix}}sigma**(1-{{prefix}}gamma)))"
            "*cos(pi*{prefix}gamma/2)"
        },
    }
    guess_scale = (0.5, 1.0)


class ExponentialGaussianModel(_Builtin):
    """The exponentially modified Gaussian: ``amplitude``, ``center``, ``sigma``,
    ``gamma`` (the exponential's rate)."""

    func = staticmethod(lineshapes.expgaussian)
    hint_table: ClassVar[Hints] = {"sigma": {"min": 0.0}, "gamma": {"min": 0.0, "max": 20.0}}


class SkewedVoigtModel(_Builtin):
    """A Voigt profile skewed by ``skew``; ``gamma`` tied to ``sigma`` unless set free."""

    func = staticmethod(lineshapes.skewed_voigt)
    hint_table: ClassVar[Hints] = {"sigma": {"min": 0.0}, "gamma": {"expr": "{prefix}sigma"}}


class Pearson4Model(_Builtin):
    """The Pearson type IV peak: ``amplitude`` (area), ``center``, ``sigma``, ``expon``,
    ``skew``; derived ``fwhm``, ``height`` and ``position`` (its mode)."""

    func = staticmethod(lineshapes.pearson4)
    hint_table: ClassVar[Hints] = {
        "expon": {"value": 1.5, "min": 0.5 + lineshapes.TINY, "max": 1000.0},
        "skew": {"value": 0.0, "min": -1000.0, "max": 1000.0},
        "fwhm": {
            "expr": "{prefix}sigma*sqrt(2**(1/{prefix}expon)-1)*pi"
            "/arctan2(exp(1)*{prefix}expon, {prefix}skew)"
        },
        "height": {
            "expr": "({prefix}amplitude / {prefix}sigma) * exp(2 * (real(loggammafcn("
            "{prefix}expon + {prefix}skew * 0.5j)) - loggammafcn({prefix}expon)) - "
            "betalnfnc({prefix}expon-0.5, 0.5) - {prefix}expon * log1p(square({prefix}skew/"
            "(2*{prefix}expon))) - {prefix}skew * arctan(-{prefix}skew/(2*{prefix}expon)))"
        },
        "position": {"expr": "{prefix}center-{prefix}sigma*{prefix}skew/(2*{prefix}expon)"},
    }

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        return {**peak_guess(data, x), "expon": 1.5, "skew": 0.0}


class SineModel(_Builtin):
    """``amplitude * sin(frequency x + shift)``; ``guess`` from the strongest Fourier
    component of each row (``x`` evenly spaced), as lmfit's."""

    func = staticmethod(lineshapes.sine)
    hint_table: ClassVar[Hints] = {
        "amplitude": {"min": 0.0},
        "frequency": {"min": 0.0},
        "shift": {"min": -2 * np.pi - 1e-5, "max": 2 * np.pi + 1e-5},
    }

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        rows, x = _rows(data, x)
        rows = rows - rows.mean(axis=1, keepdims=True)
        frequencies = np.fft.fftfreq(len(x), abs(x[-1] - x[0]) / (len(x) - 1))
        spectrum = np.abs(np.fft.fft(rows, axis=1))
        strongest = spectrum.argmax(axis=1)
        amplitude = 2.0 * spectrum[np.arange(len(rows)), strongest] / len(x)
        frequency = 2 * np.pi * np.abs(frequencies[strongest])
        shifts = np.linspace(0.0, 2 * np.pi, 11, endpoint=False)  # the best of 11
        curves = amplitude[:, None, None] * np.sin(
            x[None, None, :] * frequency[:, None, None] + shifts[None, :, None]
        )
        errors = np.linalg.norm(curves - rows[:, None, :], axis=2)
        shift = shifts[errors.argmin(axis=1)]
        return _squeeze(data, {"amplitude": amplitude, "frequency": frequency, "shift": shift})


class ThermalDistributionModel(_Builtin):
    """A Bose–Einstein, Maxwell–Boltzmann or Fermi–Dirac distribution (``form``):
    ``amplitude``, ``center``, ``kt`` (in the units of ``x``)."""

    func = staticmethod(lineshapes.thermal_distribution)

    def __init__(self, prefix: str = "", **options: Any) -> None:
        lineshapes.thermal_offset(options.get("form", "bose"))  # a bad form named now
        super().__init__(prefix, **options)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        rows, x = _rows(data, x)
        center = float(np.mean(x))
        kt = (x.max() - x.min()) / 10.0
        amplitude = rows.max(axis=1) * np.exp((x.min() - center) / max(1e-15, kt))
        count = len(rows)
        values = {
            "amplitude": amplitude,
            "center": np.full(count, center),
            "kt": np.full(count, kt),
        }
        return _squeeze(data, values)
