"""Robust losses of ``least_squares`` against ``scipy.optimize.least_squares``.

Reference: scipy's ``least_squares(loss=..., f_scale=...)`` (``method="trf"``, tight
tolerances, analytic Jacobian) on the reduced problem of each row: only the free
parameters, the fixed ones closed over. Data have gross outliers, so the losses
matter: the robust and the plain fits differ.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

# XLA's expensive backend optimizations off: tolerances far above rounding (conftest.py)
pytestmark = pytest.mark.fewer_optimizations

T = np.linspace(0.0, 3.0, 40)
LOSSES = ["linear", "soft_l1", "huber", "cauchy", "arctan"]
F_SCALE = 0.1


def model(p):
    return p[0] * jnp.exp(-p[1] * T) + p[2]


def residual(p, y):
    return model(p) - y


def outlier_rows():
    """Four rows, each with its own fixed set, 10% of points shifted by +-2."""
    rng = np.random.default_rng(7)
    truth = np.array([2.0, 1.3, 0.5]) * (1.0 + 0.1 * rng.normal(size=(4, 3)))
    data = np.asarray(jax.vmap(model)(jnp.asarray(truth))) + 0.05 * rng.normal(size=(4, T.size))
    data[:, ::10] += 2.0 * rng.choice([-1.0, 1.0], size=(4, 4))
    fixed = np.array([[False, False, False], [False, False, True], [True, False, False],
                      [False, True, True]])  # fmt: skip
    start = np.where(fixed, truth, [1.0, 1.0, 0.0])
    return data, fixed, start


def scipy_reduced(x0, fixed, y, loss):
    free = ~fixed
    jacobian = jax.jit(jax.jacfwd(model))
    model_jit = jax.jit(model)

    def full(z):
        p = x0.copy()
        p[free] = z
        return p

    result = scipy.optimize.least_squares(
        lambda z: np.asarray(model_jit(full(z))) - y, x0[free], loss=loss, f_scale=F_SCALE,
        jac=lambda z: np.asarray(jacobian(full(z)))[:, free],
        method="trf", ftol=1e-15, xtol=1e-15, gtol=1e-15, max_nfev=2000,
    )  # fmt: skip
    return full(result.x), result.cost


def fit(data, fixed, start, **options):
    options = {"loss": "soft_l1", "f_scale": F_SCALE, "gtol": 1e-12, "max_steps": 500} | options
    if options["loss"] == "linear":  # f_scale has no effect there (and is warned of)
        del options["f_scale"]
    return fixedopt.least_squares(
        residual, jnp.asarray(start), jnp.asarray(fixed), args=(jnp.asarray(data),),
        batched=True, **options,
    )  # fmt: skip


@pytest.mark.parametrize("loss", LOSSES)
def test_robust_fits_match_scipy_on_the_reduced_problem(loss):
    data, fixed, start = outlier_rows()
    solution = fit(data, fixed, start, loss=loss)
    x, cost = np.asarray(solution.x), np.asarray(solution.value)
    assert np.all(x[fixed] == start[fixed])
    for b in range(len(x)):
        reference_x, reference_cost = scipy_reduced(start[b], fixed[b], data[b], loss)
        np.testing.assert_allclose(cost[b], reference_cost, rtol=1e-8)
        np.testing.assert_allclose(x[b], reference_x, rtol=0, atol=1e-6)
    # Solution.value is scipy's robust cost at x, not half the sum of squares.
    r = np.asarray(jax.vmap(residual)(solution.x, jnp.asarray(data)))
    if loss == "soft_l1":
        expected = 0.5 * F_SCALE**2 * np.sum(2 * (np.sqrt(1 + (r / F_SCALE) ** 2) - 1), axis=1)
        np.testing.assert_allclose(cost, expected, rtol=1e-12)
    if loss == "linear":
        np.testing.assert_allclose(cost, 0.5 * np.sum(r**2, axis=1), rtol=1e-12)


def test_robust_fit_is_not_the_plain_fit():
    data, fixed, start = outlier_rows()
    plain = np.asarray(fit(data, fixed, start, loss="linear").x)
    robust = np.asarray(fit(data, fixed, start, loss="cauchy").x)
    assert np.max(np.abs(plain - robust)) > 0.05


def test_callable_loss_equals_the_named_one():
    """A callable ``rho`` (derivatives by autodiff) gives scipy's named loss."""
    data, fixed, start = outlier_rows()
    named = fit(data, fixed, start, loss="cauchy")
    called = fit(data, fixed, start, loss=lambda z: jnp.log(1.0 + z))
    np.testing.assert_allclose(called.value, named.value, rtol=1e-12)
    np.testing.assert_allclose(called.x, named.x, atol=1e-9)


@pytest.mark.parametrize(
    "options",
    [{"solver": fixedopt.GaussNewton()}, {"strategy": "split"}, {"solver": fixedopt.LBFGS()}],
    ids=["gauss_newton", "split", "lbfgs"],
)
def test_other_solvers_and_split_reach_the_same_robust_fit(options):
    data, fixed, start = outlier_rows()
    reference = fit(data, fixed, start, loss="huber")
    other = fit(data, fixed, start, loss="huber", **options)
    np.testing.assert_allclose(other.value, reference.value, rtol=1e-8)
    np.testing.assert_allclose(other.x, reference.x, atol=1e-5)
    assert np.all(np.asarray(other.x)[fixed] == start[fixed])


def test_gradient_of_the_robust_cost_matches_finite_differences():
    """``grad_norm`` and the solver's gradient are those of the robust cost: at the
    start, fixedopt's reported gradient agrees with central differences of scipy's
    cost formula."""
    data, fixed, start = outlier_rows()
    zero_steps = fit(data, fixed, start, loss="arctan", max_steps=0)
    b, h = 0, 1e-6

    def cost(p):
        z = (np.asarray(residual(jnp.asarray(p), data[b])) / F_SCALE) ** 2
        return 0.5 * F_SCALE**2 * np.sum(np.arctan(z))

    finite = [(cost(start[b] + h * e) - cost(start[b] - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(zero_steps.grad_norm[b], np.max(np.abs(finite)), rtol=1e-6)
    np.testing.assert_allclose(zero_steps.value[b], cost(start[b]), rtol=1e-12)


def test_bad_loss_and_f_scale_are_named():
    data, fixed, start = outlier_rows()
    with pytest.raises(ValueError, match="`loss` must be one of"):
        fit(data, fixed, start, loss="l1")
    for bad in (0.0, -1.0, True, "1"):
        with pytest.raises(ValueError, match="`f_scale` must be a positive number"):
            fit(data, fixed, start, f_scale=bad)


def test_implicit_derivative_of_a_robust_fit_matches_finite_differences():
    """``jax.jacfwd`` of the solution with respect to the data differentiates the
    robust optimality condition (not the plain least-squares one)."""
    data, fixed, start = outlier_rows()
    # The robust fit stops at working precision (PRECISION, gradient ~1e-8), so the
    # central differences need a step of 1e-3, whose truncation error is ~1e-5 here:
    # atol 3e-5 (the derivative without the loss in it is off by 0.38).
    b, h = 1, 1e-3

    def solve(y):
        return fixedopt.least_squares(
            residual,
            jnp.asarray(start[b]),
            jnp.asarray(fixed[b]),
            args=(y,),
            loss="cauchy",
            f_scale=F_SCALE,
            gtol=1e-12,
            ftol=0.0,
            xtol=0.0,
            max_steps=300,
        ).x  # fmt: skip  (tight: central differences of solves need far more digits)

    y = jnp.asarray(data[b])
    implicit = np.asarray(jax.jacfwd(solve)(y))[:, ::7]
    central = [(solve(y.at[i].add(h)) - solve(y.at[i].add(-h))) / (2 * h) for i in range(0, 40, 7)]
    np.testing.assert_allclose(implicit, np.stack(central, axis=1), atol=3e-5)
    assert np.all(implicit[fixed[b]] == 0.0)


def _scipy_cauchy(z):
    """scipy's form of a callable loss: rho, rho' and rho'' stacked, in NumPy."""
    rho = np.empty((3, z.size))
    rho[0], rho[1], rho[2] = np.log1p(z), 1 / (1 + z), -1 / (1 + z) ** 2
    return rho


@pytest.mark.parametrize(
    "loss, why",
    [
        (_scipy_cauchy, "calling it on a traced z failed"),
        (lambda z: jnp.stack([jnp.log1p(z), 1 / (1 + z)]), "got shape (2, 2) for z of shape (2,)"),
    ],
)
def test_a_callable_loss_in_scipys_form_is_named(loss, why):
    message = "`loss` must be a function rho(z) that JAX can trace (jax.numpy), returning rho"
    with pytest.raises(TypeError, match=re.escape(message)) as error:
        fixedopt.least_squares(lambda p: p - 1.0, jnp.zeros(2), False, loss=loss)
    assert why in str(error.value)
