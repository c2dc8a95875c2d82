"""The unrolled small-n linear algebra against NumPy and SciPy.

References: ``scipy.linalg.cho_solve`` (and ``numpy.linalg.solve``) in float64 on the
same matrices, and NumPy's products. Tolerances: the matrices have condition numbers
of at most 100 (eigenvalues drawn in ``[1, 100]``), so a backward-stable solve has a
forward error of order ``n * cond * eps``: checked at ``50 * n * cond * eps``
relative, in max-norm (``n <= 16``: about ``1e-11`` in float64, ``1e-2`` in float32).
The products are sums of ``m`` terms of bounded size, checked at ``4 m eps`` relative
to the sum of absolute values.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from fixedopt._numerics import backends, kernels
from fixedopt._solvers import normal_equations, small_linalg

CPU = backends.CPU.kernels  # the thresholds a CPU solve's trace reads

# References within tolerances far above rounding (bounds that any order of the sums
# meets), exact zeros and symmetry that the code's structure gives, and bits compared
# within one program or through exact bit operations: none rests on the backend's
# optimizations (conftest.py).
pytestmark = pytest.mark.fewer_optimizations

CONDITION = 100.0
SIZES = (1, 2, 3, 5, 8, 16)
DTYPES = (jnp.float32, jnp.float64)


def spd_matrix(rng, n):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    eigenvalues = np.exp(rng.uniform(0.0, np.log(CONDITION), n))
    eigenvalues[0], eigenvalues[-1] = 1.0, CONDITION  # the bound is attained
    return (q * eigenvalues) @ q.T


def solve_tolerance(n, dtype):
    return 50 * n * CONDITION * float(jnp.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("n", SIZES)
def test_spd_solve_matches_scipy_cho_solve(n, dtype):
    rng = np.random.default_rng(n)
    rows = 7
    matrices = np.stack([spd_matrix(rng, n) for _ in range(rows)])
    rhs = rng.normal(size=(rows, n))
    matrices, rhs = matrices.astype(dtype), rhs.astype(dtype)  # the same numbers in both
    expected = np.stack([
        scipy.linalg.cho_solve(scipy.linalg.cho_factor(a.astype(np.float64)), b.astype(np.float64))
        for a, b in zip(matrices, rhs)
    ])  # fmt: skip
    independent = np.linalg.solve(matrices.astype(float), rhs[..., None].astype(float))[..., 0]
    np.testing.assert_allclose(expected, independent, rtol=1e-10)
    actual = jax.jit(jax.vmap(small_linalg.spd_solve))(jnp.asarray(matrices), jnp.asarray(rhs))
    assert actual.dtype == dtype
    error = np.max(np.abs(np.asarray(actual, np.float64) - expected), axis=1)
    assert np.all(error <= solve_tolerance(n, dtype) * np.max(np.abs(expected), axis=1))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_identity_rows_with_a_zero_right_hand_side_give_exact_zeros(dtype):
    """How the least-squares solvers pin entries that are not free: identity row and
    column, zero right-hand side; the solution there is exactly 0 and elsewhere the
    solution of the free block alone."""
    rng = np.random.default_rng(3)
    n = 9
    free = rng.random(n) < 0.6
    free[0] = True
    matrix = spd_matrix(rng, n)
    matrix[~free, :] = matrix[:, ~free] = 0.0
    matrix[~free, ~free] = 1.0
    rhs = np.where(free, rng.normal(size=n), 0.0)
    matrix, rhs = matrix.astype(dtype), rhs.astype(dtype)
    for solve in (small_linalg.spd_solve, small_linalg.eliminated_solve):
        actual = np.asarray(jax.jit(solve)(matrix, rhs), np.float64)
        np.testing.assert_array_equal(actual[~free], 0.0)
        block = np.linalg.solve(matrix[np.ix_(free, free)].astype(float), rhs[free].astype(float))
        tolerance = solve_tolerance(n, dtype) * np.max(np.abs(block))
        assert np.max(np.abs(actual[free] - block)) <= tolerance


def test_a_matrix_that_is_not_positive_definite_gives_nan_like_lapack():
    matrix = jnp.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    rhs = jnp.array([1.0, 1.0])
    lapack = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(matrix), rhs)
    assert np.all(np.isnan(lapack))
    assert np.all(np.isnan(small_linalg.spd_solve(matrix, rhs)))


@pytest.mark.parametrize("n", SIZES)
def test_the_rolled_elimination_matches_scipy_at_every_size(n):
    """:func:`eliminated_solve`, which ``spd_solve`` takes above ``roll_above``, also
    below it (float64, the scipy reference of the test above)."""
    rng = np.random.default_rng(100 + n)
    matrix, rhs = spd_matrix(rng, n), rng.normal(size=n)
    expected = scipy.linalg.cho_solve(scipy.linalg.cho_factor(matrix), rhs)
    actual = np.asarray(jax.jit(small_linalg.eliminated_solve)(matrix, rhs))
    tolerance = solve_tolerance(n, jnp.float64) * np.max(np.abs(expected))
    assert np.max(np.abs(actual - expected)) <= tolerance


def test_the_rolled_elimination_has_the_derivatives_of_a_solve():
    """Differentiated through (``differentiate="unroll"``), its power-of-two scaling
    is exact and adds nothing: the same derivatives as ``jnp.linalg.solve``'s."""
    rng = np.random.default_rng(11)
    n = CPU.roll_above + 3
    matrix, rhs = jnp.asarray(spd_matrix(rng, n) * 1e6), jnp.asarray(rng.normal(size=n))

    def loss(solve):
        return lambda m, b: jnp.sum(jnp.sin(solve(m, b)))

    gradient = lambda solve: jax.jit(jax.grad(loss(solve), argnums=(0, 1)))  # one program
    actual = gradient(small_linalg.eliminated_solve)(matrix, rhs)
    expected = gradient(jnp.linalg.solve)(matrix, rhs)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10 * float(jnp.max(jnp.abs(e))))


def test_an_indefinite_matrix_gives_nan_in_the_rolled_elimination_too():
    rng = np.random.default_rng(7)
    n = CPU.roll_above + 2
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    eigenvalues = np.linspace(1.0, 10.0, n)
    eigenvalues[3] = -0.5  # one negative eigenvalue: not positive definite
    matrix, rhs = jnp.asarray((q * eigenvalues) @ q.T), jnp.asarray(rng.normal(size=n))
    assert np.all(np.isnan(jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(matrix), rhs)))
    assert np.all(np.isnan(jax.jit(small_linalg.eliminated_solve)(matrix, rhs)))


def test_only_a_cpu_trace_takes_the_rolled_elimination():
    """Its choice rests on XLA:CPU's compile times: the CPU's profile sets
    ``roll_above``; an accelerator's trace, and one outside a solve, keep the unrolled
    solve (no loop)."""
    n = CPU.roll_above + 1
    matrix, rhs = jnp.eye(n), jnp.ones(n)

    def loops() -> bool:  # a new function each time: traced anew (no cached trace)
        jaxpr = jax.make_jaxpr(lambda m, r: small_linalg.spd_solve(m, r))(matrix, rhs)
        return any(name in str(jaxpr) for name in ("scan", "while"))

    with kernels.using(CPU):
        assert loops()
    with kernels.using(backends.GPU.kernels):
        assert not loops()
    assert not loops()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(1, 1), (25, 5), (128, 5), (7, 16)])
def test_products_match_numpy(shape, dtype):
    rng = np.random.default_rng(shape[0])
    matrix = rng.normal(size=shape).astype(dtype)
    column, row = rng.normal(size=shape[1]).astype(dtype), rng.normal(size=shape[0]).astype(dtype)
    a = matrix.astype(np.float64)
    eps = float(jnp.finfo(dtype).eps)
    cases = {
        "gram": (small_linalg.unrolled_gram, (matrix,), a.T @ a, np.abs(a).T @ np.abs(a)),
        "matvec": (small_linalg.unrolled_matvec, (matrix, column), a @ column,
                   np.abs(a) @ np.abs(column)),
        "rmatvec": (small_linalg.unrolled_rmatvec, (matrix, row), a.T @ row,
                    np.abs(a).T @ np.abs(row)),
        "column_norms": (small_linalg.column_norms_squared, (matrix,), np.sum(a**2, axis=0),
                         np.sum(a**2, axis=0)),
    }  # fmt: skip
    for name, (function, args, expected, magnitude) in cases.items():
        with kernels.using(CPU):  # column_norms_squared unrolled where it would be
            actual = jax.jit(function)(*map(jnp.asarray, args))
        assert actual.dtype == dtype, name
        bound = 4 * max(shape) * eps * magnitude
        assert np.all(np.abs(np.asarray(actual, np.float64) - expected) <= bound), name
    gram = np.asarray(small_linalg.unrolled_gram(jnp.asarray(matrix)))
    np.testing.assert_array_equal(gram, gram.T)  # exactly symmetric


def test_the_unrolled_path_is_taken_up_to_the_thresholds():
    for tuned in (CPU, backends.GPU.kernels):
        with kernels.using(tuned):
            assert small_linalg.is_small(16) and not small_linalg.is_small(17)
            assert small_linalg.unrolls(jnp.zeros((25, 5))) and not small_linalg.unrolls(
                jnp.zeros((25, 17))
            )
            assert not small_linalg.unrolls(jnp.zeros((128, 5)))  # too many terms: a dot
    with kernels.using(CPU._replace(small_n=0)):
        assert not small_linalg.unrolls(jnp.zeros((25, 5)))
    assert not small_linalg.is_small(1)  # outside a solve: LAPACK and dots


@pytest.mark.parametrize("dtype", [*DTYPES, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize(
    ("shape", "together"),
    [((1, 1), True), ((25, 5), True), ((128, 5), True), ((301, 7), True), ((3, 10), True),
     ((20, 8), True), ((301, 8), False), ((30, 11), False)],
)  # fmt: skip
def test_normal_sums_in_one_reduction_match_numpy(shape, together, dtype):
    """``J^T J`` (in float32 at least), ``J^T r`` and ``r.r`` (in their dtype), summed
    together on the CPU path up to ``summed_few_n`` columns, and up to ``summed_n``
    where the products would be unrolled (few rows); one by one else."""
    rng = np.random.default_rng(shape[0] + shape[1])
    jacobian = jnp.asarray(rng.normal(size=shape), dtype)
    residual = jnp.asarray(rng.normal(size=shape[0]), dtype)
    a, r = np.asarray(jacobian, np.float64), np.asarray(residual, np.float64)
    wide = jnp.promote_types(dtype, jnp.float32)
    with kernels.using(CPU):
        gram, gradient, squared = jax.jit(small_linalg.normal_sums)(jacobian, residual)
        jaxpr = jax.make_jaxpr(small_linalg.normal_sums)(jacobian, residual)
    summed = [e for e in jaxpr.eqns if e.primitive.name == "custom_jvp_call"]
    assert len(summed) == together
    assert gram.dtype == wide and gradient.dtype == squared.dtype == dtype
    for actual, expected, magnitude, eps in (
        (gram, a.T @ a, np.abs(a).T @ np.abs(a), jnp.finfo(wide).eps),
        (gradient, a.T @ r, np.abs(a).T @ np.abs(r), jnp.finfo(dtype).eps),
        (squared, r @ r, r @ r, jnp.finfo(dtype).eps),
    ):
        bound = 4 * shape[0] * float(eps) * magnitude
        assert np.all(np.abs(np.asarray(actual, np.float64) - expected) <= bound)
    if together:  # each entry once, mirrored: exactly symmetric
        np.testing.assert_array_equal(np.asarray(gram), np.asarray(gram).T)


def test_normal_sums_differentiate_as_the_sums_one_by_one():
    """``reduce.together`` has no derivative of its own in JAX: its rule sums the
    tangents; forward and reverse mode agree with the plain products."""
    rng = np.random.default_rng(0)
    jacobian = jnp.asarray(rng.normal(size=(25, 5)))
    residual = jnp.asarray(rng.normal(size=25))

    def loss(summed, j, r):
        with kernels.using(CPU if summed else CPU._replace(summed_n=0)):
            gram, gradient, squared = small_linalg.normal_sums(j, r)
        return jnp.sum(jnp.sin(gram)) + jnp.sum(gradient**3) + jnp.cos(squared)

    # jitted, one program a derivative (eagerly, each of the unrolled sums' operations
    # compiled its own: 144 programs in this test, measured)
    gradients = jax.jit(jax.grad(loss, argnums=(1, 2)), static_argnums=0)
    together, apart = gradients(True, jacobian, residual), gradients(False, jacobian, residual)
    for t, a in zip(together, apart):
        np.testing.assert_allclose(t, a, rtol=1e-12, atol=1e-12)
    tangent = jnp.asarray(rng.normal(size=(25, 5)))
    forward = jax.jit(
        lambda s, j: jax.jvp(lambda j: loss(s, j, residual), (j,), (tangent,))[1],
        static_argnums=0,
    )
    np.testing.assert_allclose(forward(True, jacobian), forward(False, jacobian), rtol=1e-12)


@pytest.mark.parametrize("dtype", [*DTYPES, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("size", [0.0, 1e-30, 1e-20, 1.0, 1e15])
def test_residual_norm_from_the_normal_sums_pass(size, dtype):
    """``|r|`` from the normal sums' one reduction (``residual_sums``, the step's) and
    ``residual_norm`` are the float64 norm, where ``|r|^2`` underflows too; bits equal
    to ``sqrt(r.r)`` where that is in range."""
    if size and not jnp.finfo(dtype).tiny < size < jnp.finfo(dtype).max:
        pytest.skip("not representable")
    rng = np.random.default_rng(3)
    residual = jnp.asarray(rng.normal(size=25) * size, dtype)
    jacobian = jnp.asarray(rng.normal(size=(25, 3)), dtype)
    exact = np.linalg.norm(np.asarray(residual, np.float64))
    with kernels.using(CPU):
        *_, squared, norm = jax.jit(normal_equations.residual_sums)(jacobian, residual)
        alone = normal_equations.residual_norm(residual)
    eps = float(jnp.finfo(dtype).eps)  # sums in other orders: rounding apart
    np.testing.assert_allclose([float(norm), float(alone)], exact, rtol=4 * eps)
    if float(squared) > jnp.finfo(dtype).tiny / jnp.finfo(dtype).eps:
        assert float(norm) == float(jnp.sqrt(squared))


@pytest.mark.parametrize("n", (1, 5))
def test_a_symmetric_matrix_held_as_its_lower_triangle_is_the_same_to_the_bit(n):
    """Levenberg–Marquardt's state holds ``J^T J`` as its lower triangle: made whole
    again (batched, as the lanes write it), it is the matrix, and its diagonal the
    matrix's; against NumPy's ``tril_indices``."""
    rng = np.random.default_rng(n)
    matrices = np.stack([spd_matrix(rng, n) for _ in range(3)])
    matrices = (matrices + np.swapaxes(matrices, 1, 2)) / 2  # symmetric to the bit
    packed = small_linalg.lower_triangle(jnp.asarray(matrices))
    rows, columns = np.tril_indices(n)
    assert packed.shape == (3, n * (n + 1) // 2)
    np.testing.assert_array_equal(packed, matrices[:, rows, columns])
    np.testing.assert_array_equal(small_linalg.symmetric(packed), matrices)
    np.testing.assert_array_equal(
        small_linalg.diagonal_of(packed), np.diagonal(matrices, axis1=1, axis2=2)
    )


@pytest.mark.parametrize("dtype", (jnp.float16, jnp.float32, jnp.float64), ids=lambda d: d.__name__)
def test_the_elimination_scale_is_frexp_and_ldexp_to_the_bit(dtype):
    # eliminated_solve's scale 2^-(e // 2), built from the bits: every entry equal to
    # jnp.frexp and jnp.ldexp's, zeros, subnormals, infinities and NaN among them.
    info = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, info.tiny / 2,
               info.smallest_subnormal, info.max, -info.max, 1.0, 0.5, 3.0, -7.5]  # fmt: skip
    rng = np.random.default_rng(0)
    drawn = rng.normal(size=4000) * 2.0 ** rng.integers(info.minexp - info.nmant, info.maxexp, 4000)
    with np.errstate(over="ignore"):
        diagonal = jnp.asarray(np.concatenate([special, drawn]).astype(dtype))

        def reference(d):
            _, exponent = jnp.frexp(d)
            return jnp.ldexp(jnp.ones((), d.dtype), -(exponent // 2))

        expected = np.asarray(jax.jit(reference)(diagonal))
        found = np.asarray(jax.jit(small_linalg._halving_scale)(diagonal))
    assert found.dtype == expected.dtype == dtype
    assert np.array_equal(found.view(np.uint8), expected.view(np.uint8))
