"""No silent zeros: every solver x ``differentiate=`` x batched either differentiates a
solution correctly or raises naming both.

The reference is the true derivative of the solution map, by central finite
differences in float64 of a tightly converged Levenberg–Marquardt solve (shared by
every row of the table, so a solver's own error cannot hide in its reference).

The problem is a square nonlinear system on the free entries, coupled to the fixed
one, with a zero residual at the solution: every solver (Adam included) can then
converge to near machine precision, because no stopping test is limited by the
rounding of a nonzero objective. Its Jacobian is ``I + 0.3 * (a shifted diagonal)``,
well conditioned. The bounds are present but inactive at the solution (they take the
bounded code paths: projected line searches, the implicit active-set test).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fixedopt
from fixedopt._solvers.lbfgs import LINESEARCHES

N = 4
X0 = jnp.array([0.0, 0.5, 0.0, 0.0])
FIXED = jnp.array([False, True, False, False])
TARGET = jnp.array([1.0, -0.5, 0.7, 1.5])
BOUNDS = (-3.0, 3.0)  # inactive: the solution lies within (-1, 1.5)
# A batch of three rows, each with its own fixed entries (B = 3 differs from N = 4).
X0_ROWS = jnp.array([[0.0, 0.5, 0.0, 0.0], [0.2, 0.0, -0.3, 0.8], [-0.4, 0.0, 0.6, 0.0]])
FIXED_ROWS = jnp.array(
    [[False, True, False, False], [False, False, False, True], [True, False, True, False]]
)
TARGET_ROWS = jnp.array([[1.0, -0.5, 0.7, 1.5], [-0.6, 0.9, 0.3, 0.1], [0.5, 1.1, -0.2, -0.8]])
WEIGHTS = jnp.arange(1.0, N + 1)
# Tight enough that every solver ends within ~1e-12 of the solution (the defaults,
# sqrt(eps), stop L-BFGS ~3e-10 away, and its unrolled derivative ~6e-8 off).
TOLERANCES = {"gtol": 1e-13, "xtol": 1e-13}


def residuals(x, target, weight):
    """One residual per entry; ``weight`` is 0 on fixed entries, so the free entries
    can solve the system exactly (the fixed value enters through the coupling)."""
    return weight * (x + 0.3 * jnp.tanh(jnp.roll(x, -1)) - target)


def objective(x, target, weight):
    r = residuals(x, target, weight)
    return 0.5 * r @ r


# name: (solver, entry point, max_steps). Adam converges linearly: ~700 steps here.
SOLVERS = {
    "LBFGS-backtracking": (fixedopt.LBFGS(linesearch="backtracking"), "minimize", 100),
    "LBFGS-hager-zhang": (fixedopt.LBFGS(linesearch="hager-zhang"), "minimize", 100),
    "GradientDescent": (fixedopt.GradientDescent(), "minimize", 200),
    "Optax-adam": (fixedopt.Optax(optax.adam(0.1)), "minimize", 1000),
    "Optax-lbfgs": (fixedopt.Optax(optax.lbfgs()), "minimize", 100),
    "LevenbergMarquardt": (fixedopt.LevenbergMarquardt(), "least_squares", 100),
    "GaussNewton": (fixedopt.GaussNewton(), "least_squares", 100),
}
# The combinations that raise, and what the message must say (the solver and the mode).
# optax.lbfgs's zoom line search is a lax.while_loop, which reverse mode cannot pass.
RAISES = {
    ("Optax-lbfgs", "unroll"): r'fixedopt\.Optax.*differentiate="unroll"',
}
DIFFERENTIATE = ("implicit", "unroll")
TABLE = [
    pytest.param(name, mode, batched, id=f"{name}-{mode}-{'batched' if batched else 'one'}")
    for name in SOLVERS
    for mode in DIFFERENTIATE
    for batched in (False, True)
]


def data(batched):
    if batched:
        return X0_ROWS, FIXED_ROWS, TARGET_ROWS
    return X0, FIXED, TARGET


def solve(solver, entry, max_steps, differentiate, batched, target):
    x0, fixed, _ = data(batched)
    weight = (~fixed).astype(x0.dtype)
    options = {"bounds": BOUNDS, "args": (target, weight), "solver": solver}
    options |= {"differentiate": differentiate, "max_steps": max_steps, **TOLERANCES}
    if batched:
        options["batched"] = True
    if entry == "least_squares":
        return fixedopt.least_squares(residuals, x0, fixed, **options)
    return fixedopt.minimize(objective, x0, fixed, **options)


def loss_of(solution):
    """A scalar of the solution that every free entry affects differently."""
    return jnp.sum(jnp.sin(solution.x) @ WEIGHTS)


REFERENCE = (fixedopt.LevenbergMarquardt(), "least_squares", 100)


def reference_solution(batched, target):
    return solve(*REFERENCE, "implicit", batched, target)


def finite_differences(batched, eps=1e-5):
    """Central differences of the loss of the reference solution, per target entry.

    eps = 1e-5: the truncation error is ~eps^2 |g'''| / 6 ~ 1e-11 and the reference
    solves agree with the exact solution to ~1e-15, which the difference amplifies to
    ~1e-10 (measured: the rows of the table agree with it to 5e-11 to 1e-10)."""
    target = np.asarray(data(batched)[2])
    gradient = np.zeros_like(target)
    for index in np.ndindex(target.shape):
        step = np.zeros_like(target)
        step[index] = eps
        up = loss_of(reference_solution(batched, jnp.asarray(target + step)))
        down = loss_of(reference_solution(batched, jnp.asarray(target - step)))
        gradient[index] = (float(up) - float(down)) / (2 * eps)
    return gradient


@functools.cache
def reference_gradient(batched):
    return finite_differences(batched)


def test_the_table_covers_every_exported_solver():
    public = [getattr(fixedopt, name) for name in fixedopt.__all__]
    solvers = {c for c in public if isinstance(c, type) and issubclass(c, fixedopt.Solver)}
    assert {type(solver) for solver, _, _ in SOLVERS.values()} == solvers - {fixedopt.Solver}
    linesearches = {s.linesearch for s, _, _ in SOLVERS.values() if type(s) is fixedopt.LBFGS}
    assert linesearches == set(LINESEARCHES)


def test_the_reference_is_converged_to_a_zero_residual():
    for batched in (False, True):
        x0, fixed, target = data(batched)
        solution = reference_solution(batched, target)
        residuals_of = jax.vmap(residuals) if batched else residuals
        r = residuals_of(solution.x, target, (~fixed).astype(x0.dtype))
        assert np.max(np.abs(r)) < 1e-14
        assert np.all(np.abs(solution.x) < 2.5)  # the bounds are inactive


@pytest.mark.parametrize(("name", "differentiate", "batched"), TABLE)
def test_gradient_with_respect_to_args_is_true_or_raises(name, differentiate, batched):
    solver, entry, max_steps = SOLVERS[name]
    target = data(batched)[2]

    def loss(target):
        solution = solve(solver, entry, max_steps, differentiate, batched, target)
        return loss_of(solution), solution.x

    if (name, differentiate) in RAISES:
        with pytest.raises(ValueError, match=RAISES[name, differentiate]):
            jax.grad(loss, has_aux=True)(target)
        return
    gradient, x = jax.grad(loss, has_aux=True)(target)
    # The solve itself is converged (the derivative of a converged solution is what
    # the finite differences measure).
    np.testing.assert_allclose(x, reference_solution(batched, target).x, rtol=0, atol=1e-11)
    expected = reference_gradient(batched)
    assert np.all(gradient[np.asarray(data(batched)[1])] == 0.0)  # a fixed target is unused
    # Tolerance: the finite differences are good to ~1e-10 (see finite_differences),
    # every solve ends within ~1e-12 of the solution (checked above), and an unrolled
    # derivative converges with the iterates. Measured, every row of the table is
    # within 1e-10 of the differences; 1e-8 leaves a margin of 100 and is far below
    # the size of the derivative (0.5 to 3): a zero, a sign or a missed coupling
    # fails by 0.1 or more.
    np.testing.assert_allclose(gradient, expected, rtol=0, atol=1e-8)
