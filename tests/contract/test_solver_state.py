"""Fixed carry: a solver's state keeps its tree, shapes and dtypes across iterations.

Reference: ``jax.eval_shape`` of ``solver.init`` versus the state ``solver.step``
returns (optax ``lbfgs_test.py::test_state_shape_dtype_shard_stability``), for every
solver, float64 and float32, with and without bounds, on a hand-built
:class:`fixedopt._contract.solver.Problem` (shared by no code with ``minimize``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fixedopt
from fixedopt import Problem, StepContext

SOLVERS = {
    "lbfgs": fixedopt.LBFGS(memory_size=4),
    "gradient_descent": fixedopt.GradientDescent(),
    "optax_adam": fixedopt.Optax(optax.adam(0.05)),
    "optax_lbfgs": fixedopt.Optax(optax.lbfgs()),
    "levenberg_marquardt": fixedopt.LevenbergMarquardt(),
    "gauss_newton": fixedopt.GaussNewton(),
}
N = 5


def residual(x):
    return jnp.concatenate([x - 1.0, 0.5 * x[:-1] * x[1:]])


def problem_for(dtype, bounded):
    """A least-squares problem with entries 1 and 3 fixed, built by hand."""
    fixed = jnp.asarray(np.arange(N) % 2 == 1)
    values = jnp.full(N, 0.25, dtype)

    def masked(x):
        return residual(jnp.where(fixed, jax.lax.stop_gradient(values), x))

    def value_and_grad(x):
        return jax.value_and_grad(lambda x: 0.5 * jnp.sum(masked(x) ** 2))(x)

    def residual_and_jacobian(x):
        return masked(x), jax.jacfwd(masked)(x)

    lower, upper = (jnp.full(N, -2.0, dtype), jnp.full(N, 0.5, dtype)) if bounded else (None,) * 2
    return Problem(
        value_and_grad=value_and_grad,
        fixed=fixed,
        fixed_values=values,
        lower=lower,
        upper=upper,
        residual_and_jacobian=residual_and_jacobian,
    )


def still_running(solver):
    """The context of ``Solver.step`` for a row still running, at iteration 3."""
    return (StepContext(jnp.asarray(True), jnp.asarray(3, jnp.int32)),)


def signature(tree):
    """Tree structure plus (shape, dtype) of every leaf."""
    leaves, structure = jax.tree.flatten(tree)
    return structure, [(tuple(leaf.shape), jnp.dtype(leaf.dtype)) for leaf in leaves]


@pytest.mark.parametrize("bounded", [False, True], ids=["unbounded", "bounded"])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", list(SOLVERS))
def test_step_returns_the_state_init_made(name, dtype, bounded):
    solver, problem = SOLVERS[name], problem_for(dtype, bounded)
    x = problem.project(jnp.linspace(-1.0, 1.0, N, dtype=dtype))

    def init(x):
        return solver.init(problem, x, *problem.value_and_grad(x))

    def step(x, state):
        return solver.step(problem, x, *problem.value_and_grad(x), state, *still_running(solver))

    state = jax.eval_shape(init, x)
    stepped = jax.eval_shape(step, x, state)
    assert signature(stepped.state) == signature(state)

    # Two steps: a state that only stabilizes after one iteration would show here.
    def two_steps(x):
        first = step(x, init(x))
        return step(first.x, first.state)

    again = jax.eval_shape(two_steps, x)
    assert signature(again.state) == signature(state)
    for field in ("x", "value", "grad"):
        assert getattr(stepped, field).dtype == dtype, field
    assert stepped.x.shape == x.shape and stepped.value.shape == ()
    assert stepped.outcome.dtype == jnp.int32 and stepped.outcome.shape == ()
