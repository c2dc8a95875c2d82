"""The built-in peak models, with lmfit's hints, derived ``fwhm`` and ``height`` and
``guess``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from fixedopt._models import lineshapes
from fixedopt._models.builtin import Hints, _Builtin, _rows, _squeeze, peak_guess

_T = repr(lineshapes.TINY)
_FWHM_GAUSS = repr(float(2.0 * np.sqrt(2.0 * np.log(2.0))))


def _height(factor: float) -> str:
    return f"{float(factor)!r}*{{prefix}}amplitude/max({_T}, {{prefix}}sigma)"


class GaussianModel(_Builtin):
    """``amplitude`` (area), ``center``, ``sigma``; ``fwhm = 2 sqrt(2 ln 2) sigma``."""

    func = staticmethod(lineshapes.gaussian)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0},
        "fwhm": {"expr": _FWHM_GAUSS + "*{prefix}sigma"},
        "height": {"expr": _height(1.0 / np.sqrt(2.0 * np.pi))},
    }


class LorentzianModel(_Builtin):
    """``amplitude`` (area), ``center``, ``sigma`` (half width); ``fwhm = 2 sigma``."""

    func = staticmethod(lineshapes.lorentzian)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0},
        "fwhm": {"expr": "2.0*{prefix}sigma"},
        "height": {"expr": _height(1.0 / np.pi)},
    }
    guess_scale = (1.25, 1.0)


class VoigtModel(_Builtin):
    """A Voigt profile; ``gamma`` is tied to ``sigma`` unless set free (as lmfit)."""

    func = staticmethod(lineshapes.voigt)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0},
        "gamma": {"expr": "{prefix}sigma"},
        "fwhm": {
            "expr": "1.0692*{prefix}gamma+sqrt(0.8664*{prefix}gamma**2+5.545083*{prefix}sigma**2)"
        },
        "height": {
            "expr": f"({{prefix}}amplitude/(max({_T}, {{prefix}}sigma*sqrt(2*pi))))*"
            f"real(wofz((1j*{{prefix}}gamma)/"
            f"(max({_T}, {{prefix}}sigma*sqrt(2)))))"
        },
    }
    guess_scale = (1.5, 0.65)


class PseudoVoigtModel(_Builtin):
    """A pseudo-Voigt: Gaussian and Lorentzian of one area and FWHM ``2 sigma``, mixed by
    ``fraction`` in ``[0, 1]``."""

    func = staticmethod(lineshapes.pvoigt)
    hint_table: ClassVar[Hints] = {
        "sigma": {"min": 0.0},
        "fraction": {"value": 0.5, "min": 0.0, "max": 1.0},
        "fwhm": {"expr": "2.0*{prefix}sigma"},
        "height": {
            "expr": f"(((1-{{prefix}}fraction)*{{prefix}}amplitude)/max({_T}, "
            f"({{prefix}}sigma*sqrt(pi/log(2))))+({{prefix}}fraction*"
            f"{{prefix}}amplitude)/max({_T}, (pi*{{prefix}}sigma)))"
        },
    }
    guess_scale = (1.25, 1.0)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        return {**peak_guess(data, x, 1.25), "fraction": 0.5}


class Pearson7Model(_Builtin):
    """A Pearson VII peak: ``amplitude``, ``center``, ``sigma``, ``expon``."""

    func = staticmethod(lineshapes.pearson7)
    hint_table: ClassVar[Hints] = {
        "expon": {"value": 1.5, "max": 100.0},
        "fwhm": {"expr": "sqrt(2**(1/{prefix}expon)-1)*2*{prefix}sigma"},
        "height": {
            "expr": f"{{prefix}}amplitude * gamfcn({{prefix}}expon)/max({_T}, "
            f"(gamfcn(0.5)*gamfcn({{prefix}}expon-0.5)*{{prefix}}sigma))"
        },
    }

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        return {**peak_guess(data, x), "expon": 1.5}


class DampedOscillatorModel(_Builtin):
    """A driven damped oscillator's amplitude: ``amplitude``, ``center``, ``sigma``."""

    func = staticmethod(lineshapes.damped_oscillator)
    hint_table: ClassVar[Hints] = {"sigma": {"min": 0.0}, "height": {"expr": _height(0.5)}}
    guess_scale = (0.1, 0.1)


class SkewedGaussianModel(_Builtin):
    """A Gaussian skewed by ``gamma`` (the skew normal distribution)."""

    func = staticmethod(lineshapes.skewed_gaussian)
    hint_table: ClassVar[Hints] = {"sigma": {"min": 0.0}}

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        return {**peak_guess(data, x), "gamma": 0.0}


class Gaussian2dModel(_Builtin):
    """A 2-D Gaussian spot in ``x`` and ``y``: ``amplitude`` (volume), ``centerx``,
    ``centery``, ``sigmax``, ``sigmay``."""

    func = staticmethod(lineshapes.gaussian2d)
    hint_table: ClassVar[Hints] = {
        "sigmax": {"min": 0.0},
        "sigmay": {"min": 0.0},
        "fwhmx": {"expr": _FWHM_GAUSS + "*{prefix}sigmax"},
        "fwhmy": {"expr": _FWHM_GAUSS + "*{prefix}sigmay"},
        "height": {
            "expr": f"{1 / (2 * np.pi)!r}*{{prefix}}amplitude/max({_T}, "
            f"{{prefix}}sigmax*{{prefix}}sigmay)"
        },
    }

    def __init__(self, prefix: str = "", **options: Any) -> None:
        super().__init__(prefix, independent_vars=("x", "y"), **options)

    def guess(self, data: Any, x: Any, y: Any = None, **values: Any) -> Any:
        """Start values from the moments of ``data`` (``(m,)`` or ``(B, m)``) at the
        points ``(x, y)``."""
        rows, x = _rows(data, x)
        y = np.asarray(y, float)
        weight = np.clip(rows - rows.min(axis=1, keepdims=True), 0.0, None)
        total = np.maximum(weight.sum(axis=1), _TINY_SUM)

        def mean(v: np.ndarray) -> np.ndarray:
            out: np.ndarray = (weight * v).sum(axis=1) / total
            return out

        cx, cy = mean(x), mean(y)
        sx = np.sqrt(np.maximum(mean(x**2) - cx**2, _TINY_SUM))
        sy = np.sqrt(np.maximum(mean(y**2) - cy**2, _TINY_SUM))
        volume = total * np.ptp(x) * np.ptp(y) / max(len(x), 1)
        guessed = {"amplitude": volume, "centerx": cx, "centery": cy, "sigmax": sx, "sigmay": sy}
        guessed = {**_squeeze(data, guessed), **values}
        return self.make_params(**{self.prefix + name: v for name, v in guessed.items()})


_TINY_SUM = 1e-300
