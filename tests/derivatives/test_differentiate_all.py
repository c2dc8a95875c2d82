"""No silent zeros: every solver x ``differentiate=`` either differentiates a solution
correctly or raises naming both.

The reference is the true derivative of the solution map, by central finite
differences in float64 of tightly converged Levenberg–Marquardt solves (shared by
every row of the table, so a solver's own error cannot hide in its reference).

The problem is a square nonlinear system on the free entries, coupled to the fixed
one, with a zero residual at the solution: every solver (Adam included) can then
converge to near machine precision, because no stopping test is limited by the
rounding of a nonzero objective. Its Jacobian is ``I + 0.3 * (a shifted diagonal)``,
well conditioned. The bounds are present but inactive at the solution (they take the
bounded code paths: projected line searches, the implicit active-set test).

Time: nearly all of it is compiling (a second call of a compiled gradient takes
milliseconds), one program per row of the table, so the table has as few rows as
prove the point. Every solver x mode runs batched, the path users take, which also
covers the batch drivers (the lanes for ``"implicit"``, a ``vmap`` of the scan for
``"unroll"``). One problem differs from a batch only in the driver (see
``fixedopt._driver.engine.run``): with ``"unroll"`` it is the very scan that the batch
``vmap``s, so it is not run again; with ``"implicit"`` it is its own (a
``while_loop``, and the implicit derivative of one row, not ``vmap``ped), so it runs
for one ``minimize`` and one ``least_squares`` solver, L-BFGS and Levenberg–Marquardt.
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
# A batch of three rows, each with its own fixed entries (B = 3 differs from N = 4).
X0 = jnp.array([[0.0, 0.5, 0.0, 0.0], [0.2, 0.0, -0.3, 0.8], [-0.4, 0.0, 0.6, 0.0]])
FIXED = jnp.array(
    [[False, True, False, False], [False, False, False, True], [True, False, True, False]]
)
TARGET = jnp.array([[1.0, -0.5, 0.7, 1.5], [-0.6, 0.9, 0.3, 0.1], [0.5, 1.1, -0.2, -0.8]])
BOUNDS = (-3.0, 3.0)  # inactive: the solutions lie within (-1, 1.5)
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


@pytest.fixture(autouse=True, scope="module")
def _fewer_backend_optimizations():
    """Compile this module's programs without XLA's expensive backend (LLVM)
    optimizations: each runs for milliseconds but compiles for seconds, and the
    module takes ~35% less CPU time without them (measured). What is tested is JAX's
    and fixedopt's derivative rules, which no backend optimization changes: measured,
    the gradients differ from the optimized programs' by rounding (at most 6e-13, in
    Adam's 1000 unrolled steps; ~1e-15 in most rows), far below the tolerance."""
    jax.config.update("jax_disable_most_optimizations", True)
    yield
    jax.config.update("jax_disable_most_optimizations", False)


# name: (solver, entry point, max_steps). Adam converges linearly: ~700 steps here.
# L-BFGS keeps N pairs, not the default 10: the same code, but its two-loop recursion
# is unrolled over the pairs in the program, and 10 of them compile ~25% longer.
SOLVERS = {
    "LBFGS-backtracking": (fixedopt.LBFGS(N, linesearch="backtracking"), "minimize", 100),
    "LBFGS-hager-zhang": (fixedopt.LBFGS(N, linesearch="hager-zhang"), "minimize", 100),
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
BATCHED = [(name, mode) for name in SOLVERS for mode in DIFFERENTIATE]
ONE_PROBLEM = [("LBFGS-backtracking", "implicit"), ("LevenbergMarquardt", "implicit")]  # see top
TABLE = [
    pytest.param(name, mode, batched, id=f"{name}-{mode}-{'batched' if batched else 'one'}")
    for batched, rows in ((True, BATCHED), (False, ONE_PROBLEM))
    for name, mode in rows
]


def data(batched):
    """``(x0, fixed, target)``: the batch, or its first row as one problem."""
    if batched:
        return X0, FIXED, TARGET
    return X0[0], FIXED[0], TARGET[0]


def solve(solver, entry, max_steps, differentiate, x0, fixed, target):
    """Solve a batch if ``x0`` is 2-D, else one problem."""
    weight = (~fixed).astype(x0.dtype)
    options = {"bounds": BOUNDS, "args": (target, weight), "solver": solver}
    options |= {"differentiate": differentiate, "max_steps": max_steps, **TOLERANCES}
    options["batched"] = x0.ndim == 2
    if entry == "least_squares":
        return fixedopt.least_squares(residuals, x0, fixed, **options)
    return fixedopt.minimize(objective, x0, fixed, **options)


def loss_of(x):
    """A scalar of the solution that every free entry affects differently."""
    return jnp.sum(jnp.sin(x) @ WEIGHTS)


REFERENCE = (fixedopt.LevenbergMarquardt(), "least_squares", 100, "implicit")
EPS = 1e-5  # the finite-difference step (see reference)


def reference_rows():
    """``(rows, targets)`` of the reference solve: the batch, then for each entry of
    ``TARGET`` (in C order) its row with that entry up by ``EPS``, then each with it
    down by ``EPS``; ``rows`` indexes ``X0`` and ``FIXED``."""
    row_of_entry, column_of_entry = np.divmod(np.arange(TARGET.size), N)
    rows = np.concatenate([np.arange(len(TARGET)), row_of_entry, row_of_entry])
    moved = EPS * np.eye(N)[column_of_entry]
    shifts = np.concatenate([np.zeros_like(TARGET), moved, -moved])
    return rows, jnp.asarray(np.asarray(TARGET)[rows] + shifts)


@functools.cache
def reference():
    """``(solution, gradient)``: the reference solve of :func:`reference_rows`, and
    the central differences of ``loss_of`` with respect to each entry of ``TARGET``.

    The rows are independent problems, so an entry of ``TARGET`` moves its own row's
    solution only: its difference is that of one row, solved with the entry up and
    down. These rows and the batch itself are one batched solve (one compiled
    program). The first row is the one-problem case (see ``data``).

    EPS = 1e-5: the truncation error is ~eps^2 |g'''| / 6 ~ 1e-11 and the reference
    solves agree with the exact solution to ~1e-15, which the difference amplifies to
    ~1e-10 (measured: the rows of the table agree with it to 6e-11 to 7e-11)."""
    rows, targets = reference_rows()
    solution = solve(*REFERENCE, X0[rows], FIXED[rows], targets)
    up, down = np.split(np.asarray(jnp.sin(solution.x) @ WEIGHTS)[len(TARGET) :], 2)
    return solution, ((up - down) / (2 * EPS)).reshape(TARGET.shape)


def expected(batched):
    """The reference ``(x, gradient)`` for ``data(batched)``."""
    solution, gradient = reference()
    x = solution.x[: len(TARGET)]
    return (x, gradient) if batched else (x[0], gradient[0])


def test_the_table_covers_every_exported_solver():
    public = [getattr(fixedopt, name) for name in fixedopt.__all__]
    solvers = {c for c in public if isinstance(c, type) and issubclass(c, fixedopt.Solver)}
    assert {type(solver) for solver, _, _ in SOLVERS.values()} == solvers - {fixedopt.Solver}
    linesearches = {s.linesearch for s, _, _ in SOLVERS.values() if type(s) is fixedopt.LBFGS}
    assert linesearches == set(LINESEARCHES)


def test_the_reference_is_converged_to_a_zero_residual():
    """Every reference solve (the batch and each difference's) is converged."""
    solution, _ = reference()
    rows, targets = reference_rows()
    weight = (~FIXED[rows]).astype(solution.x.dtype)
    assert np.all(solution.converged)
    assert np.max(np.abs(jax.vmap(residuals)(solution.x, targets, weight))) < 1e-14
    assert np.all(np.abs(solution.x) < 2.5)  # the bounds are inactive


@pytest.mark.parametrize(("name", "differentiate", "batched"), TABLE)
def test_gradient_with_respect_to_args_is_true_or_raises(name, differentiate, batched):
    x0, fixed, target = data(batched)

    # One jit around the gradient: one compiled program (the solve's forward and
    # backward parts compile separately without it, which takes longer in all).
    @jax.jit
    @functools.partial(jax.grad, has_aux=True)
    def loss(target):
        solution = solve(*SOLVERS[name], differentiate, x0, fixed, target)
        return loss_of(solution.x), solution.x

    if (name, differentiate) in RAISES:
        with pytest.raises(ValueError, match=RAISES[name, differentiate]):
            loss(target)
        return
    gradient, x = loss(target)
    expected_x, expected_gradient = expected(batched)
    # The solve itself is converged (the derivative of a converged solution is what
    # the finite differences measure).
    np.testing.assert_allclose(x, expected_x, rtol=0, atol=1e-11)
    assert np.all(gradient[np.asarray(fixed)] == 0.0)  # a fixed target is unused
    # Tolerance: the finite differences are good to ~1e-10 (see reference), every
    # solve ends within ~1e-12 of the solution (checked above), and an unrolled
    # derivative converges with the iterates. Measured, every row of the table is
    # within 1e-10 of the differences; 1e-8 leaves a margin of 100 and is far below
    # the size of the derivative (0.5 to 3): a zero, a sign or a missed coupling
    # fails by 0.1 or more.
    np.testing.assert_allclose(gradient, expected_gradient, rtol=0, atol=1e-8)
