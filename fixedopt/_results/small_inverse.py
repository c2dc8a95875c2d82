"""``(J^T J)^{-1}`` of a small free block as elementwise arithmetic, with a rank
certificate: the covariance's fast path.

A vmapped ``jnp.linalg.svd`` or ``qr`` is a LAPACK call per row on XLA:CPU (and a
custom call that fuses with nothing on every backend): for 100,000 5x5 blocks it was
three quarters of ``curve_fit``'s time, where the fit's own steps solve the same normal
equations elementwise (:mod:`fixedopt._solvers.small_linalg`). Here the QR
factorization of ``J`` is Householder's, written over the ``n`` columns as whole-array
operations on one row (under ``vmap``, elementwise over the batch: XLA fuses them),
and ``R^{-1}`` by back-substitution the same way; ``(J^T J)^{-1} = R^{-1} R^{-T}``, as
accurate as the LAPACK path (``eps * cond(J)``).

The rank is not computed; it is certified: ``s_min(J) >= 1 / |R^{-1}|_F`` and
``s_max(J) <= |J|_F``, so a row with ``1 / |R^{-1}|_F`` above ``SAFETY`` times scipy's
cut-off ``eps * max(m, n) * |J|_F`` has full rank by scipy's count. A row not certified
(rank-deficient, close to it, or not finite) is left to the SVD path of
:mod:`fixedopt._results.covariance`, which keeps scipy's pseudo-inverse semantics.

Golub & Van Loan, *Matrix Computations*, 4th ed., chapter 5 (Householder QR), and
``|A^{-1}|_2 <= |A^{-1}|_F``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Free blocks of at most this many columns take the elementwise path (the program
# grows with n: n Householder steps and n back-substitution steps).
SMALL_N = 16
# The certificate's margin over scipy's cut-off, for the rounding of |R^{-1}|_F and of
# the SVD that would count the rank.
SAFETY = 4.0


def is_small(n: int) -> bool:
    """Whether a free block of ``n`` columns takes :func:`certified_inverse`."""
    return n <= SMALL_N


def certified_inverse(jacobian: jax.Array, held: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``((J_F^T J_F)^{-1}, certified)`` of one row: ``J`` is ``(m, n)`` with unit (or
    zero) columns, ``held`` the columns out of the free block ``F`` (their rows and
    columns of the inverse are left to the caller to discard); ``certified``: ``J_F``
    has full numerical rank by scipy's cut-off, and the inverse is finite."""
    m, n = jacobian.shape
    # Held columns become unit columns of their own rows: R stays triangular with
    # a unit-sized pivot there, and the free block's R is J_F's.
    own_rows = jnp.diag(held.astype(jacobian.dtype))
    augmented = jnp.concatenate([jnp.where(held[None, :], 0.0, jacobian), own_rows])
    r_inverse = _upper_inverse(_householder_r(augmented))
    both_free = ~held[:, None] & ~held[None, :]
    inverse = jnp.where(both_free, r_inverse, 0.0)
    inverse_norm = jnp.sqrt(jnp.sum(inverse**2))
    jacobian_norm = jnp.sqrt(jnp.sum(jnp.where(held[None, :], 0.0, jacobian) ** 2))
    cutoff = SAFETY * jnp.finfo(jacobian.dtype).eps * max(m, n) * jacobian_norm
    certified = jnp.isfinite(inverse_norm) & (inverse_norm * cutoff < 1.0)
    product = jnp.sum(r_inverse[:, None, :] * r_inverse[None, :, :], axis=-1)
    return product, certified


def _householder_r(matrix: jax.Array) -> jax.Array:
    """The ``(n, n)`` upper-triangular ``R`` of ``matrix = Q R`` (``(M, n)``, ``M >= n``),
    by ``n`` Householder reflections, each a whole-array update of ``matrix``."""
    rows, n = matrix.shape
    index = jnp.arange(rows)
    for k in range(n):
        column = jnp.where(index >= k, matrix[:, k], 0.0)
        norm = jnp.sqrt(jnp.sum(column**2))
        alpha = jnp.where(matrix[k, k] >= 0, -norm, norm)  # H x = alpha e_k, no cancellation
        v = column - jnp.where(index == k, alpha, 0.0)
        squared = jnp.sum(v**2)
        scale = jnp.where(squared > 0, 2.0 / jnp.where(squared > 0, squared, 1.0), 0.0)
        projection = jnp.sum(v[:, None] * matrix, axis=0)  # v^T A, a reduction (no dot)
        matrix = matrix - scale * v[:, None] * projection[None, :]
    return jnp.triu(matrix[:n, :])


def _upper_inverse(r: jax.Array) -> jax.Array:
    """``R^{-1}`` of an upper-triangular ``(n, n)`` ``R``, by back-substitution over the
    rows (each step a whole-row update; rows not yet solved are 0)."""
    n = r.shape[0]
    identity = jnp.eye(n, dtype=r.dtype)
    index = jnp.arange(n)
    inverse = jnp.zeros_like(r)
    for i in reversed(range(n)):
        row = (identity[i] - jnp.sum(r[i][:, None] * inverse, axis=0)) / r[i, i]
        inverse = jnp.where((index == i)[:, None], row[None, :], inverse)
    return inverse
