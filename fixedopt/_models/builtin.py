"""The built-in models: lmfit's ``GaussianModel``, ``PseudoVoigtModel``, ... with its
parameter hints (``sigma >= 0``, ``fraction`` in ``[0, 1]``), derived parameters
(``fwhm``, ``height``: ties, reported with propagated errors) and ``guess``.

The derived expressions are lmfit's, with its rounded factors (``2.3548200``) written at
full precision."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from fixedopt._models import lineshapes
from fixedopt._models.model import Model, with_parameters
from fixedopt._models.parameters import Parameters

_TINY = lineshapes.TINY
Hints = dict[str, dict[str, Any]]  # parameter name -> value, vary, min, max, expr


def _rows(data: Any, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """``data`` as ``(B, m)`` and ``x`` as ``(m,)``."""
    data, x = np.asarray(data, float), np.asarray(x, float)
    if data.ndim not in (1, 2):
        raise ValueError(f"`data` must have shape (m,) or (B, m), got {data.shape}")
    if data.shape[-1:] != x.shape:
        raise ValueError(f"`data` ({data.shape}) must end with the shape of `x` {x.shape}")
    return np.atleast_2d(data), x


def _squeeze(data: Any, values: dict[str, np.ndarray]) -> dict[str, Any]:
    return values if np.ndim(data) > 1 else {k: float(v[0]) for k, v in values.items()}


def peak_guess(data: Any, x: Any, ampscale: float = 1.0, sigscale: float = 1.0) -> dict[str, Any]:
    """lmfit's ``guess_from_peak`` for each row: ``center`` the mean ``x`` above half
    maximum, ``sigma`` half that range, ``amplitude`` three times the range of the data
    times ``sigma``."""
    rows, x = _rows(data, x)
    order = np.argsort(x)
    x, rows = x[order], rows[:, order]
    top, bottom = rows.max(axis=1), rows.min(axis=1)
    above = rows > ((top + bottom) / 2.0)[:, None]
    count = above.sum(axis=1)
    first = np.where(above, x, np.inf).min(axis=1)
    last = np.where(above, x, -np.inf).max(axis=1)
    wide = count > 2
    sigma = np.where(wide, (last - first) / 2.0, (x.max() - x.min()) / 6.0)
    mean = np.where(above, x, 0.0).sum(axis=1) / np.maximum(count, 1)
    center = np.where(wide, mean, x[np.argmax(rows, axis=1)])
    amplitude = 3.0 * (top - bottom) * sigma * ampscale
    return _squeeze(data, {"amplitude": amplitude, "center": center, "sigma": sigma * sigscale})


class _Builtin(Model):
    """A built-in model: its hints set at construction; ``guess`` through :meth:`_guess`."""

    func: Any = None
    hint_table: ClassVar[Hints] = {}
    guess_scale: tuple[float, float] | None = (1.0, 1.0)

    def __init__(self, prefix: str = "", **options: Any) -> None:
        super().__init__(type(self).func, prefix, **options)
        for name, hint in self.hint_table.items():
            self.set_param_hint(name, **hint)

    def guess(self, data: Any, x: Any, **values: Any) -> Parameters:
        """Start values from ``data`` (``(m,)``, or ``(B, m)``: one per row), as lmfit's
        ``guess``; ``values`` override them by name (without the prefix)."""
        guessed = {**self._guess(data, x), **values}
        return self.make_params(**{self.prefix + name: v for name, v in guessed.items()})

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        if self.guess_scale is None:
            raise NotImplementedError(f"{self!r} has no guess; use make_params")
        return peak_guess(data, x, *self.guess_scale)


def _polyfit(data: Any, x: Any, degree: int) -> np.ndarray:
    """Least-squares polynomial coefficients of each row, highest power first."""
    rows, x = _rows(data, x)
    return np.asarray(np.polyfit(x, rows.T, degree)).reshape(degree + 1, len(rows))


class ConstantModel(_Builtin):
    """``c`` (lmfit's ``ConstantModel``)."""

    func = staticmethod(lineshapes.constant)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        return _squeeze(data, {"c": np.atleast_2d(np.asarray(data, float)).mean(axis=1)})


class LinearModel(_Builtin):
    """``slope * x + intercept``."""

    func = staticmethod(lineshapes.linear)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        slope, intercept = _polyfit(data, x, 1)
        return _squeeze(data, {"slope": slope, "intercept": intercept})


class QuadraticModel(_Builtin):
    """``a * x**2 + b * x + c``."""

    func = staticmethod(lineshapes.parabolic)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        a, b, c = _polyfit(data, x, 2)
        return _squeeze(data, {"a": a, "b": b, "c": c})


class PolynomialModel(_Builtin):
    """``c0 + c1 x + ... + c{degree} x**degree`` (``degree`` from 0 to 7, as lmfit)."""

    func = staticmethod(lineshapes.polynomial)

    def __init__(self, degree: int, prefix: str = "") -> None:
        if not isinstance(degree, int) or not 0 <= degree <= 7:
            raise ValueError(f"`degree` must be an integer from 0 to 7, got {degree!r}")
        self.degree = degree
        Model.__init__(self, _polynomial(degree), prefix, name="polynomial")

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        coefficients = _polyfit(data, x, self.degree)[::-1]
        return _squeeze(data, {f"c{i}": c for i, c in enumerate(coefficients)})


def _polynomial(degree: int) -> Any:
    """``lineshapes.polynomial`` with the keywords ``c0 ... c{degree}`` in its signature."""
    names = [f"c{i}" for i in range(degree + 1)]

    def polynomial(x: Any, **coefficients: Any) -> Any:
        return lineshapes.polynomial(x, *(coefficients[name] for name in names))

    return with_parameters(polynomial, ("x",), names, default=0.0)


class ExponentialModel(_Builtin):
    """``amplitude * exp(-x / decay)``."""

    func = staticmethod(lineshapes.exponential)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        rows, x = _rows(data, x)
        slope, offset = _polyfit(np.log(np.abs(rows) + 1.0e-15), x, 1)
        return _squeeze(data, {"amplitude": np.exp(offset), "decay": -1.0 / slope})


class BiExponentialModel(_Builtin):
    """``amplitude1 exp(-x / decay1) + amplitude2 exp(-x / decay2)`` (not in lmfit)."""

    func = staticmethod(lineshapes.biexponential)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        one = ExponentialModel()._guess(data, x)
        amplitude, decay = np.asarray(one["amplitude"]) / 2.0, np.asarray(one["decay"])
        return {"amplitude1": amplitude, "decay1": decay / 2, "amplitude2": amplitude,
                "decay2": 2 * decay}  # fmt: skip


class PowerLawModel(_Builtin):
    """``amplitude * x**exponent``."""

    func = staticmethod(lineshapes.powerlaw)

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        rows, x = _rows(data, x)
        slope, offset = _polyfit(np.log(np.abs(rows) + 1.0e-14), np.log(np.abs(x) + 1.0e-14), 1)
        return _squeeze(data, {"amplitude": np.exp(offset), "exponent": slope})


class StepModel(_Builtin):
    """A step of ``amplitude`` at ``center``, width ``sigma``; ``form`` as lmfit's."""

    func = staticmethod(lineshapes.step)
    guess_scale = None


class RectangleModel(_Builtin):
    """A step up at ``center1`` and down at ``center2``; ``form`` as lmfit's."""

    func = staticmethod(lineshapes.rectangle)
    hint_table: ClassVar[Hints] = {"midpoint": {"expr": "({prefix}center1 + {prefix}center2) / 2"}}
    guess_scale = None
