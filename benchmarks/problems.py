"""Benchmark problems: a batch of independent rows, each with its own fixed mask.

A :class:`Problem` carries everything every method needs, for ``B`` rows of size
``n``: the JAX objective of ONE row (``jax_fun(x, *row_args)``), a NumPy objective
returning ``(value, gradient)`` (it works on one row and on a whole batch: every
operation is along the last axis), batched ``args`` (leading axis ``B``), the starts
``x0`` and the mask ``fixed`` (``True`` = fixed at its ``x0`` value). All data is
NumPy float64, generated from a fixed seed; for ``dtype="float32"`` it is rounded to
float32 first, so that every method (scipy in float64 too) starts from the same numbers.
The methods move it to the device in ``dtype``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from scipy.linalg import eigvalsh_tridiagonal

FIXED_FRACTION = 0.3
QUAD_CONDITION = 1e3
STRAGGLER_CONDITION = 1e5


class LeastSquares(NamedTuple):
    """The residual form of a least-squares problem (``value = 0.5 * sum(r**2)``)."""

    jax_residual: Callable  # jax_residual(x, *row_args) -> (m,), for ONE row
    numpy_residual: Callable  # numpy_residual(x, *row_args) -> (..., m)
    numpy_jacobian: Callable  # numpy_jacobian(x, *row_args) -> (..., m, n)


@dataclasses.dataclass(frozen=True)
class Problem:
    """One benchmark instance: ``B`` rows of ``n`` unknowns, each row its own mask."""

    name: str
    jax_fun: Callable  # jax_fun(x, *row_args) -> scalar, for ONE row
    numpy_fun: Callable  # numpy_fun(x, *args) -> (value, gradient), one row or a batch
    args: tuple  # NumPy arrays, each with the leading batch axis B
    x0: np.ndarray  # (B, n) float64 (float32-representable when dtype is float32)
    fixed: np.ndarray  # (B, n) bool
    dtype: str = "float64"  # what the JAX methods compute in
    bounds: tuple[np.ndarray, np.ndarray] | None = None  # (lower, upper), each (n,)
    least_squares: LeastSquares | None = None

    @property
    def batch(self) -> int:
        return self.x0.shape[0]

    @property
    def size(self) -> int:
        return self.x0.shape[1]

    def row_args(self, i: int) -> tuple:
        """The ``args`` of row ``i`` (for a per-row NumPy call)."""
        return tuple(a[i] for a in self.args)

    def with_mask(self, seed: int) -> Problem:
        """The same problem with a freshly drawn mask (same shape, other pattern)."""
        return dataclasses.replace(
            self, fixed=random_mask(np.random.default_rng(seed), self.x0.shape)
        )


def random_mask(rng: np.random.Generator, shape) -> np.ndarray:
    """About :data:`FIXED_FRACTION` of each row fixed, a different pattern per row."""
    return rng.random(shape) < FIXED_FRACTION


def rounded(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` as float64 holding values exactly representable in ``dtype``."""
    return np.asarray(array, dtype).astype(np.float64)


def _rows_dot(a, b):
    """Row-wise dot product along the last axis (one row or a batch; NumPy or JAX)."""
    return (a * b).sum(axis=-1)


# --- quad: per-row convex quadratic with a tridiagonal Hessian -------------------------


def tridiagonal_matvec(diag, off, x):
    """``A @ x`` for the symmetric tridiagonal ``A``, along the last axis (NumPy or JAX)."""
    xp = jnp if isinstance(x, jnp.ndarray) else np
    zero = xp.zeros((*x.shape[:-1], 1), dtype=x.dtype)
    upper = xp.concatenate([off * x[..., 1:], zero], axis=-1)
    lower = xp.concatenate([zero, off * x[..., :-1]], axis=-1)
    return diag * x + upper + lower


def quad_jax(x, diag, off, b):
    """``0.5 x^T A x - b^T x`` for one row; ``A`` given by its diagonals."""
    return 0.5 * jnp.dot(x, tridiagonal_matvec(diag, off, x)) - jnp.dot(b, x)


def quad_numpy(x, diag, off, b):
    """Value and gradient of :func:`quad_jax` in NumPy."""
    ax = tridiagonal_matvec(diag, off, x)
    return 0.5 * _rows_dot(x, ax) - _rows_dot(b, x), ax - b


def quad_hessians(rng: np.random.Generator, batch: int, n: int, condition=QUAD_CONDITION):
    """Per-row SPD tridiagonals with condition number ``condition``.

    Each row is a path-graph Laplacian with random edge weights (eigenvalues in
    ``[0, lmax]``), shifted by ``lmax / (cond - 1)`` so that its eigenvalues lie in
    ``[shift, lmax + shift]`` and ``cond(A) = condition`` exactly.
    """
    weights = rng.uniform(0.5, 2.0, size=(batch, n - 1))
    degree = np.zeros((batch, n))
    degree[:, 1:] += weights
    degree[:, :-1] += weights
    lmax = np.array(
        [
            eigvalsh_tridiagonal(d, -w, select="i", select_range=(n - 1, n - 1))[0]
            for d, w in zip(degree, weights)
        ]
    )
    shift = lmax / (condition - 1.0)
    return degree + shift[:, None], -weights


def quad(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> Problem:
    """``quad``: per-row ``0.5 x^T A x - b^T x``, tridiagonal ``A`` passed via ``args``."""
    rng = np.random.default_rng(seed)
    diag, off = quad_hessians(rng, batch, n)
    b = rng.normal(size=(batch, n))
    x0 = rng.normal(size=(batch, n))
    fixed = random_mask(rng, (batch, n))
    args = tuple(rounded(a, dtype) for a in (diag, off, b))
    return Problem("quad", quad_jax, quad_numpy, args, rounded(x0, dtype), fixed, dtype)


def straggler(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> Problem:
    """``straggler``: the ``quad`` batch with its last row made ill-conditioned.

    The other rows (and every mask) are those of ``quad(batch, n, seed)``. The last row's
    Hessian is diagonal with eigenvalues log-spaced over :data:`STRAGGLER_CONDITION`,
    in random order, so that fixing entries leaves it ill-conditioned: L-BFGS needs
    about 15x the steps of the other rows (1456 vs at most 101 at n=64, B=256).
    """
    base = quad(batch, n, seed, dtype)
    rng = np.random.default_rng(seed + 10_000)
    spread = np.sqrt(STRAGGLER_CONDITION)
    args = tuple(a.copy() for a in base.args)
    args[0][-1] = rounded(rng.permutation(np.geomspace(1 / spread, spread, n)), dtype)
    args[1][-1] = 0.0
    return dataclasses.replace(base, name="straggler", args=args)


# --- dquad: one dense SPD matrix shared by every row, captured by the objective ------


def spd_matrix(rng: np.random.Generator, n: int, condition=QUAD_CONDITION) -> np.ndarray:
    """A dense SPD matrix with eigenvalues log-spaced in ``[10 / condition, 10]``."""
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    eigenvalues = np.geomspace(10.0 / condition, 10.0, n)
    return (q * eigenvalues) @ q.T


def dquad(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> Problem:
    """``dquad``: per-row ``0.5 x^T A x - b^T x`` with ONE ``A`` closed over by ``fun``.

    ``A`` is a constant of the objective, not an argument: a solver that broadcasts
    captured constants per row (``lax.cond`` under ``vmap``, say) pays ``B`` copies.
    """
    rng = np.random.default_rng(seed)
    matrix = rounded(spd_matrix(rng, n), dtype)
    matrix = 0.5 * (matrix + matrix.T)  # exactly symmetric after rounding
    b = rng.normal(size=(batch, n))
    x0 = rng.normal(size=(batch, n))
    fixed = random_mask(rng, (batch, n))

    def dquad_jax(x, b):
        shared = jnp.asarray(matrix, x.dtype)
        return 0.5 * jnp.dot(x, shared @ x) - jnp.dot(b, x)

    def dquad_numpy(x, b):
        ax = x @ matrix  # symmetric: works for one row and for a batch of rows
        return 0.5 * _rows_dot(x, ax) - _rows_dot(b, x), ax - b

    args = (rounded(b, dtype),)
    return Problem("dquad", dquad_jax, dquad_numpy, args, rounded(x0, dtype), fixed, dtype)


# --- rosen: extended Rosenbrock, Moré, Garbow, Hillstrom (1981) problem 21 ------------


def rosen_jax(x):
    """``sum_i 100 (x_{2i} - x_{2i-1}^2)^2 + (1 - x_{2i-1})^2`` for one row."""
    odd, even = x[0::2], x[1::2]
    return jnp.sum(100.0 * (even - odd**2) ** 2 + (1.0 - odd) ** 2)


def rosen_numpy(x):
    """Value and gradient of :func:`rosen_jax` in NumPy."""
    odd, even = x[..., 0::2], x[..., 1::2]
    inner = even - odd**2
    grad = np.empty_like(x)
    grad[..., 0::2] = -400.0 * odd * inner - 2.0 * (1.0 - odd)
    grad[..., 1::2] = 200.0 * inner
    return np.sum(100.0 * inner**2 + (1.0 - odd) ** 2, axis=-1), grad


def rosen(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> Problem:
    """``rosen``: starts ``(-1.2, 1, -1.2, 1, ...)`` jittered by ``0.1 * normal``."""
    if n % 2:
        raise ValueError(f"rosen needs an even size n, got {n}")
    rng = np.random.default_rng(seed)
    x0 = np.tile([-1.2, 1.0], n // 2) + 0.1 * rng.normal(size=(batch, n))
    fixed = random_mask(rng, (batch, n))
    return Problem("rosen", rosen_jax, rosen_numpy, (), rounded(x0, dtype), fixed, dtype)
