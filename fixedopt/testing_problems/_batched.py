"""The batched problems of the benchmark suites, each row its own fixed mask: NumPy
float64 data from a fixed seed, rounded to float32 first for ``dtype="float32"`` (the
same numbers)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt.__main__ import GRID, make_data, residuals

FIXED_FRACTION = 0.3
QUAD_CONDITION = 1e3
STRAGGLER_CONDITION = 1e5


@dataclasses.dataclass(frozen=True)
class BatchedProblem:
    """``B`` rows of ``n`` unknowns; NumPy forms take one row or a batch (last axis)."""

    name: str
    jax_fun: Callable[..., jax.Array]  # jax_fun(x, *row_args) -> scalar, for ONE row
    numpy_fun: Callable[..., Any] | None  # (x, *args) -> (value, gradient); None: JAX only
    args: tuple[np.ndarray, ...]  # NumPy arrays, each with the leading batch axis B
    x0: np.ndarray  # (B, n) float64 (float32-representable when dtype is float32)
    fixed: np.ndarray  # (B, n) bool
    dtype: str = "float64"  # what the JAX methods compute in
    bounds: tuple[np.ndarray, np.ndarray] | None = None  # (lower, upper), each (n,)
    jax_residual: Callable[..., jax.Array] | None = None  # (x, *row_args) -> (m,), ONE row
    numpy_residual: Callable[..., np.ndarray] | None = None  # (x, *args) -> (..., m)
    numpy_jacobian: Callable[..., np.ndarray] | None = None  # (x, *args) -> (..., m, n)

    @property
    def batch(self) -> int:
        return int(self.x0.shape[0])

    @property
    def size(self) -> int:
        return int(self.x0.shape[1])

    def row_args(self, i: int) -> tuple[np.ndarray, ...]:
        return tuple(a[i] for a in self.args)

    def rows(self, count: int) -> BatchedProblem:
        """The first ``count`` rows (rows are i.i.d.)."""
        args = tuple(a[:count] for a in self.args)
        return dataclasses.replace(self, x0=self.x0[:count], fixed=self.fixed[:count], args=args)

    def with_mask(
        self, seed: int, fraction: float = FIXED_FRACTION, shared: bool = False
    ) -> BatchedProblem:
        """The same problem with a freshly drawn mask (one for every row if ``shared``)."""
        rng = np.random.default_rng(seed)
        draw = rng.random((1 if shared else self.batch, self.size)) < fraction
        return dataclasses.replace(self, fixed=np.array(np.broadcast_to(draw, self.x0.shape)))


def rounded(array: Any, dtype: str) -> np.ndarray:
    """``array`` as float64 holding values exactly representable in ``dtype``."""
    return np.asarray(array, dtype).astype(np.float64)


def tridiagonal_matvec(diag: Any, off: Any, x: Any) -> Any:
    """``A @ x`` for the symmetric tridiagonal ``A``, along the last axis (NumPy or JAX)."""
    xp: Any = jnp if isinstance(x, jnp.ndarray) else np
    zero = xp.zeros((*x.shape[:-1], 1), dtype=x.dtype)
    upper = xp.concatenate([off * x[..., 1:], zero], axis=-1)
    lower = xp.concatenate([zero, off * x[..., :-1]], axis=-1)
    return diag * x + upper + lower


def quad_jax(x: jax.Array, diag: jax.Array, off: jax.Array, b: jax.Array) -> jax.Array:
    """``0.5 x^T A x - b^T x`` for one row; ``A`` given by its diagonals."""
    return 0.5 * jnp.dot(x, tridiagonal_matvec(diag, off, x)) - jnp.dot(b, x)


def quad_numpy(x: np.ndarray, diag: np.ndarray, off: np.ndarray, b: np.ndarray) -> Any:
    ax = tridiagonal_matvec(diag, off, x)
    return 0.5 * (x * ax).sum(-1) - (b * x).sum(-1), ax - b


def quad_hessians(
    rng: np.random.Generator, batch: int, n: int, condition: float = QUAD_CONDITION
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row SPD tridiagonals: path-graph Laplacians shifted to ``condition`` (scipy's
    tridiagonal eigensolver, imported here: scipy is not a dependency of fixedopt)."""
    from scipy.linalg import eigvalsh_tridiagonal

    weights = rng.uniform(0.5, 2.0, size=(batch, n - 1))
    degree = np.zeros((batch, n))
    degree[:, 1:] += weights
    degree[:, :-1] += weights
    top = [eigvalsh_tridiagonal(d, -w, select="i", select_range=(n - 1, n - 1))[0]
           for d, w in zip(degree, weights)]  # fmt: skip
    return degree + (np.array(top) / (condition - 1.0))[:, None], -weights


def quad(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> BatchedProblem:
    """``quad``: per-row ``0.5 x^T A x - b^T x``, tridiagonal ``A`` (cond 1e3) in ``args``.

    Example:
      >>> from fixedopt.testing_problems import quad
      >>> problem = quad(4, 8)
      >>> problem.x0.shape, [a.shape for a in problem.args]
      ((4, 8), [(4, 8), (4, 7), (4, 8)])
    """
    rng = np.random.default_rng(seed)
    diag, off = quad_hessians(rng, batch, n)
    b, x0 = rng.normal(size=(batch, n)), rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < FIXED_FRACTION
    args = tuple(rounded(a, dtype) for a in (diag, off, b))
    return BatchedProblem("quad", quad_jax, quad_numpy, args, rounded(x0, dtype), fixed, dtype)


def straggler(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> BatchedProblem:
    """``straggler``: the ``quad`` batch, its last row an ill-conditioned diagonal."""
    base = quad(batch, n, seed, dtype)
    args = tuple(a.copy() for a in base.args)
    rng = np.random.default_rng(seed + 10_000)
    spread = np.sqrt(STRAGGLER_CONDITION)  # diagonals log-spaced over the condition, permuted
    args[0][-1] = rounded(rng.permutation(np.geomspace(1 / spread, spread, n)), dtype)
    args[1][-1] = 0.0
    return dataclasses.replace(base, name="straggler", args=args)


def dquad(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> BatchedProblem:
    """``dquad``: ``0.5 x^T A x - b^T x`` with ONE dense SPD ``A`` captured by the objective."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    matrix = rounded((q * np.geomspace(10.0 / QUAD_CONDITION, 10.0, n)) @ q.T, dtype)
    matrix = 0.5 * (matrix + matrix.T)  # exactly symmetric after rounding
    b, x0 = rng.normal(size=(batch, n)), rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < FIXED_FRACTION

    def dquad_jax(x: jax.Array, b: jax.Array) -> jax.Array:
        return 0.5 * jnp.dot(x, jnp.asarray(matrix, x.dtype) @ x) - jnp.dot(b, x)

    def dquad_numpy(x: np.ndarray, b: np.ndarray) -> Any:
        ax = x @ matrix  # symmetric: one row or a batch of rows
        return 0.5 * (x * ax).sum(-1) - (b * x).sum(-1), ax - b

    args = (rounded(b, dtype),)
    return BatchedProblem("dquad", dquad_jax, dquad_numpy, args, rounded(x0, dtype), fixed, dtype)


def rosen_jax(x: jax.Array) -> jax.Array:
    """Extended Rosenbrock (Moré, Garbow, Hillstrom 1981, problem 21) for one row."""
    odd, even = x[0::2], x[1::2]
    return jnp.sum(100.0 * (even - odd**2) ** 2 + (1.0 - odd) ** 2)


def rosen_numpy(x: np.ndarray) -> Any:
    odd, even = x[..., 0::2], x[..., 1::2]
    inner = even - odd**2
    grad = np.empty_like(x)
    grad[..., 0::2] = -400.0 * odd * inner - 2.0 * (1.0 - odd)
    grad[..., 1::2] = 200.0 * inner
    return np.sum(100.0 * inner**2 + (1.0 - odd) ** 2, axis=-1), grad


def rosen(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> BatchedProblem:
    """``rosen``: starts ``(-1.2, 1, -1.2, 1, ...)`` jittered by ``0.1 * normal``."""
    rng = np.random.default_rng(seed)
    x0 = np.tile([-1.2, 1.0], n // 2) + 0.1 * rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < FIXED_FRACTION
    return BatchedProblem("rosen", rosen_jax, rosen_numpy, (), rounded(x0, dtype), fixed, dtype)


def _peaks(params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-peak shapes ``exp(-0.5 s^2)`` and ``s = (t - c) / w``, ``(..., peaks, m)``."""
    _, center, width = np.split(params[..., :-1], 3, axis=-1)
    scaled = (GRID - center[..., None]) / width[..., None]
    return np.exp(-0.5 * scaled**2), scaled


def spectra_residual(params: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The demo's residuals in NumPy, for one row or a batch."""
    amplitude = np.split(params[..., :-1], 3, axis=-1)[0]
    peaks = (amplitude[..., None] * _peaks(params)[0]).sum(-2)
    residual: np.ndarray = peaks + params[..., -1:] - observed
    return residual


def spectra_jacobian(params: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """``d residual / d params``, ``(..., m, n)``."""
    amplitude, _, width = np.split(params[..., :-1], 3, axis=-1)
    shape, scaled = _peaks(params)
    d_center = amplitude[..., None] * shape * scaled / width[..., None]
    columns = [shape, d_center, d_center * scaled, np.ones_like(shape[..., :1, :])]
    return np.swapaxes(np.concatenate(columns, -2), -1, -2)


def spectra_numpy(params: np.ndarray, observed: np.ndarray) -> Any:
    r = spectra_residual(params, observed)
    gradient = np.einsum("...m,...mn->...n", r, spectra_jacobian(params, observed))
    return 0.5 * (r * r).sum(-1), gradient


def spectra_jax(params: jax.Array, observed: jax.Array) -> jax.Array:
    r = residuals(params, observed)
    return 0.5 * jnp.dot(r, r)


def spectra(batch: int, n: int = 10, seed: int = 0, dtype: str = "float64") -> BatchedProblem:
    """``spectra``: the demo's noisy 3-peak spectra (``python -m fixedopt demo``, the one
    generator), half the centers and widths known and the peaks slotted apart."""
    if n != 10:
        raise ValueError(f"spectra has n = 10 (3 peaks and a baseline), got {n}")
    _, observed, x0, fixed, bounds = make_data(batch, seed, dtype, known=0.5, slotted=True)
    start = rounded(np.clip(np.asarray(x0, np.float64), *bounds), dtype)
    return BatchedProblem("spectra", spectra_jax, spectra_numpy, (rounded(observed, dtype),),
                          start, np.asarray(fixed), dtype, bounds, residuals, spectra_residual,
                          spectra_jacobian)  # fmt: skip


BATCHED: dict[str, Callable[..., BatchedProblem]] = {
    "quad": quad, "dquad": dquad, "rosen": rosen, "straggler": straggler, "spectra": spectra,
}  # fmt: skip
