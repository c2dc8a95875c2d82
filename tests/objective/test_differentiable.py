"""The least-squares gradient by forward mode that the implicit rule differentiates (up
to ``FORWARD_GRADIENT_UP_TO`` entries under ``Implicit(hessian="auto")``) against
``jax.grad`` of the same row objective: the gradient, its Hessian and its mixed
derivative in the data, for plain residuals, a robust loss, the Poisson likelihood and
a ``vectorized`` function, with fixed entries, in float32 and with the residuals scaled
by 1e6 and 1e-6; the implicit derivative of a Poisson fit against its closed form; and
each ``hessian`` option against a linear fit's closed form, fixed entries exact.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._derivatives.differentiation import FORWARD_GRADIENT_UP_TO
from fixedopt._objective.losses import Poisson, robust_loss
from fixedopt._objective.problem import differentiable_gradient, differentiable_objective

# Derivatives against jax.grad and closed forms at 1e-11 of the largest entry (2e-5 in
# float32), far above the rounding apart of two orders of the same sums; exact zeros at
# fixed entries: nothing XLA's backend optimizations change (conftest.py).
pytestmark = pytest.mark.fewer_optimizations

T = jnp.linspace(0.0, 3.0, 25)


def decays(p, data):
    """A sum of exponential decays ``p = (a1, k1, a2, k2, ...)`` (and an offset when
    the count is odd), minus ``data``."""
    k = p.shape[0] // 2
    curve = jnp.sum(p[0 : 2 * k : 2, None] * jnp.exp(-p[1 : 2 * k : 2, None] * T[None]), axis=0)
    return curve + (p[-1] if p.shape[0] % 2 else 0.0) - data


def counts_model(p):
    """Expected counts of a decay on a background (Poisson fits)."""
    return p[0] * jnp.exp(-p[1] * T) + p[2]


def rows(n, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.uniform(0.5, 1.5, n), dtype)
    fixed = jnp.asarray(rng.random(n) < 0.3)
    values = jnp.asarray(rng.uniform(0.5, 1.5, n), dtype)
    data = jnp.asarray(rng.uniform(0.0, 2.0, T.size), dtype)
    return x, fixed, values, data


CASES = {  # name: (fun, loss, vectorized, n)
    "plain": (decays, None, False, 5),
    "float32": (decays, None, False, 5),
    "soft_l1": (decays, robust_loss("soft_l1", 0.3), False, 5),
    "vectorized": (jax.vmap(decays), None, True, 4),
    "above auto's limit": (decays, None, False, FORWARD_GRADIENT_UP_TO + 3),
    "residuals times 1e6": (lambda p, d: 1e6 * decays(p, d), None, False, 5),
    "residuals times 1e-6": (lambda p, d: 1e-6 * decays(p, d), None, False, 5),
}


@pytest.mark.parametrize("name", [*CASES, "poisson"])
def test_gradient_hessian_and_mixed_derivative_match_jax_grad(name):
    if name == "poisson":
        fun, loss, vectorized, n = counts_model, Poisson(), False, 3
    else:
        fun, loss, vectorized, n = CASES[name]
    dtype = np.float32 if name == "float32" else np.float64
    x, fixed, values, data = rows(n, dtype)
    args = (jnp.round(data * 5.0),) if name == "poisson" else (data,)
    if vectorized:
        args = (data[None],)
    unravel = lambda flat: flat
    reference = jax.grad(differentiable_objective(fun, True, loss, unravel, vectorized))
    gradient = differentiable_gradient(fun, loss, unravel, vectorized)

    def both(function):  # one program each (op by op, the derivatives took seconds)
        @jax.jit
        def derivatives(x, values, args):
            g = function(x, fixed, values, args)
            hessian = jax.jacfwd(lambda x: function(x, fixed, values, args))(x)
            mixed = jax.jacfwd(lambda a: function(x, fixed, values, a))(args)
            return g, hessian, jax.tree.leaves(mixed)[0]

        return derivatives(x, values, args)

    # Two orders of the same sums: rounding apart (float32's, 2e-5 of the largest entry).
    tolerance = 2e-5 if dtype == np.float32 else 1e-11
    for ours, theirs in zip(both(gradient), both(reference)):
        assert ours.dtype == theirs.dtype == dtype
        scale = np.max(np.abs(theirs))
        np.testing.assert_allclose(ours, theirs, rtol=tolerance, atol=tolerance * scale)
    assert np.all(np.asarray(gradient(x, fixed, values, args))[np.asarray(fixed)] == 0.0)


def test_implicit_derivative_of_a_poisson_fit_matches_its_closed_form():
    """``-H_FF^-1 d(grad_F)/d(counts)`` of the negative log-likelihood written out."""
    rng = np.random.default_rng(3)
    truth = np.array([[40.0, 1.2, 5.0], [25.0, 0.8, 3.0]])
    counts = rng.poisson(np.asarray(jax.vmap(counts_model)(jnp.asarray(truth)))).astype(float)
    fixed = np.array([[False, False, False], [False, True, False]])
    start = np.where(fixed, truth, [30.0, 1.0, 4.0])

    def solve(counts):
        return fixedopt.least_squares(counts_model, start, fixed, estimator="poisson",
                                      counts=counts, batched=True)  # fmt: skip

    jacobian = np.asarray(jax.jacobian(lambda c: solve(c).x)(jnp.asarray(counts)))

    def likelihood(p, y):
        mu = counts_model(p)
        return jnp.sum(mu - y * jnp.log(mu))

    x = np.asarray(solve(counts).x)
    for row in range(2):
        free = np.flatnonzero(~fixed[row])
        hessian = np.asarray(jax.hessian(likelihood)(x[row], counts[row]))[np.ix_(free, free)]
        mixed = np.asarray(jax.jacfwd(jax.grad(likelihood), 1)(x[row], counts[row]))[free]
        expected = np.zeros((3, T.size))
        expected[free] = -np.linalg.solve(hessian, mixed)
        np.testing.assert_allclose(jacobian[row, :, row], expected, rtol=1e-8, atol=1e-12)
        np.testing.assert_array_equal(jacobian[row, :, 1 - row], 0.0)  # rows never mix


@pytest.mark.parametrize("hessian", ["auto", "forward", "reverse"])
def test_each_hessian_option_gives_the_closed_form_derivative_of_a_linear_fit(hessian):
    """``x* = (A^T A)^-1 A^T y`` on the free entries (the fixed one at its value):
    ``dx*/dy`` in closed form, whichever mode forms the rule's Hessian; 12 parameters
    (above ``"auto"``'s 8, so ``"forward"`` and ``"auto"`` take different paths)."""
    rng = np.random.default_rng(5)
    a = jnp.asarray(rng.normal(size=(40, 12)))
    y = jnp.asarray(rng.normal(size=40))
    fixed = np.zeros(12, bool)
    fixed[3] = True
    differentiate = fixedopt.Implicit(hessian=hessian)

    def solve(y, values):
        solution = fixedopt.least_squares(lambda p, y: a @ p - y, jnp.zeros(12), fixed,
                                          args=(y,), fixed_values=values,
                                          differentiate=differentiate)  # fmt: skip
        return solution.x

    free = np.flatnonzero(~fixed)
    expected = np.zeros((12, 40))
    expected[free] = np.linalg.pinv(np.asarray(a)[:, free])
    by_y, by_values = jax.jacobian(solve, argnums=(0, 1))(y, jnp.full(12, 0.5))
    np.testing.assert_allclose(by_y, expected, rtol=1e-9, atol=1e-12)
    # The fixed entry follows its own fixed value exactly, and nothing else.
    np.testing.assert_array_equal(by_y[3], 0.0)
    np.testing.assert_array_equal(by_values[3], np.eye(12)[3])


def test_an_unknown_hessian_option_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="`hessian` must be one of"):
        fixedopt.Implicit(hessian="newton")
