"""``spectra``: the least-squares problem, noisy sums of Gaussian peaks fitted per row.

Each row is one spectrum on a grid of ``m`` points: ``peaks`` Gaussians (amplitude,
center, width each) plus a constant baseline, so ``n = 3 * peaks + 1`` parameters,
ordered ``[amplitudes, centers, widths, baseline]``. Each spectrum knows (fixes) its own
random half of the centers and widths, about 30% of its parameters; the rest start
where a peak finder would put them and are bounded. Like ``python -m fixedopt demo``,
except that peak centers keep at least half a slot (``0.35 / peaks``) apart: two nearly
coincident peaks make a row degenerate, and one such row took scipy 3763 Jacobians
and fixedopt's LM 452 steps (the others: ~10), which turns a throughput benchmark
into a straggler one (that case is measured on its own). The Jacobian is written out
for the NumPy methods.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from benchmarks.problems import LeastSquares, Problem, rounded

NOISE = 0.02
KNOWN_FRACTION = 0.5  # of the centers and widths


def _grid(n: int) -> np.ndarray:
    return np.linspace(0.0, 1.0, max(200, 20 * n))


def _split(params):
    peaks = (params.shape[-1] - 1) // 3
    amplitude = params[..., :peaks]
    center = params[..., peaks : 2 * peaks]
    width = params[..., 2 * peaks : 3 * peaks]
    return amplitude, center, width, params[..., -1:]


def _peaks(params, grid, xp):
    """Per-peak shapes ``exp(-0.5 ((t - c) / w)^2)`` and ``(t - c) / w``: (..., peaks, m)."""
    _, center, width, _ = _split(params)
    scaled = (grid - center[..., None]) / width[..., None]
    return xp.exp(-0.5 * scaled**2), scaled


def model(params, grid, xp=np):
    """The spectrum of ``params`` on ``grid``, for one row or a batch (NumPy or JAX)."""
    amplitude, _, _, baseline = _split(params)
    shape, _ = _peaks(params, grid, xp)
    return (amplitude[..., None] * shape).sum(axis=-2) + baseline


def jacobian(params, grid) -> np.ndarray:
    """``d model / d params`` in NumPy: ``(..., m, n)``."""
    amplitude, _, width, _ = _split(params)
    shape, scaled = _peaks(params, grid, np)
    d_amplitude = shape
    d_center = amplitude[..., None] * shape * scaled / width[..., None]
    d_width = d_center * scaled
    d_baseline = np.ones_like(shape[..., :1, :])
    return np.swapaxes(np.concatenate([d_amplitude, d_center, d_width, d_baseline], -2), -1, -2)


def spectra(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> Problem:
    """``spectra``: ``batch`` noisy spectra, ``n = 3 * peaks + 1`` parameters each."""
    if n < 4 or (n - 1) % 3:
        raise ValueError(f"spectra needs n = 3 * peaks + 1 (4, 7, 10, ..., 64), got {n}")
    peaks, grid = (n - 1) // 3, _grid(n)
    rng = np.random.default_rng(seed)
    amplitude = rng.uniform(0.5, 2.0, (batch, peaks))
    spacing = 0.7 / peaks  # one slot per peak in [0.15, 0.85], jittered within its slot
    center = 0.15 + spacing * (np.arange(peaks) + rng.uniform(0.25, 0.75, (batch, peaks)))
    width = rng.uniform(0.03, 0.08, (batch, peaks)) * min(1.0, 3.0 / peaks) ** 0.5
    truth = np.concatenate([amplitude, center, width, rng.uniform(-0.1, 0.1, (batch, 1))], 1)
    observed = rounded(model(truth, grid) + NOISE * rng.normal(size=(batch, grid.size)), dtype)
    fixed = np.zeros(truth.shape, bool)
    fixed[:, peaks : 3 * peaks] = rng.random((batch, 2 * peaks)) < KNOWN_FRACTION
    start = truth * rng.uniform(0.8, 1.2, truth.shape)  # amplitudes, widths within 20%
    start[:, peaks : 2 * peaks] = center + 0.3 * width * rng.normal(size=center.shape)
    start[:, -1] = 0.0
    lower = np.concatenate([np.zeros(2 * peaks), np.full(peaks, 0.005), [-1.0]])
    upper = np.concatenate([np.full(peaks, 10.0), np.ones(peaks), np.full(peaks, 0.5), [1.0]])
    start = rounded(np.clip(np.where(fixed, truth, start), lower, upper), dtype)

    def jax_residual(params, observed):
        return model(params, jnp.asarray(grid, params.dtype), jnp) - observed

    def jax_fun(params, observed):
        r = jax_residual(params, observed)
        return 0.5 * jnp.dot(r, r)

    def numpy_residual(params, observed):
        return model(params, grid) - observed

    def numpy_jacobian(params, observed):
        return jacobian(params, grid)

    def numpy_fun(params, observed):
        r = numpy_residual(params, observed)
        return 0.5 * (r * r).sum(-1), np.einsum("...m,...mn->...n", r, jacobian(params, grid))

    residual_form = LeastSquares(jax_residual, numpy_residual, numpy_jacobian)
    return Problem(
        "spectra",
        jax_fun,
        numpy_fun,
        (observed,),
        start,
        fixed,
        dtype,
        bounds=(lower, upper),
        least_squares=residual_form,
    )
