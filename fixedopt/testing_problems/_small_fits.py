"""The small fits of the ``tiny`` benchmark suite, as NumPy data from a fixed seed
(float32).

- Gpufit's CPU-vs-GPU protocol (Przybylski et al., Sci. Rep. 2017; Gpufit's
  ``examples/python/gpufit_cpufit`` speed comparison): a 2D Gaussian on 5x5 pixels,
  parameters ``(amplitude, x0, y0, width, background)``.
- A fluorescence-decay histogram: two exponentials plus a background, 128 bins, the
  short lifetime known (fixed) in half the fits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

SPOT_GRID = 5  # pixels per side
PIXEL_Y, PIXEL_X = (a.ravel() for a in np.mgrid[0:SPOT_GRID, 0:SPOT_GRID].astype(np.float32))
GAUSSIAN_TRUTH = np.array([500.0, 2.0, 2.0, 1.0, 10.0])  # amplitude, x0, y0, width, background
# Gpufit's noise: sd = (mean signal of the spot over its 4.292 px effective area) / SNR 10.
GAUSSIAN_NOISE = (2 * np.pi * 500.0 * 1.0**2 / 4.292**2) / 10.0
DECAY_BINS = 128
DECAY_TIME = np.linspace(0.0, 12.5, DECAY_BINS, endpoint=False, dtype=np.float32)  # ns
DECAY_TRUTH = np.array([800.0, 0.5, 300.0, 3.0, 5.0])  # a1, tau1, a2, tau2, background
FIT_PARAMETERS = {"gaussian": ("amplitude", "x0", "y0", "width", "background"),
                  "decay": ("a1", "tau1", "a2", "tau2", "background")}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Fits:
    """``B`` fits: truth, start and data (float32), which entries are fixed."""

    name: str
    truth: np.ndarray  # (B, 5)
    x0: np.ndarray  # (B, 5): fixed entries hold the truth
    data: np.ndarray  # (B, m)
    fixed: np.ndarray  # (B, 5) bool

    def rows(self, count: int) -> Fits:
        return Fits(self.name, *(a[:count] for a in (self.truth, self.x0, self.data, self.fixed)))


def gaussian_model(p: Any, xp: Any = jnp) -> Any:
    """The 2D Gaussian on the 5x5 grid; ``p`` of shape ``(..., 5)``, pixels last."""
    amplitude, x0, y0, width, background = (p[..., k : k + 1] for k in range(5))
    radius = (PIXEL_X - x0) ** 2 + (PIXEL_Y - y0) ** 2
    return amplitude * xp.exp(-radius / (2 * width**2)) + background


def gaussian_jacobian(p: np.ndarray) -> np.ndarray:
    """``d model / d p`` in NumPy, ``(..., 25, 5)`` (for the scipy and lmfit loops)."""
    amplitude, x0, y0, width, _ = (p[..., k : k + 1] for k in range(5))
    spot = np.exp(-((PIXEL_X - x0) ** 2 + (PIXEL_Y - y0) ** 2) / (2 * width**2))
    columns = [spot, amplitude * spot * (PIXEL_X - x0) / width**2,
               amplitude * spot * (PIXEL_Y - y0) / width**2,
               amplitude * spot * ((PIXEL_X - x0) ** 2 + (PIXEL_Y - y0) ** 2) / width**3,
               np.ones_like(spot)]  # fmt: skip
    return np.stack(columns, axis=-1)


def decay_model(p: Any, xp: Any = jnp) -> Any:
    """Two exponentials plus a background over the 128 bins; ``p`` of shape ``(..., 5)``."""
    a1, tau1, a2, tau2, background = (p[..., k : k + 1] for k in range(5))
    return a1 * xp.exp(-DECAY_TIME / tau1) + a2 * xp.exp(-DECAY_TIME / tau2) + background


def decay_jacobian(p: np.ndarray) -> np.ndarray:
    """``d model / d p`` in NumPy, ``(..., 128, 5)``."""
    a1, tau1, a2, tau2, _ = (p[..., k : k + 1] for k in range(5))
    e1, e2 = np.exp(-DECAY_TIME / tau1), np.exp(-DECAY_TIME / tau2)
    columns = [e1, a1 * e1 * DECAY_TIME / tau1**2, e2, a2 * e2 * DECAY_TIME / tau2**2,
               np.ones_like(e1)]  # fmt: skip
    return np.stack(columns, axis=-1)


def gaussian_fits(count: int, seed: int = 0) -> Fits:
    """Gpufit's protocol: every parameter of the truth times U(0.9, 1.1) per fit, the
    start the truth times another U(0.9, 1.1), Gaussian noise of sd ``GAUSSIAN_NOISE``."""
    rng = np.random.default_rng(seed)
    truth = (GAUSSIAN_TRUTH * rng.uniform(0.9, 1.1, (count, 5))).astype(np.float32)
    x0 = (truth * rng.uniform(0.9, 1.1, (count, 5))).astype(np.float32)
    clean = gaussian_model(truth.astype(np.float64), np)
    data = (clean + rng.normal(0.0, GAUSSIAN_NOISE, clean.shape)).astype(np.float32)
    return Fits("gaussian", truth, x0, data, np.zeros((count, 5), bool))


def decay_fits(count: int, seed: int = 0) -> Fits:
    """Truth times U(0.8, 1.2), start the truth times U(0.7, 1.3), Poisson-like noise
    (sd ``sqrt(model)``); ``tau1`` fixed at its truth in every other fit.

    Example:
      >>> from fixedopt.testing_problems import decay_fits
      >>> fits = decay_fits(6)
      >>> fits.data.shape, fits.fixed[:, 1].tolist()
      ((6, 128), [True, False, True, False, True, False])
    """
    rng = np.random.default_rng(seed)
    truth = (DECAY_TRUTH * rng.uniform(0.8, 1.2, (count, 5))).astype(np.float32)
    fixed = np.zeros((count, 5), bool)
    fixed[::2, 1] = True
    x0 = np.where(fixed, truth, truth * rng.uniform(0.7, 1.3, (count, 5))).astype(np.float32)
    clean = decay_model(truth.astype(np.float64), np)
    data = (clean + rng.normal(size=clean.shape) * np.sqrt(clean)).astype(np.float32)
    return Fits("decay", truth, x0, data, fixed)


# name: (model, its NumPy Jacobian, the fits)
FIT_MODELS: dict[str, tuple[Callable[..., Any], Callable[..., np.ndarray], Callable[..., Fits]]] = {
    "gaussian": (gaussian_model, gaussian_jacobian, gaussian_fits),
    "decay": (decay_model, decay_jacobian, decay_fits),
}
