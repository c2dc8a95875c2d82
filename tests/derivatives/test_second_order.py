"""Second derivatives through a solve (the implicit rule differentiated again): against
closed forms, in both modes of forward and reverse, float32 and float64. They were a
silent 0 while the rule took the solver's number for a constant."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt

# Closed forms within tolerances far above rounding (XLA's expensive backend
# optimizations off, conftest.py).
pytestmark = pytest.mark.fewer_optimizations

A = np.array([1.0, 2.0])
DTYPES = (np.float32, np.float64)


def _tolerance(dtype) -> float:
    return 1e-3 if dtype == np.float32 else 1e-7


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessian_of_a_loss_of_the_solution_is_the_closed_form(dtype):
    """``x*(a) = a`` for ``|x - a|^2`` (minimize) and the residuals ``x - a``
    (least_squares): the Hessian of ``|x*|^2`` is ``2 I``."""
    x0 = jnp.zeros(2, dtype)

    def through_minimize(a):
        return fixedopt.minimize(lambda x, a: jnp.sum((x - a) ** 2), x0, False, args=(a,)).x

    def through_least_squares(a):
        return fixedopt.least_squares(lambda x, a: x - a, x0, False, args=(a,)).x

    a = jnp.asarray(A, dtype)
    for solution in (through_minimize, through_least_squares):
        hessian = jax.hessian(lambda a, solution=solution: jnp.sum(solution(a) ** 2))(a)
        np.testing.assert_allclose(hessian, 2 * np.eye(2), atol=_tolerance(dtype))


def _cube_root(a, x0=1.0, **options):
    """``x* = a^(1/3)``, the minimizer of ``x^4 / 4 - a x``."""

    def fun(x, a):
        return jnp.sum(x**4) / 4 - jnp.sum(a * x)

    start = jnp.full((1,), x0, a.dtype)
    return fixedopt.minimize(fun, start, False, args=(a,), gtol=1e-12, **options)


@pytest.mark.parametrize("dtype", DTYPES)
def test_second_derivative_of_the_solution_and_its_value(dtype):
    """``x*(a) = a^(1/3)``: ``x*'' = -2/9 a^(-5/3)``; ``f*(a) = -3/4 a^(4/3)``:
    ``f*'' = -1/3 a^(-2/3)``, by forward over forward and forward over reverse, and a
    product of the value and its derivative (the value's own derivative, once more)."""
    a = jnp.asarray([2.0], dtype)
    second = jax.jacfwd(jax.jacfwd(lambda a: _cube_root(a).x[0]))(a)[0, 0]
    np.testing.assert_allclose(second, -2 / 9 * 2 ** (-5 / 3), rtol=_tolerance(dtype))
    value_second = jax.hessian(lambda a: _cube_root(a).value)(a)[0, 0]
    np.testing.assert_allclose(value_second, -1 / 3 * 2 ** (-2 / 3), rtol=_tolerance(dtype))

    def product(a):
        return _cube_root(a).value * jax.grad(lambda a: _cube_root(a).value)(a)[0]

    expected = 2 ** (2 / 3) + 0.75 * 2 ** (4 / 3) / 3 * 2 ** (-2 / 3)  # f' f' + f f''
    np.testing.assert_allclose(jax.grad(product)(a)[0], expected, rtol=_tolerance(dtype))


def test_second_derivative_with_respect_to_a_fixed_value():
    """Fixed ``x1 = c``: the residual ``x0^3 - x1`` vanishes at ``x0* = c^(1/3)``, so
    ``d2 x0* / dc2 = -2/9 c^(-5/3)``."""

    def x0_of(c):
        start, fixed = jnp.array([1.0, 0.0]), jnp.array([False, True])
        values = jnp.stack([0.0, c])
        solution = fixedopt.least_squares(lambda x: x[:1] ** 3 - x[1], start, fixed,
                                          fixed_values=values)  # fmt: skip
        return solution.x[0]

    for second in (jax.hessian(x0_of)(2.0), jax.jacfwd(jax.jacfwd(x0_of))(2.0)):
        np.testing.assert_allclose(second, -2 / 9 * 2 ** (-5 / 3), rtol=1e-7)


def test_second_derivatives_of_a_batch_match_its_rows():
    """Each row's Hessian of ``|x*|^2`` is ``2 I`` in a batched solve (rows never mix)."""
    a = jnp.asarray(np.arange(6.0).reshape(3, 2))

    def loss(a):
        x0 = jnp.zeros_like(a)
        solution = fixedopt.minimize(lambda x, a: jnp.sum((x - a) ** 2), x0, False,
                                     args=(a,), batched=True)  # fmt: skip
        return jnp.sum(solution.x**2)

    hessian = jax.hessian(loss)(a).reshape(6, 6)
    np.testing.assert_allclose(hessian, 2 * np.eye(6), atol=1e-7)
