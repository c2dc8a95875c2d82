"""``(J^T J)^{-1}`` of a small free block from its normal equations, with certificates of
rank and of accuracy: the covariance's first path, at the cost of a step.

A Levenberg–Marquardt step forms ``J^T J`` in one pass over ``J`` and solves it by an
elementwise Cholesky factorization (:mod:`fixedopt._solvers.small_linalg`); here the
same normal matrix of the unit-column ``J_F`` is formed (its sums in a wider dtype where
one exists: float64 for float32 with ``jax_enable_x64``), factored ``G = L L^T`` and
inverted, ``G^{-1} = L^{-T} L^{-1}``, all as whole-array arithmetic on one row (under
``vmap``, elementwise over the batch). Against the Householder QR of ``J``
(:mod:`fixedopt._results.small_inverse`) it reads ``J`` once instead of ``n`` times.

Forming ``G`` squares ``J``'s condition number, so a row is taken here only where the
result is certified accurate: with unit columns ``trace(G) = n_F`` and
``trace(G^{-1}) = |L^{-1}|_F^2``, so ``cond(G) <= n_F |L^{-1}|_F^2``; the rounding of
the sums (``m`` terms) and of the factorization (``n^2``) is bounded by
``eps_w (m + n^2) cond(G)`` relative, which must stay below :data:`TARGET` times the
square root of the input's ``eps`` (``eps_w``: the sums' dtype). The rank is certified
as the QR's: ``s_min(J_F)^2 >= 1 / trace(G^{-1})`` and ``s_max(J_F)^2 <= n_F``. A row
not certified goes on to the QR (then LAPACK's SVD); the choice is the row's own.

Golub & Van Loan, *Matrix Computations*, 4th ed., 4.2 (Cholesky) and 5.3.9 (the normal
equations' accuracy, ``eps cond(A)^2``); Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., 3.1 (inner products, ``gamma_m``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._numerics import reduce
from fixedopt._results import small_inverse
from fixedopt._solvers.small_linalg import cholesky_columns

# A row's inverse is accepted here where its error bound is at most this fraction of the
# square root of its dtype's eps: float64 rows to cond(J) ~ 400 (Gpufit, m = 25), and
# float32 rows summed in float64 to cond(J) ~ 6e4, near the QR's own rank cut-off.
TARGET = 1.0 / 16


def summed_in(dtype: jnp.dtype) -> jnp.dtype:
    """The dtype the normal matrix is summed and factored in: float64 where JAX has it,
    else float32 (at least the input's)."""
    wide = jax.dtypes.canonicalize_dtype(jnp.float64)
    return jnp.promote_types(dtype, wide)


def pays(dtype: jnp.dtype, n: int) -> bool:
    """Whether :func:`certified_inverse` is tried for ``n`` columns of ``dtype``: a small
    block whose sums are wider than its entries, or float64 (the widest; its rows
    certified up to a smaller condition number). A float32 block without x64 would pass
    only the best-conditioned rows: it keeps the QR."""
    dtype = jnp.dtype(dtype)
    wider = np.finfo(summed_in(dtype)).eps < np.finfo(dtype).eps
    return small_inverse.is_small(n) and bool(wider or dtype == jnp.float64)


def certified_inverse(jacobian: jax.Array, held: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``((J_F^T J_F)^{-1}, certified)`` of one row, as
    :func:`fixedopt._results.small_inverse.certified_inverse` (``J`` is ``(m, n)`` with
    unit or zero columns, ``held`` the columns out of ``F``), from the normal matrix;
    ``certified`` also says that the inverse is accurate (:data:`TARGET`)."""
    m, n = jacobian.shape
    wide = summed_in(jacobian.dtype)
    columns = [jnp.where(held[j], 0.0, jacobian[:, j]).astype(wide) for j in range(n)]
    normal, _ = _summed(columns, ())
    one = jnp.eye(n, dtype=bool) & held[:, None]
    return inverse_of_normal(jnp.where(one, 1.0, normal), held, m, jacobian.dtype)


def wide_normal(jacobian: jax.Array, residual: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(J^T J, |r|^2)`` of one row's ``(m, n)`` Jacobian and ``(m,)`` residuals, summed
    in :func:`summed_in` (float32 products are exact in float64), in one reduction: the
    matrix :func:`inverse_of_normal` reads once its columns are scaled to unit norm."""
    wide = summed_in(jacobian.dtype)
    columns = [jacobian[:, j].astype(wide) for j in range(jacobian.shape[1])]
    wide_residual = residual.astype(wide)
    normal, (squared,) = _summed(columns, (wide_residual * wide_residual,))
    return normal, squared


def _summed(
    columns: list[jax.Array], extra: tuple[jax.Array, ...]
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """The ``(n, n)`` Gram matrix of ``columns`` and the sums of ``extra``, all in one
    reduction (XLA's variadic reduce: one kernel that reads J once; as separate sums,
    2.8x the time of the spectra's covariance)."""
    n = len(columns)
    pairs = [(i, j) for i in range(n) for j in range(i + 1)]
    sums = reduce.together(tuple(columns[i] * columns[j] for i, j in pairs) + extra)
    normal = [[sums[0]] * n for _ in range(n)]
    for (i, j), total in zip(pairs, sums):
        normal[i][j] = normal[j][i] = total
    return jnp.stack([jnp.stack(row) for row in normal]), sums[len(pairs) :]


def inverse_of_normal(
    normal: jax.Array, held: jax.Array, m: int | jax.Array, dtype: jnp.dtype
) -> tuple[jax.Array, jax.Array]:
    """``(G^{-1}, certified)`` of one row's ``(n, n)`` normal matrix ``G`` of unit
    columns (held rows and columns 0, 1 on their diagonal), summed over ``m``
    residuals (static or traced) in its own dtype from entries of ``dtype``:
    :func:`certified_inverse`'s factorization, inverse and certificates, the inverse
    in ``dtype``."""
    n = normal.shape[0]
    wide = normal.dtype
    lower = cholesky_columns(normal)
    inverse = _lower_inverse(lower)
    free = [~held[j] for j in range(n)]
    squares = [jnp.where(free[i] & free[j], inverse[i][j] ** 2, 0.0)
               for i in range(n) for j in range(i + 1)]  # fmt: skip
    inverse_trace = functools.reduce(jnp.add, squares)  # trace(G_F^{-1})
    columns_free = jnp.sum(~held).astype(wide)  # trace(G_F): unit columns
    eps, eps_wide = (jnp.finfo(dtype).eps for dtype in (dtype, wide))
    cutoff = small_inverse.SAFETY * eps * jnp.maximum(m, n) * jnp.sqrt(columns_free)
    condition = columns_free * inverse_trace
    accurate = eps_wide * (m + n * n) * condition <= TARGET * np.sqrt(eps)
    certified = jnp.isfinite(inverse_trace) & (jnp.sqrt(inverse_trace) * cutoff < 1.0) & accurate
    # (L^{-T} L^{-1})_ij = sum over k >= max(i, j) of L^{-1}_ki L^{-1}_kj
    product = [[functools.reduce(jnp.add, [inverse[k][i] * inverse[k][j]
                                           for k in range(max(i, j), n)])
                for j in range(n)] for i in range(n)]  # fmt: skip
    return jnp.stack([jnp.stack(row) for row in product]).astype(dtype), certified


def _lower_inverse(lower: list[list[jax.Array]]) -> list[list[jax.Array]]:
    """``L^{-1}`` (``inverse[i][j]``, 0 above the diagonal) of a lower-triangular ``L``
    given as :func:`~fixedopt._solvers.small_linalg.cholesky_columns` gives it, by
    forward substitution, entry by entry."""
    n = len(lower)
    zero = jnp.zeros_like(lower[0][0])
    inverse = [[zero] * n for _ in range(n)]
    for j in range(n):
        inverse[j][j] = 1.0 / lower[j][j]
        for i in range(j + 1, n):
            total = functools.reduce(jnp.add, [lower[i][k] * inverse[k][j] for k in range(j, i)])
            inverse[i][j] = -total / lower[i][i]
    return inverse
