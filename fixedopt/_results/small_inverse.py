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
(rank-deficient, close to it, or not finite) is computed again by the SVD path
(:func:`fixedopt._results.row_covariance.exact_inverse`), which keeps scipy's
pseudo-inverse semantics; the choice is the row's own.

Golub & Van Loan, *Matrix Computations*, 4th ed., chapter 5 (Householder QR), and
``|A^{-1}|_2 <= |A^{-1}|_F``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

# Free blocks of at most this many columns take the elementwise path (the program
# grows with n^2 column updates and n^3 / 3 scalar products).
SMALL_N = 8
# The certificate's margin over scipy's cut-off, for the rounding of |R^{-1}|_F and of
# the SVD that would count the rank.
SAFETY = 4.0


# ... and of at most this many entries times columns (m n^2, the QR's work): written
# elementwise the QR of a tall block cost more than LAPACK's (measured, CPU time per
# 1,000 rows under load: 30 x 5, 1.2 ms against 7.8; 133 x 5, 4.3 against 10.5; 309 x
# 8 in float32, 31 against 27).
MOST_WORK = 8192


def is_small(n: int) -> bool:
    """Whether a free block of ``n`` columns may take :func:`certified_inverse`."""
    return n <= SMALL_N


def pays(m: int, n: int) -> bool:
    """Whether :func:`certified_inverse` pays for a Jacobian of ``m`` rows and ``n``
    columns (else LAPACK's inverse is the faster)."""
    return is_small(n) and m * n * n <= MOST_WORK


def certified_inverse(jacobian: jax.Array, held: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``((J_F^T J_F)^{-1}, certified)`` of one row: ``J`` is ``(m, n)`` with unit (or
    zero) columns, ``held`` the columns out of the free block ``F`` (their rows and
    columns of the inverse are left to the caller to discard); ``certified``: ``J_F``
    has full numerical rank by scipy's cut-off, and the inverse is finite."""
    m, n = jacobian.shape
    # Held columns become unit columns of rows of their own: R stays triangular with
    # a unit pivot there, and the free block's R is J_F's.
    own_rows = jnp.diag(held.astype(jacobian.dtype))
    augmented = jnp.concatenate([jnp.where(held[None, :], 0.0, jacobian), own_rows])
    inverse = _upper_inverse(_householder_r([augmented[:, j] for j in range(n)]))
    free = [~held[j] for j in range(n)]
    squares = [jnp.where(free[i] & free[j], inverse[i][j] ** 2, 0.0)
               for i in range(n) for j in range(i, n)]  # fmt: skip
    inverse_norm = jnp.sqrt(functools.reduce(jnp.add, squares))
    jacobian_norm = jnp.sqrt(jnp.sum(jnp.where(held[None, :], 0.0, jacobian) ** 2))
    cutoff = SAFETY * jnp.finfo(jacobian.dtype).eps * max(m, n) * jacobian_norm
    certified = jnp.isfinite(inverse_norm) & (inverse_norm * cutoff < 1.0)
    # (R^{-1} R^{-T})_ij = sum over k >= max(i, j) of R^{-1}_ik R^{-1}_jk
    product = [[functools.reduce(jnp.add, [inverse[i][k] * inverse[j][k]
                                           for k in range(max(i, j), n)])
                for j in range(n)] for i in range(n)]  # fmt: skip
    return jnp.stack([jnp.stack(row) for row in product]), certified


def _householder_r(columns: list[jax.Array]) -> list[list[jax.Array]]:
    """The upper-triangular ``R`` (rows of scalars, ``R[i][j]`` for ``j >= i``) of the
    ``(M, n)`` matrix of these ``n`` columns (``M >= n``), by ``n`` Householder
    reflections, each applied to the later columns one by one."""
    rows, n = columns[0].shape[0], len(columns)
    index = jnp.arange(rows)
    r: list[list[jax.Array]] = []
    for k in range(n):
        column = jnp.where(index >= k, columns[k], 0.0)
        square = jnp.sum(column**2)  # 0 only where J_F is rank-deficient: off the
        norm = jnp.where(square > 0, jnp.sqrt(jnp.where(square > 0, square, 1.0)), 0.0)  # sqrt
        alpha = jnp.where(columns[k][k] >= 0, -norm, norm)  # H x = alpha e_k, no cancellation
        v = column - jnp.where(index == k, alpha, 0.0)
        squared = jnp.sum(v**2)
        scale = jnp.where(squared > 0, 2.0 / jnp.where(squared > 0, squared, 1.0), 0.0)
        row = [alpha]
        for j in range(k + 1, n):
            columns[j] = columns[j] - (scale * jnp.sum(v * columns[j])) * v
            row.append(columns[j][k])
        r.append(row)  # r[k][j - k] is R[k][j]
    return r


def _upper_inverse(r: list[list[jax.Array]]) -> list[list[jax.Array]]:
    """``R^{-1}`` (``inverse[i][j]``, 0 below the diagonal) of :func:`_householder_r`'s
    ``R``, by back-substitution, entry by entry."""
    n = len(r)
    zero = jnp.zeros_like(r[0][0])
    inverse = [[zero] * n for _ in range(n)]
    for j in range(n):
        inverse[j][j] = 1.0 / r[j][0]
        for i in reversed(range(j)):
            total = functools.reduce(
                jnp.add, [r[i][k - i] * inverse[k][j] for k in range(i + 1, j + 1)]
            )
            inverse[i][j] = -total / r[i][0]
    return inverse
