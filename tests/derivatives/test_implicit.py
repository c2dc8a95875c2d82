"""Differentiating through solutions: implicit gradients with respect to ``args`` and
``fixed_values``, against the closed form on the free block and finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt.testing import compiled_solves

# Closed forms and finite differences within 1e-10 to 1e-5, zeros where fixed, and one
# compiled solve for a mode and its alias: nothing here rests on the backend's rounding.
pytestmark = pytest.mark.fewer_optimizations

N = 6
_rng = np.random.default_rng(0)
_factor = _rng.normal(size=(N, N))
MATRIX = jnp.asarray(_factor @ _factor.T + N * np.eye(N))
FIXED = jnp.array([False, True, False, False, True, False])
X0 = jnp.zeros(N).at[1].set(0.3).at[4].set(-0.2)
B = jnp.asarray(_rng.normal(size=N))


def quadratic(x, b):
    return 0.5 * x @ MATRIX @ x - b @ x


def smooth(x, b, scale):
    """Strictly convex, not quadratic."""
    return scale * quadratic(x, b) + 0.1 * jnp.sum(x**4) + jnp.sum(jnp.exp(0.1 * x))


def solution_of_quadratic(b, values):
    return fixedopt.minimize(quadratic, X0, FIXED, fixed_values=values, args=(b,), gtol=1e-12).x


def test_jacobians_match_the_closed_form_on_the_free_block():
    free, fixed = ~np.asarray(FIXED), np.asarray(FIXED)
    a_ff = np.asarray(MATRIX)[np.ix_(free, free)]
    a_fx = np.asarray(MATRIX)[np.ix_(free, fixed)]
    expected_b = np.zeros((N, N))
    expected_b[np.ix_(free, free)] = np.linalg.inv(a_ff)  # x_F = A_FF^-1 (b_F - A_FX v)
    expected_v = np.zeros((N, N))
    expected_v[np.ix_(free, fixed)] = -np.linalg.solve(a_ff, a_fx)
    expected_v[np.ix_(fixed, fixed)] = np.eye(fixed.sum())  # x_X = v
    for jacobian in (jax.jacrev, jax.jacfwd):
        d_b, d_v = jacobian(solution_of_quadratic, argnums=(0, 1))(B, X0)
        np.testing.assert_allclose(d_b, expected_b, atol=1e-10)
        np.testing.assert_allclose(d_v, expected_v, atol=1e-10)
        # A fixed entry does not depend on args at all: exactly zero, not just small.
        assert np.all(np.asarray(d_b)[fixed] == 0.0)


def central_differences(function, point, eps=1e-6):
    point = np.asarray(point, float)
    columns = []
    for i in range(point.size):
        step = np.zeros_like(point)
        step[i] = eps
        columns.append((function(point + step) - function(point - step)) / (2 * eps))
    return np.stack(columns, axis=-1)


def loss_of_smooth(b, scale, values, **options):
    # gtol alone (ftol=0): every solve of the finite differences stops by the same
    # test, at 1e-12; with ftol's default, the solves at b + h and b - h stop at
    # different steps by different tests, and their difference is that noise.
    sol = fixedopt.minimize(
        smooth, X0, FIXED, fixed_values=values, args=(b, scale), gtol=1e-12, ftol=0.0,
        **options,
    )  # fmt: skip
    return jnp.sum(jnp.sin(sol.x) * jnp.arange(1.0, N + 1))


@pytest.mark.parametrize("differentiate", ["implicit", "unroll"])
def test_gradients_match_finite_differences(differentiate):
    options = {"differentiate": differentiate, "max_steps": 200}
    grad_b, grad_scale, grad_values = jax.grad(loss_of_smooth, argnums=(0, 1, 2))(
        B, 1.3, X0, **options
    )
    loss = lambda b, s, v: float(loss_of_smooth(jnp.asarray(b), s, jnp.asarray(v)))
    np.testing.assert_allclose(
        grad_b, central_differences(lambda b: loss(b, 1.3, X0), B), atol=1e-6
    )
    fd_scale = (loss(B, 1.3 + 1e-6, X0) - loss(B, 1.3 - 1e-6, X0)) / 2e-6
    np.testing.assert_allclose(grad_scale, fd_scale, atol=1e-6)
    fd_values = central_differences(lambda v: loss(B, 1.3, v), X0)
    np.testing.assert_allclose(grad_values, fd_values, atol=1e-6)
    assert np.all(np.asarray(grad_values)[~np.asarray(FIXED)] == 0.0)  # free values unused


def test_active_bounds_count_as_fixed():
    upper = jnp.where(FIXED, 1.0, 0.05)  # binds some free entries, not the fixed ones

    def solve(b):
        return fixedopt.minimize(
            quadratic, X0, FIXED, args=(b,), bounds=(-1.0, upper), gtol=1e-12
        ).x

    x = solve(B)
    active = np.asarray((x >= upper) & ~FIXED)
    assert active.any()
    held = np.asarray(FIXED) | active
    free = ~held
    jacobian = np.asarray(jax.jacrev(solve)(B))
    assert np.all(jacobian[held] == 0.0)
    expected = np.linalg.inv(np.asarray(MATRIX)[np.ix_(free, free)])
    np.testing.assert_allclose(jacobian[np.ix_(free, free)], expected, atol=1e-10)


def test_batched_and_vmapped_gradients_agree_with_rows():
    rows = jnp.asarray(_rng.normal(size=(4, N)))
    x0s, fixed = jnp.tile(X0, (4, 1)), jnp.tile(FIXED, (4, 1))

    def batched_loss(bs):
        sol = fixedopt.minimize(smooth, x0s, fixed, args=(bs, 1.3), batched=True, gtol=1e-12)
        return jnp.sum(jnp.sin(sol.x))

    def row_loss(b):
        sol = fixedopt.minimize(smooth, X0, FIXED, args=(b, 1.3), gtol=1e-12)
        return jnp.sum(jnp.sin(sol.x))

    batched = jax.grad(batched_loss)(rows)
    vmapped = jax.vmap(jax.grad(row_loss))(rows)
    one_by_one = np.stack([jax.grad(row_loss)(b) for b in rows])
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vmapped, one_by_one, rtol=1e-10, atol=1e-12)


def test_least_squares_gradients_match_the_implicit_function_theorem():
    t = jnp.linspace(0.0, 2.0, 25)

    def residuals(p, y):
        return p[0] * jnp.exp(-p[1] * t) + p[2] - y

    noise = np.random.default_rng(11).normal(size=25)
    y = 2.0 * jnp.exp(-1.5 * t) + 0.3 + 0.01 * jnp.asarray(noise)
    fixed = jnp.array([False, False, True])

    def solve(y, offset):
        x0 = jnp.array([1.0, 1.0, 0.0]).at[2].set(offset)
        return fixedopt.least_squares(residuals, x0, fixed, args=(y,), gtol=1e-12).x

    def loss(y, offset):
        x = solve(y, offset)
        return x[0] + x[1] ** 2

    grad_y, grad_offset = jax.grad(loss, argnums=(0, 1))(y, 0.3)
    # The reference, written out: at the solution the free gradient of the cost
    # 0.5 |r(p, y)|^2 vanishes, so dp/dy = -H^-1 d(grad)/dy on the free block, with H
    # the cost's full Hessian there (second-order terms included). Finite differences
    # of whole solves were no reference: each solve stops within ~1e-8 of its optimum
    # (working precision of f), which a difference of 1e-3 amplifies to ~1e-5.
    p = solve(y, 0.3)

    def free_gradient(q, y):
        cost = lambda q: 0.5 * jnp.sum(residuals(jnp.array([q[0], q[1], 0.3]), y) ** 2)
        return jax.grad(cost)(q)

    q = p[:2]
    # one program for both (eagerly, each of their operations compiled its own: 122
    # programs in this test, measured)
    hessian, mixed = jax.jit(jax.jacfwd(free_gradient, argnums=(0, 1)))(q, y)
    dq_dy = -np.linalg.solve(np.asarray(hessian), np.asarray(mixed))
    expected = np.array([1.0, 2.0 * float(q[1])]) @ dq_dy
    np.testing.assert_allclose(grad_y, expected, rtol=1e-7, atol=1e-12)
    fd = (float(loss(y, 0.3 + 1e-3)) - float(loss(y, 0.3 - 1e-3))) / 2e-3
    np.testing.assert_allclose(grad_offset, fd, rtol=1e-5)  # the offset's curvature is larger


def test_differentiate_option_is_checked():
    expected = r"`differentiate` must be fixedopt.Implicit\(\), fixedopt.Unroll\(\) or one of"
    with pytest.raises(ValueError, match=expected):
        fixedopt.minimize(quadratic, X0, FIXED, args=(B,), differentiate="backprop")


@pytest.mark.parametrize("mode", ["implicit", "unroll"])
def test_a_mode_object_and_its_alias_share_one_compiled_solve(mode):
    """``differentiate="unroll"`` and a new ``fixedopt.Unroll()`` are the same static
    choice: the second call compiles nothing."""
    objects = {"implicit": fixedopt.Implicit, "unroll": fixedopt.Unroll}
    first = fixedopt.minimize(quadratic, X0, FIXED, args=(B,), differentiate=mode)
    before = compiled_solves()
    second = fixedopt.minimize(quadratic, X0, FIXED, args=(B,), differentiate=objects[mode]())
    assert compiled_solves() == before
    np.testing.assert_array_equal(first.x, second.x)


# ------------------------------------- derivatives of value and with respect to bounds


def bounded_fun(x, t, a):
    return jnp.sum((x - t) ** 2) + a * jnp.sum(jnp.diff(x) ** 2) + 0.1 * jnp.sum(x**4)


BOUNDED_X0 = jnp.zeros(4)
BOUNDED_FIXED = jnp.array([True, False, False, False])
BOUNDED_T = jnp.array([1.0, 2.0, 3.0, -1.0])
TIGHT = {"gtol": 1e-13, "ftol": 0.0, "xtol": 0.0}  # central differences of solves


def bounded_solve(a, lower, upper):
    return fixedopt.minimize(
        bounded_fun, BOUNDED_X0, BOUNDED_FIXED, args=(BOUNDED_T, a), bounds=(lower, upper),
        **TIGHT,
    )  # fmt: skip


def test_value_has_the_envelope_derivative_and_x_follows_active_bounds():
    """``jax.grad`` of ``Solution.value`` is the envelope-theorem derivative (not 0);
    ``d x / d upper`` is 1 on the entries held at the upper bound and the free block
    responds to them; all against central differences."""
    a, lower, upper, h = 0.7, -0.5, 1.0, 1e-5
    solution = bounded_solve(a, lower, upper)
    assert np.any(np.asarray(solution.x) == upper)  # an active upper bound
    value_of = lambda a, lower, upper: bounded_solve(a, lower, upper).value
    grads = jax.grad(value_of, argnums=(0, 1, 2))(a, lower, upper)
    point = (a, lower, upper)

    def central(f, i):
        shifted = lambda sign: [v + sign * h * (j == i) for j, v in enumerate(point)]
        return (f(*shifted(1)) - f(*shifted(-1))) / (2 * h)

    for i in range(3):
        np.testing.assert_allclose(float(grads[i]), float(central(value_of, i)), atol=1e-6)
    assert float(grads[0]) != 0.0 and float(grads[2]) != 0.0
    x_of = lambda upper: bounded_solve(a, lower, upper).x
    d_x = np.asarray(jax.jacfwd(x_of)(upper))
    np.testing.assert_allclose(d_x, np.asarray(central(lambda a, low, up: x_of(up), 2)), atol=1e-6)
    held = np.asarray(solution.x) == upper
    np.testing.assert_array_equal(d_x[held], 1.0)
    assert np.any(d_x[~held & ~np.asarray(BOUNDED_FIXED)] != 0.0)
