"""Bad input to ``minimize`` / ``least_squares`` / solvers: a clear error naming it.

Each case must raise ``ValueError`` or ``TypeError`` (at construction or trace time,
never inside the solve) whose message names the offending argument and, for shapes,
the expected and the actual shape.
"""

import jax.numpy as jnp
import optax
import pytest

import fixedopt

B, N = 4, 3
X0 = jnp.zeros((B, N))
FIXED = jnp.zeros((B, N), bool)
TARGET = jnp.ones((B, N))


def objective(x, target):
    return jnp.sum((x - target) ** 2)


def not_a_scalar(x, target):
    return x - target


def two_leaf_objective(params, target):
    return objective(params["a"], target) + jnp.sum(params["b"] ** 2)


def minimize(fun=objective, x0=X0, fixed=FIXED, **options):
    options.setdefault("args", (TARGET,))
    return fixedopt.minimize(fun, x0, fixed, batched=True, **options)


CASES = {
    "non_scalar_fun": (
        lambda: minimize(not_a_scalar),
        ValueError,
        r"`fun`.*scalar.*\(3,\)",
    ),
    "non_array_residuals": (
        lambda: fixedopt.least_squares(
            lambda x, t: jnp.zeros(2, int), X0, FIXED, args=(TARGET,), batched=True
        ),
        ValueError,
        r"`residual_fun`.*int",
    ),
    "mask_batch_size": (
        lambda: minimize(fixed=jnp.zeros((B + 1, N), bool)),
        ValueError,
        r"`fixed`.*expected \(4, 3\), got \(5, 3\)",
    ),
    "mask_not_boolean": (
        lambda: minimize(fixed=jnp.zeros((B, N))),
        TypeError,
        r"`fixed`.*boolean",
    ),
    "mask_tree": (
        lambda: minimize(fixed={"a": FIXED}),
        ValueError,
        r"`fixed`.*tree",
    ),
    "args_batch_size": (
        lambda: minimize(args=(jnp.ones((B + 1, N)),)),
        ValueError,
        r"`args`.*batch.*4.*\(5, 3\)",
    ),
    "x0_leaves_batch_size": (
        lambda: minimize(two_leaf_objective, {"a": X0, "b": jnp.zeros((B + 1, 2))}, False),
        ValueError,
        r"`x0`.*batch size",
    ),
    "x0_not_float": (
        lambda: minimize(x0=jnp.zeros((B, N), jnp.int32)),
        TypeError,
        r"`x0`.*floating",
    ),
    "lower_above_upper": (
        lambda: minimize(bounds=(1.0, 0.0)),
        ValueError,
        r"`bounds`.*lower.*upper",
    ),
    "bounds_shape": (
        lambda: minimize(bounds=(jnp.zeros(N + 1), 1.0)),
        ValueError,
        r"`bounds.*\(4, 3\).*\(4,\)",
    ),
    "fixed_values_outside_bounds": (
        lambda: minimize(fixed=FIXED.at[1, 2].set(True), fixed_values=3.0, bounds=(-1.0, 1.0)),
        ValueError,
        r"`fixed_values`.*bounds",
    ),
    "fixed_x0_outside_bounds": (
        lambda: minimize(fixed=FIXED.at[1, 2].set(True), bounds=(0.5, 1.0)),
        ValueError,
        r"`fixed_values`.*bounds",
    ),
    "fixed_values_shape": (
        lambda: minimize(fixed_values=jnp.zeros((B, N + 1))),
        ValueError,
        r"`fixed_values`.*\(4, 3\).*\(4, 4\)",
    ),
    "unknown_lbfgs_option": (lambda: fixedopt.LBFGS(foo=1), TypeError, "foo"),
    "unknown_levenberg_marquardt_option": (
        lambda: fixedopt.LevenbergMarquardt(foo=1),
        TypeError,
        "foo",
    ),
    "bad_memory_size": (lambda: fixedopt.LBFGS(memory_size=0), ValueError, "memory_size"),
    "optax_not_a_transformation": (lambda: fixedopt.Optax("adam"), TypeError, "optimizer"),
    "optax_optimizer_as_solver": (
        lambda: minimize(solver=optax.adam(0.1)),
        TypeError,
        r"`solver`.*fixedopt.Optax",
    ),
    "string_as_solver": (lambda: minimize(solver="lbfgs"), TypeError, "`solver`"),
    "levenberg_marquardt_in_minimize": (
        lambda: minimize(solver=fixedopt.LevenbergMarquardt()),
        TypeError,
        r"`solver`.*least_squares",
    ),
    "gauss_newton_in_minimize": (
        lambda: minimize(solver=fixedopt.GaussNewton()),
        TypeError,
        r"`solver`.*least_squares",
    ),
    "negative_max_steps": (lambda: minimize(max_steps=-1), ValueError, "`max_steps`"),
    "negative_gtol": (lambda: minimize(gtol=-1.0), ValueError, "`gtol`"),
    "unknown_strategy": (lambda: minimize(strategy="nope"), ValueError, "`strategy`"),
    "args_not_a_tuple": (lambda: minimize(args=TARGET), TypeError, "`args`"),
    "batched_scalar_x0": (
        lambda: fixedopt.minimize(lambda x: x**2, jnp.zeros(()), False, batched=True),
        ValueError,
        r"`x0`.*batch axis",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_a_clear_error_naming_the_argument(case):
    call, error, message = CASES[case]
    with pytest.raises(error, match=message):
        call()


def test_unbatched_non_scalar_fun_is_named():
    with pytest.raises(ValueError, match=r"`fun`.*\(3,\)"):
        fixedopt.minimize(lambda x: x**2, jnp.zeros(3), False)
