"""Small symmetric positive definite solves as elementwise arithmetic.

For a small system of ``n`` unknowns, :func:`spd_solve` writes the Cholesky
factorization and both triangular solves as a Python loop over the static ``n``: every
operation reads and writes whole arrays of matrix entries. Under ``vmap`` each one is
an elementwise operation over the batch, which XLA fuses into loop fusions with the
arithmetic around it: no LAPACK custom call per tiny system, which cannot fuse, costs
a call per batch and reads the matrices from memory again. The products with the
Jacobian (the normal matrix, the gradient, the model's ``|J s|^2``) are unrolled the
same way while they are small (``product_terms``); a Levenberg–Marquardt step's
``J^T J``, ``J^T r`` and ``|r|^2`` of a few columns are one reduction on the CPU
(:func:`normal_sums`, where :func:`sums_together`).

The operation count grows as ``n^3 / 6`` (the program's size too), and XLA:CPU splits
the factorization into one loop fusion per few entries (every entry feeds several
later ones): 26 kernels for two 5x5 systems, 56 for 8x8, each one LLVM compile. So
from ``roll_above + 1`` to ``small_n`` unknowns a CPU trace takes :func:`eliminated_solve`,
an elimination rolled in one ``fori_loop`` (11 kernels whatever ``n``), and past
``small_n`` the batched LAPACK path (``jax.scipy.linalg.cho_factor``) takes over.

The thresholds (``small_n``, ``roll_above``, ``product_terms``, ``summed_n``,
``summed_few_n``) are the trace's :class:`~fixedopt._numerics.kernels.Kernels`: a
backend's, from its machine profile (``fixedopt._driver.machine``, where each number
stands beside the measurement that set it), inside a solve; outside one, ``PLAIN``
(none: dots and LAPACK).

Golub & Van Loan, *Matrix Computations*, 4th ed., Algorithm 4.2.1 (the ``gaxpy``
Cholesky, here by columns), and 3.1.1-3.1.2 (the triangular solves).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._numerics import kernels, reduce


def is_small(n: int) -> bool:
    """Whether a system of ``n`` unknowns is solved here, elementwise (read at trace
    time): at most the trace's ``Kernels.small_n``."""
    return n <= kernels.current().small_n


def unrolls(matrix: jax.Array | jax.ShapeDtypeStruct) -> bool:
    """Whether products with this ``(m, n)`` matrix are unrolled: ``n`` small and
    its Gram matrix at most ``Kernels.product_terms`` multiply-adds."""
    m, n = matrix.shape
    return is_small(n) and m * n * (n + 1) // 2 <= kernels.current().product_terms


def gram(matrix: jax.Array) -> jax.Array:
    """``matrix.T @ matrix``: :func:`unrolled_gram` if :func:`unrolls`, else a dot."""
    return unrolled_gram(matrix) if unrolls(matrix) else matrix.T @ matrix


def lower_triangle(matrix: jax.Array) -> jax.Array:
    """The ``n (n + 1) / 2`` entries on and below the diagonal of a symmetric ``(n, n)``
    matrix, row by row: a state that holds it instead of the matrix is smaller, so
    that more lanes fit the cache (:func:`symmetric` makes the matrix again).

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt._solvers import small_linalg
      >>> a = jnp.array([[1.0, 2.0], [2.0, 3.0]])
      >>> small_linalg.lower_triangle(a).tolist()
      [1.0, 2.0, 3.0]
      >>> bool((small_linalg.symmetric(small_linalg.lower_triangle(a)) == a).all())
      True
    """
    rows, columns = np.tril_indices(matrix.shape[-1])
    return matrix[..., rows, columns]


def symmetric(packed: jax.Array) -> jax.Array:
    """The symmetric ``(..., n, n)`` matrices whose :func:`lower_triangle` is ``packed``
    (``(..., n (n + 1) / 2)``)."""
    n = _order(packed)
    index = np.zeros((n, n), int)
    rows, columns = np.tril_indices(n)
    index[rows, columns] = index[columns, rows] = np.arange(rows.size)
    return packed[..., index]


def _order(packed: jax.Array) -> int:
    """``n`` of a :func:`lower_triangle` of ``n (n + 1) / 2`` entries."""
    return (math.isqrt(8 * packed.shape[-1] + 1) - 1) // 2


def diagonal_of(packed: jax.Array) -> jax.Array:
    """The diagonal of the :func:`symmetric` matrix of ``packed``."""
    n = np.arange(_order(packed))
    return packed[..., n * (n + 1) // 2 + n]


def matvec(matrix: jax.Array, vector: jax.Array) -> jax.Array:
    """``matrix @ vector``: :func:`unrolled_matvec` if :func:`unrolls`, else a dot."""
    return unrolled_matvec(matrix, vector) if unrolls(matrix) else matrix @ vector


def rmatvec(matrix: jax.Array, vector: jax.Array) -> jax.Array:
    """``matrix.T @ vector``: :func:`unrolled_rmatvec` if :func:`unrolls`, else a dot."""
    return unrolled_rmatvec(matrix, vector) if unrolls(matrix) else matrix.T @ vector


def sums_together(matrix: jax.Array | jax.ShapeDtypeStruct) -> bool:
    """Whether :func:`normal_sums` of this ``(m, n)`` matrix is one reduction (read at
    trace time): up to the trace's ``Kernels.summed_few_n`` columns, or up to its
    ``summed_n`` where the products would otherwise be unrolled (on the CPU)."""
    n, tuned = matrix.shape[1], kernels.current()
    few = n <= tuned.summed_few_n or unrolls(matrix)
    return 0 < n <= tuned.summed_n and few


def normal_sums(matrix: jax.Array, vector: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(matrix.T @ matrix, matrix.T @ vector, vector @ vector)`` of an ``(m, n)``
    matrix and an ``(m,)`` vector: the first in float32 at least (no half-precision
    Cholesky; no overflow of half-precision squares), the others in their own dtype.

    Where :func:`sums_together` (a few columns, on the CPU) they are one reduction over
    the ``m`` rows of ``n (n + 1) / 2 + n + 1`` sums
    (:func:`fixedopt._numerics.reduce.together`): one kernel computes the matrix's
    entries where it reads their inputs, so that in a least-squares step neither the
    Jacobian nor the residual is written out. Else :func:`gram`, :func:`rmatvec` and
    a dot.
    """
    normal, gradient, squared, _ = normal_sums_with(matrix, vector, ())
    return normal, gradient, squared.astype(vector.dtype)


def normal_sums_with(
    matrix: jax.Array, vector: jax.Array, extra: tuple[jax.Array, ...]
) -> tuple[jax.Array, jax.Array, jax.Array, tuple[jax.Array, ...]]:
    """:func:`normal_sums`, its ``vector @ vector`` not yet rounded to the vector's
    dtype (float32 at least), and the sum of each ``(m,)`` array of ``extra`` (made from
    ``vector``) in that dtype: in the same reduction where :func:`sums_together`, so
    that no kernel reads the vector again."""
    n = matrix.shape[1]
    wide = jnp.promote_types(matrix.dtype, jnp.float32)
    extra = tuple(term.astype(wide) for term in extra)
    if not sums_together(matrix):
        squared = jnp.dot(vector, vector, preferred_element_type=wide)
        sums = tuple(jnp.sum(term) for term in extra)
        return gram(matrix.astype(wide)), rmatvec(matrix, vector), squared, sums
    # Every sum accumulates in ``wide`` (a half-precision row's too), then is rounded
    # to its own dtype.
    columns = [matrix[:, j].astype(wide) for j in range(n)]
    wide_vector = vector.astype(wide)
    terms = [columns[i] * columns[j] for i in range(n) for j in range(i + 1)]
    terms += [c * wide_vector for c in columns] + [wide_vector * wide_vector]
    summed = reduce.together((*terms, *extra))
    sums, squared = summed[: len(terms) - 1], summed[len(terms) - 1]
    lower = iter(sums[: len(sums) - n])
    rows: list[list[jax.Array]] = [[next(lower) for _ in range(i + 1)] for i in range(n)]
    full = [[rows[max(i, j)][min(i, j)] for j in range(n)] for i in range(n)]
    gradient = jnp.stack(sums[len(sums) - n :]).astype(jnp.result_type(matrix, vector))
    normal = jnp.stack([jnp.stack(row) for row in full])
    return normal, gradient, squared, tuple(summed[len(terms) :])


def column_norms_squared(matrix: jax.Array) -> jax.Array:
    """``sum(matrix**2, axis=0)``, unrolled over the rows if :func:`unrolls`."""
    if not unrolls(matrix):
        return jnp.sum(matrix**2, axis=0)
    return unrolled_rmatvec(matrix, matrix)


def unrolled_gram(matrix: jax.Array) -> jax.Array:
    """``matrix.T @ matrix`` of an ``(m, n)`` matrix, as ``m`` rank-one updates.

    Each entry sums its ``m`` products in row order; the lower triangle is computed
    and mirrored, so the result is exactly symmetric.
    """
    total = jnp.outer(matrix[0], matrix[0])
    for k in range(1, matrix.shape[0]):
        total = total + jnp.outer(matrix[k], matrix[k])
    return total


def unrolled_matvec(matrix: jax.Array, vector: jax.Array) -> jax.Array:
    """``matrix @ vector`` for an ``(m, n)`` matrix: ``n`` scaled columns summed."""
    total = matrix[:, 0] * vector[0]
    for j in range(1, matrix.shape[1]):
        total = total + matrix[:, j] * vector[j]
    return total


def unrolled_rmatvec(matrix: jax.Array, vector: jax.Array) -> jax.Array:
    """``matrix.T @ vector`` for an ``(m, n)`` matrix and an ``(m,)`` vector, ``m``
    scaled rows summed; with an ``(m, n)`` ``vector``, the column sums of the
    elementwise product (each row times its own row of ``vector``)."""
    total = matrix[0] * vector[0]
    for k in range(1, matrix.shape[0]):
        total = total + matrix[k] * vector[k]
    return total


def cholesky_columns(matrix: jax.Array) -> list[list[jax.Array]]:
    """The lower Cholesky factor ``L`` of the SPD ``(n, n)`` ``matrix``, as scalars.

    ``L[i][j]`` for ``j <= i``; only the lower triangle of ``matrix`` is read. Where
    the matrix is not positive definite (to rounding) the factor holds NaN.
    """
    n = matrix.shape[-1]
    lower: list[list[jax.Array]] = [[] for _ in range(n)]
    for j in range(n):
        diagonal = jnp.sqrt(_minus_dot(matrix[j, j], lower[j][:j], lower[j][:j]))
        lower[j].append(diagonal)
        inverse = 1.0 / diagonal
        for i in range(j + 1, n):
            lower[i].append(_minus_dot(matrix[i, j], lower[i][:j], lower[j][:j]) * inverse)
    return lower


def spd_solve(matrix: jax.Array, rhs: jax.Array) -> jax.Array:
    """Solve ``matrix @ x = rhs`` for a symmetric positive definite ``(n, n)`` matrix.

    ``L y = rhs`` forward, then ``L^T x = y`` backward, with ``L`` from
    :func:`cholesky_columns` (which reads only the lower triangle); above the trace's
    ``Kernels.roll_above`` unknowns (where it is not 0: a CPU's),
    :func:`eliminated_solve`. The result has the
    dtype of ``rhs`` (NaN where the matrix is not positive definite, as LAPACK's factor).

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt._solvers.small_linalg import spd_solve
      >>> print(spd_solve(jnp.array([[4.0, 2.0], [2.0, 3.0]]), jnp.array([2.0, 1.0])))
      [0.5 0. ]
    """
    n, roll_above = matrix.shape[-1], kernels.current().roll_above
    if 0 < roll_above < n:
        return eliminated_solve(matrix, rhs)
    lower = cholesky_columns(matrix)
    forward: list[jax.Array] = []
    for i in range(n):
        forward.append(_minus_dot(rhs[i], lower[i][:i], forward) / lower[i][i])
    backward: list[jax.Array] = []  # x[n-1], x[n-2], ...
    for i in reversed(range(n)):
        column = [lower[k][i] for k in reversed(range(i + 1, n))]
        backward.append(_minus_dot(forward[i], column, backward) / lower[i][i])
    return jnp.stack(backward[::-1]).astype(rhs.dtype)


def eliminated_solve(matrix: jax.Array, rhs: jax.Array) -> jax.Array:
    """:func:`spd_solve` by Gauss–Jordan elimination without pivoting, rolled: trip
    ``k`` scales row ``k`` of ``[matrix | rhs]`` by its pivot and subtracts it from
    every other row, in one rank-one update; the last column is then ``x``.

    Without pivoting this is stable for a symmetric positive definite matrix (its
    pivots are the squares of its Cholesky factor's diagonal); a pivot that is not
    positive makes every entry NaN, where the Cholesky factor would hold NaN. The
    matrix is first scaled symmetrically to a diagonal near 1 by powers of two (exact):
    a badly scaled system (Levenberg–Marquardt's damping of ``D^2``) then keeps the
    accuracy of the Cholesky solve.
    """
    n, given = matrix.shape[-1], rhs.dtype
    dtype = jnp.promote_types(matrix.dtype, rhs.dtype)
    matrix, rhs = matrix.astype(dtype), rhs.astype(dtype)
    scale = _halving_scale(jnp.diagonal(matrix))  # 2^-e/2: diag(S A S) ~ 1
    scaled = scale[:, None] * matrix * scale[None, :]
    augmented = jnp.concatenate([scaled, (scale * rhs)[:, None]], axis=1)
    unit = jnp.eye(n, dtype=dtype)

    def eliminate(k: jax.Array, carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        augmented, definite = carry
        row = jax.lax.dynamic_index_in_dim(augmented, k, 0, keepdims=False)
        pivot = row[k]
        row = row / pivot
        column = jax.lax.dynamic_index_in_dim(augmented, k, 1, keepdims=False)
        factors = column - jax.lax.dynamic_index_in_dim(unit, k, 1, keepdims=False)
        return augmented - factors[:, None] * row[None, :], definite & (pivot > 0)

    start = (augmented, jnp.ones((), bool))
    augmented, definite = jax.lax.fori_loop(0, n, eliminate, start)
    return jnp.where(definite, scale * augmented[:, n], jnp.nan).astype(given)


def _halving_scale(diagonal: jax.Array) -> jax.Array:
    """``2^-(e // 2)`` for each entry's exponent ``e`` as ``jnp.frexp`` gives it (0 for
    zero, infinities and NaN), made from the bits: exactly ``jnp.ldexp(1, -(e // 2))``
    (always a normal number: ``|e // 2|`` is below half the exponent range) in a few
    operations (the trace of ``frexp`` and ``ldexp`` was a tenth of a spectra solve's)."""
    info = jnp.finfo(diagonal.dtype)
    bits = jnp.dtype(f"int{info.bits}")
    bias = 1 - info.minexp  # the biased exponent of 1.0
    tiny = jnp.abs(diagonal) < info.tiny  # zero or subnormal: scaled up to normal first
    normal = jnp.where(tiny, diagonal * float(2**info.nmant), diagonal)
    width = jnp.asarray(info.nmant, bits)  # the mantissa's bits, below the exponent's
    biased = jax.lax.shift_right_logical(jax.lax.bitcast_convert_type(normal, bits), width)
    exponent = (biased & (2**info.nexp - 1)) - (bias - 1) - jnp.where(tiny, info.nmant, 0)
    special = ~jnp.isfinite(diagonal) | (diagonal == 0)
    exponent = jnp.where(special, 0, exponent).astype(bits)
    power = jax.lax.shift_left((bias - exponent // 2).astype(bits), width)
    return jax.lax.bitcast_convert_type(power, diagonal.dtype)


def _minus_dot(start: jax.Array, left: list[jax.Array], right: list[jax.Array]) -> jax.Array:
    """``start - sum(left[k] * right[k])``, subtracting term by term (no zero added)."""
    for a, b in zip(left, right):
        start = start - a * b
    return start
