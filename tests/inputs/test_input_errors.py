"""Bad input to ``minimize`` / ``least_squares`` / solvers: a clear error naming it.

Each case must raise ``ValueError`` or ``TypeError`` (at construction or trace time,
never inside the solve) whose message names the offending argument and, for shapes,
the expected and the actual shape.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize

import fixedopt

# Errors, and inputs accepted by solves of well-posed problems checked to 1e-3 and for a
# fixed NaN: nothing a backend optimization changes (conftest.py).
pytestmark = pytest.mark.fewer_optimizations

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
    # The inputs of issue 10 that used to crash or silently mislead:
    "unbatched_args_an_array": (
        lambda: fixedopt.minimize(objective, jnp.zeros(3), False, args=jnp.array([3.0])),
        TypeError,
        r"`args` must be a tuple.*args=\(value,\)",
    ),
    "args_size_names_how_to_share": (
        lambda: minimize(args=(jnp.ones((B + 1, N)),)),
        ValueError,
        r"`args`.*batch axis of size 4.*args_axes",
    ),
    "args_axes_not_0_or_none": (
        lambda: minimize(args_axes=(1,)),
        ValueError,
        r"`args_axes`.*0.*None",
    ),
    "lanes_unbatched": (
        lambda: fixedopt.minimize(objective, jnp.zeros(3), False, args=(TARGET[0],), lanes=8),
        ValueError,
        r"`lanes` has no effect without batched=True",
    ),
    "lanes_and_progress_unbatched": (
        lambda: fixedopt.minimize(
            objective, jnp.zeros(3), False, args=(TARGET[0],), lanes=2, progress=True
        ),
        ValueError,
        r"`lanes`, `progress` have no effect without batched=True",
    ),
    "lanes_unrolled": (
        lambda: minimize(lanes=8, differentiate="unroll"),
        ValueError,
        r"`lanes` has no effect with differentiate=\"unroll\"",
    ),
    "progress_unrolled": (
        lambda: minimize(progress="bar", differentiate="unroll"),
        ValueError,
        r"`progress` has no effect with differentiate=\"unroll\"",
    ),
    "args_axes_unbatched": (
        lambda: fixedopt.minimize(
            objective, jnp.zeros(3), False, args=(TARGET[0],), args_axes=(None,)
        ),
        ValueError,
        r"`args_axes`.*batched=True",
    ),
    "nan_bound": (
        lambda: minimize(bounds=(jnp.array([0.0, jnp.nan, 0.0]), 1.0)),
        ValueError,
        r"`bounds`.*lower bound must not be NaN",
    ),
    "max_steps_too_large": (lambda: minimize(max_steps=2**40), ValueError, r"`max_steps`.*2147"),
    "max_steps_a_float": (lambda: minimize(max_steps=10.0), TypeError, r"`max_steps`"),
    "gtol_a_string": (lambda: minimize(gtol="1e-6"), TypeError, r"`gtol`"),
    "abs_gtol_negative": (lambda: minimize(abs_gtol=-1.0), ValueError, r"`abs_gtol`"),
    "xtol_nan": (lambda: minimize(xtol=float("nan")), ValueError, r"`xtol`"),
    "fun_not_callable": (lambda: minimize(fun=3.0), TypeError, r"`fun` must be callable"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_a_clear_error_naming_the_argument(case):
    call, error, message = CASES[case]
    with pytest.raises(error, match=message):
        call()


def test_unbatched_non_scalar_fun_is_named():
    with pytest.raises(ValueError, match=r"`fun`.*\(3,\)"):
        fixedopt.minimize(lambda x: x**2, jnp.zeros(3), False)


# ------------------------------------------- inputs a scientist naturally passes: accepted


class UnhashableObjective:
    """A callable whose class defines ``__eq__``: unhashable, so ``jit`` could not
    cache on it; it is accepted and compiled once per object."""

    def __eq__(self, other):
        return self is other

    __hash__ = None

    def __call__(self, x, target):
        return objective(x, target)


def reference_solution(**options):
    return minimize(**options)


ACCEPTED = {
    "float32_x0_float64_data": lambda: minimize(
        x0=X0.astype(jnp.float32), args=(TARGET.astype(jnp.float64),)
    ),
    "mask_as_a_list": lambda: minimize(fixed=[[False, True, False]] * B),
    "bounds_as_lists_and_none": lambda: minimize(bounds=([-5.0] * N, None)),
    "bounds_none_lower": lambda: minimize(bounds=(None, 5.0)),
    "scipy_bounds": lambda: minimize(bounds=scipy.optimize.Bounds(-5.0, 5.0)),
    "numpy_and_jax_scalar_tolerances": lambda: minimize(
        gtol=np.float64(1e-9), ftol=jnp.asarray(1e-15), max_steps=np.int64(200)
    ),
    "unhashable_callable": lambda: minimize(fun=UnhashableObjective()),
    "args_as_a_list": lambda: minimize(args=[TARGET]),
}


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_natural_inputs_are_accepted_and_solve(case):
    sol = ACCEPTED[case]()
    assert np.all(np.asarray(sol.converged)), np.asarray(sol.status)
    fixed_entries = case == "mask_as_a_list"
    expected = np.where([[False, True, False]] * B, 0.0, 1.0) if fixed_entries else np.ones((B, N))
    np.testing.assert_allclose(np.asarray(sol.x, float), expected, atol=1e-3)
    if case == "float32_x0_float64_data":
        assert sol.x.dtype == jnp.float32 and sol.value.dtype == jnp.float32


def test_shared_data_of_batch_length_is_shared_with_args_axes():
    """Data whose length happens to equal the batch size: by default it is split one
    value per row (an array is per-row data); ``args_axes`` marks it shared."""
    weights = jnp.arange(1.0, N + 1)  # length N == 3, and B == 4: take B == N here
    x0, fixed = jnp.zeros((N, N)), jnp.zeros((N, N), bool)

    def weighted(x, target, weights):
        return jnp.sum(weights * (x - target) ** 2)

    targets = jnp.ones((N, N))
    shared = fixedopt.minimize(weighted, x0, fixed, args=(targets, weights), batched=True,
                               args_axes=(0, None))  # fmt: skip
    assert np.all(np.asarray(shared.converged))
    np.testing.assert_allclose(np.asarray(shared.x), 1.0, atol=1e-6)
    values = jax.vmap(weighted, in_axes=(0, 0, None))(shared.x, targets, weights)
    np.testing.assert_allclose(np.asarray(shared.value), np.asarray(values), rtol=1e-12)


def test_empty_batch_with_either_strategy():
    for strategy in ("mask", "split"):
        sol = fixedopt.minimize(
            objective,
            jnp.zeros((0, N)),
            jnp.zeros((0, N), bool),
            args=(jnp.zeros((0, N)),),
            batched=True,
            strategy=strategy,
        )
        assert sol.x.shape == (0, N) and sol.status.shape == (0,)


@pytest.mark.parametrize("batched", [False, True])
def test_parameters_of_no_entries_are_an_error(batched):
    """A row of no entries (x0 of shape (B, 0), or leaves of size 0 only) has nothing
    to optimize: a clear error, not a solver's failure deep inside the solve."""
    x0 = {"a": jnp.zeros((B, 0)), "b": jnp.zeros((B, 2, 0))}
    x0 = x0 if batched else jax.tree.map(lambda a: a[0], x0)
    residuals = lambda x: jnp.concatenate([x["a"], jnp.ravel(x["b"]), jnp.ones(2)])
    with pytest.raises(ValueError, match="`x0` has no entries to optimize"):
        fixedopt.minimize(lambda x: jnp.sum(residuals(x) ** 2), x0, False, batched=batched)
    with pytest.raises(ValueError, match="`x0` has no entries to optimize"):
        fixedopt.least_squares(residuals, x0, False, batched=batched)
    with pytest.raises(ValueError, match=r"`p0` must have shape .* with k >= 1"):
        fixedopt.curve_fit(lambda t: t, jnp.ones(5), jnp.ones((B, 5) if batched else 5),
                           jnp.zeros((B, 0) if batched else 0), batched=batched)  # fmt: skip


@pytest.mark.parametrize(
    "solver",
    [
        fixedopt.LBFGS(),
        fixedopt.GradientDescent(),
        fixedopt.LevenbergMarquardt(),
        fixedopt.GaussNewton(),
        fixedopt.Optax(optax.lbfgs()),
    ],
    ids=["lbfgs", "gradient_descent", "levenberg_marquardt", "gauss_newton", "optax_lbfgs"],
)
def test_a_nonfinite_fixed_value_the_objective_ignores_never_enters_a_product(solver):
    """A NaN/inf fixed value that the objective does not read: the row converges, the
    fixed entry keeps its value (fixed entries must not enter inner products)."""
    residual = lambda x: x[1:] - jnp.array([2.0, -1.0])
    x0, fixed = jnp.array([jnp.nan, 0.0, 0.0]), jnp.array([True, False, False])
    if solver.needs_residuals:
        sol = fixedopt.least_squares(residual, x0, fixed, solver=solver)
    else:
        sol = fixedopt.minimize(lambda x: 0.5 * jnp.sum(residual(x) ** 2), x0, fixed,
                                solver=solver, abs_gtol=1e-8)  # fmt: skip
    assert bool(sol.converged), fixedopt.Status(int(sol.status)).name
    assert np.isnan(float(sol.x[0]))
    np.testing.assert_allclose(np.asarray(sol.x[1:]), [2.0, -1.0], atol=1e-6)


T = jnp.linspace(0.0, 1.0, 5)  # the grid of the line fits below


def _needs_one_row(x, y):
    """Written for one row: ``x`` of shape (2,), ``y`` of shape (5,)."""
    return jnp.sum((x[0] * T + x[1] - y) ** 2)


def _residuals_of_one_row(x, y):
    """Written for one row: ``x`` of shape (2,), ``y`` of shape (5,)."""
    return x[0] * T + x[1] - y


def _needs_all_rows(x, y):
    """Written for many rows at once: ``x`` of shape (rows, 2), ``y`` (rows, 5)."""
    return jnp.sum((x[:, :1] * T + x[:, 1:] - y) ** 2, axis=1)


def _residuals_of_all_rows(x, y):
    """Written for many rows at once: ``x`` of shape (rows, 2), ``y`` (rows, 5)."""
    return x[:, :1] * T + x[:, 1:] - y


def _raises_inside(x):
    raise RuntimeError("boom inside fun")


def _fails_on_the_lanes(x):
    """Works for the 1 and 16 rows that vectorized=True checks first, fails for the 8
    rows of the lane batch (a stand-in for an error only the lanes' shapes reach).
    Its output, one value per row, suits both minimize and least_squares."""
    if x.shape[0] == 8:
        raise RuntimeError("boom inside fun, on the lane batch")
    return jnp.sum(x**2, axis=1)


ONE = "(all of x0: batched=False, one problem)"
ROW = "(one row of a batched=True solve of 3 rows)"
CHECK = "(the first 3 rows of a batch of 3, to check that the rows are independent: "
ONE_ROW_CHECK = "(a batch of 1 row, to check the output: vectorized=True)"
LANES = "(the lane batch of 8 rows: vectorized=True)"
BATCH = {"batched": True}
VECTORIZED = {"batched": True, "vectorized": True}
Y3, Y2 = (jnp.zeros((3, 5)),), (jnp.zeros((2, 5)),)


@pytest.mark.parametrize(
    ("entry", "fun", "x0", "args", "options", "error", "called", "fix"),
    [  # forgetting batched=True: fun sees all of x0 (3, 2) and fails to broadcast
        ("minimize", _needs_one_row, jnp.zeros((3, 2)), Y3, {}, TypeError, f"(3, 2) {ONE}",
         "pass batched=True: `fun` then sees one row, x of shape (2,)"),
        ("minimize", _raises_inside, jnp.zeros(4), (), {}, RuntimeError, f"(4,) {ONE}",
         "can be closed over in `fun`"),
        # batched=True with a fun written for all rows: it sees one row
        ("minimize", _needs_all_rows, jnp.zeros((3, 2)), Y3, BATCH, IndexError, f"(2,) {ROW}",
         "`fun` written for many rows at once needs vectorized=True"),
        # vectorized=True with a fun written for one row: first the rows' independence
        # check (3 rows or more), else the output's check on 1 row; then the lanes
        ("minimize", _needs_one_row, jnp.zeros((3, 2)), Y3, VECTORIZED, TypeError,
         f"(3, 2) {CHECK}", "`fun` written for one row needs vectorized=False"),
        ("minimize", _needs_one_row, jnp.zeros((2, 2)), Y2, VECTORIZED, TypeError,
         f"(1, 2) {ONE_ROW_CHECK}", "`fun` written for one row needs vectorized=False"),
        ("minimize", _fails_on_the_lanes, jnp.zeros((16, 2)), (), VECTORIZED | {"lanes": 8},
         RuntimeError, f"(8, 2) {LANES}", "`fun` gets many rows at once"),
        ("least_squares", _residuals_of_one_row, jnp.zeros((3, 2)), Y3, {}, TypeError,
         f"(3, 2) {ONE}", "pass batched=True: `residual_fun` then sees one row"),
        ("least_squares", _raises_inside, jnp.zeros(4), (), {}, RuntimeError, f"(4,) {ONE}",
         "can be closed over in `residual_fun`"),
        ("least_squares", _residuals_of_all_rows, jnp.zeros((3, 2)), Y3, BATCH, IndexError,
         f"(2,) {ROW}", "`residual_fun` written for many rows at once needs vectorized=True"),
        ("least_squares", _raises_inside, {"a": jnp.zeros((3, 2)), "b": jnp.zeros((3, 1))}, (),
         BATCH, RuntimeError, f"[(2,), (1,)] {ROW}", "written for ONE row"),
        ("least_squares", _residuals_of_one_row, jnp.zeros((3, 2)), Y3, VECTORIZED, TypeError,
         f"(3, 2) {CHECK}", "`residual_fun` written for one row needs vectorized=False"),
        ("least_squares", _residuals_of_one_row, jnp.zeros((2, 2)), Y2, VECTORIZED, TypeError,
         f"(1, 2) {ONE_ROW_CHECK}", "`residual_fun` written for one row needs vectorized=False"),
        ("least_squares", _fails_on_the_lanes, jnp.zeros((16, 2)), (),
         VECTORIZED | {"lanes": 8}, RuntimeError, f"(8, 2) {LANES}",
         "`residual_fun` gets many rows at once"),
    ],
)  # fmt: skip
def test_errors_inside_fun_say_how_fixedopt_called_it(
    entry, fun, x0, args, options, error, called, fix
):
    """The user's own error propagates unchanged, with one note: the shape of ``x``
    fixedopt passed, in which call (one problem; one row of a batched=True solve;
    with vectorized=True, a batch of rows at once, and which), and the likely fix for
    that call; the same from ``minimize`` and ``least_squares``."""
    call = getattr(fixedopt, entry)
    with pytest.raises(error) as info:
        call(fun, x0, False, args=args, **options)
    notes = [note for note in getattr(info.value, "__notes__", []) if "fixedopt called" in note]
    assert len(notes) == 1, notes
    assert f"with x of shape {called}" in notes[0], notes[0]
    assert fix in notes[0], notes[0]
    # The hint to pass batched=True only where batched=True was missing.
    assert ("pass batched=True" in notes[0]) == ("pass batched=True" in fix), notes[0]


# ------------------------------ scalar options: one rule per kind, the same everywhere
# (the rules: fixedopt._inputs.checks). Solver options are checked at construction, call
# options at the call; a count, a number, a flag or a choice accepts the same types
# wherever it enters, and a bad one raises an error naming the argument, what was
# expected, and the value and type that came.

ROW = jnp.zeros(N)


def _least_squares(**options):
    residual = lambda x, target: x - target
    return fixedopt.least_squares(residual, X0, FIXED, args=(TARGET,), batched=True, **options)


COUNTS = {  # argument -> a call that checks it (a valid value: 2)
    "max_steps": lambda v: minimize(max_steps=v),
    "lanes": lambda v: minimize(lanes=v),
    "progress": lambda v: minimize(progress=v, max_steps=1),
    "memory_size": lambda v: fixedopt.LBFGS(memory_size=v),
    "max_linesearch_steps": lambda v: fixedopt.LBFGS(max_linesearch_steps=v),
    "GradientDescent.max_linesearch_steps": lambda v: fixedopt.GradientDescent(
        max_linesearch_steps=v
    ),
    "GaussNewton.max_linesearch_steps": lambda v: fixedopt.GaussNewton(max_linesearch_steps=v),
}
NUMBERS = {  # argument -> a call that checks it (a valid value: 0.5)
    "gtol": lambda v: minimize(gtol=v),
    "ftol": lambda v: minimize(ftol=v),
    "xtol": lambda v: minimize(xtol=v),
    "abs_gtol": lambda v: minimize(abs_gtol=v),
    "f_scale": lambda v: _least_squares(loss="soft_l1", f_scale=v),
    "regularization": lambda v: fixedopt.GaussNewton(regularization=v),
    "initial_damping": lambda v: fixedopt.LevenbergMarquardt(initial_damping=v),
    "max_damping": lambda v: fixedopt.LevenbergMarquardt(max_damping=v, initial_damping=1e-3),
}
FLAGS = {  # argument -> a call that checks it (a valid value: False)
    "batched": lambda v: fixedopt.minimize(objective, ROW, False, args=(TARGET[0],), batched=v),
    "vectorized": lambda v: minimize(vectorized=v),
    "absolute_sigma": lambda v: fixedopt.covariance(
        X0, lambda x, t: x - t, FIXED, args=(TARGET,), batched=True, absolute_sigma=v
    ),
}
CHOICES = {  # argument -> (a call that checks it, a valid value)
    "strategy": (lambda v: minimize(strategy=v), "mask"),
    "linesearch": (lambda v: fixedopt.LBFGS(linesearch=v), "hager-zhang"),
    "scaling": (lambda v: fixedopt.LBFGS(scaling=v), "diagonal"),
    "loss": (lambda v: _least_squares(loss=v), "huber"),
}

COUNT_TYPES = [2, np.int64(2), np.int32(2), np.array(2), jnp.array(2)]
NUMBER_TYPES = [0.5, np.float32(0.5), np.float64(0.5), np.array(0.5), jnp.array(0.5)]
FLAG_TYPES = [False, np.False_]


def _named(name):
    return name.rsplit(".", 1)[-1]


def _raises_naming(call, value, name, error):
    """``call(value)`` raises ``error`` whose message names the argument and shows the
    value and its type."""
    with pytest.raises(error) as raised:
        call(value)
    message = str(raised.value)
    assert f"`{_named(name)}` must be" in message, message
    assert f"got {value!r} ({type(value).__name__})" in message, message


def checked(call, *args):
    """``call(*args)`` traced by ``jax.eval_shape``, not compiled nor run: the checks of
    an argument's type and value run before any program (a bad value raises there, as
    the tests of rejections show); accepting the valid ones compiled 20 solves (each
    f_scale value its own)."""

    def traced():
        call(*args)

    jax.eval_shape(traced)


@pytest.mark.parametrize("value", COUNT_TYPES, ids=repr)
@pytest.mark.parametrize("name", list(COUNTS))
def test_every_count_accepts_python_and_numpy_ints(name, value):
    checked(COUNTS[name], value)


@pytest.mark.parametrize("value", [True, np.True_, 2.0, "2", jnp.array([2])], ids=repr)
@pytest.mark.parametrize("name", list(COUNTS))
def test_every_count_rejects_other_types_by_name(name, value):
    if name == "progress" and isinstance(value, (bool, np.bool_)):
        return  # progress=True is the default every-10-steps report
    _raises_naming(COUNTS[name], value, name, TypeError)
    _raises_naming(COUNTS[name], value, name, ValueError)  # as some of them did before


@pytest.mark.parametrize("name", list(COUNTS))
def test_every_count_rejects_a_negative_value_by_name(name):
    _raises_naming(COUNTS[name], -1, name, ValueError)


@pytest.mark.parametrize("value", NUMBER_TYPES, ids=repr)
@pytest.mark.parametrize("name", list(NUMBERS))
def test_every_number_accepts_python_numpy_and_0d_array_floats(name, value):
    checked(NUMBERS[name], value)


def test_a_checked_solver_option_is_stored_as_a_python_scalar():
    solver = fixedopt.GaussNewton(regularization=np.float64(1e-8), max_linesearch_steps=np.int64(5))
    assert type(solver.regularization) is float and type(solver.max_linesearch_steps) is int
    assert fixedopt.LBFGS(memory_size=jnp.array(4)) == fixedopt.LBFGS(memory_size=4)


@pytest.mark.parametrize("value", [True, "0.5", jnp.array([0.5]), 0.5j], ids=repr)
@pytest.mark.parametrize("name", list(NUMBERS))
def test_every_number_rejects_other_types_by_name(name, value):
    _raises_naming(NUMBERS[name], value, name, TypeError)


@pytest.mark.parametrize("value", [-1.0, float("nan")], ids=repr)
@pytest.mark.parametrize("name", list(NUMBERS))
def test_every_number_rejects_a_negative_or_nan_value_by_name(name, value):
    _raises_naming(NUMBERS[name], value, name, ValueError)


@pytest.mark.parametrize("value", FLAG_TYPES, ids=repr)
@pytest.mark.parametrize("name", list(FLAGS))
def test_every_flag_accepts_python_and_numpy_bools(name, value):
    checked(FLAGS[name], value)


@pytest.mark.parametrize("value", [0, "False", np.array([False])], ids=repr)
@pytest.mark.parametrize("name", list(FLAGS))
def test_every_flag_rejects_other_types_by_name(name, value):
    _raises_naming(FLAGS[name], value, name, TypeError)


@pytest.mark.parametrize("name", list(CHOICES))
def test_every_choice_accepts_its_strings_and_names_the_choices(name):
    call, valid = CHOICES[name]
    checked(call, np.str_(valid))
    for bad in ("nope", 3, jnp.zeros(2)):
        _raises_naming(call, bad, name, ValueError)
        with pytest.raises(ValueError, match=f"one of .*{valid}"):
            call(bad)


@pytest.mark.parametrize(
    ("cost", "error", "expected"),
    [(-1.0, ValueError, "a finite number > 0"), (0.0, ValueError, "a finite number > 0"),
     (float("nan"), ValueError, "a finite number"), (float("inf"), ValueError, "a finite number"),
     ("0.5", TypeError, "a number"), (True, TypeError, "a number")],
    ids=repr,
)  # fmt: skip
def test_a_solver_of_ones_own_with_a_bad_evaluations_per_step_is_named(cost, error, expected):
    """A count of 0, a negative or a NaN ``evaluations_per_step`` would never refill the
    lanes (the batch would hang): ``minimize`` and ``compiler_options`` name it instead."""

    class Refilling(fixedopt.LBFGS):
        evaluations_per_step = cost

    x0, fixed = jnp.zeros((4, 2)), jnp.zeros((4, 2), bool)
    for call in (lambda: fixedopt.minimize(lambda x: jnp.sum(x**2), x0, fixed,
                                           batched=True, solver=Refilling()),
                 lambda: fixedopt.compiler_options(Refilling())):  # fmt: skip
        with pytest.raises(error, match=f"`Refilling.evaluations_per_step` must be {expected}"):
            call()
