"""The batch-axis trap: with ``batched=True`` and no ``args_axes``, every array in
``args`` is per row. When the batch size B is also another axis length, a shared
argument of leading length B cannot be told from a per-row one by its shape: one
``UserWarning`` names the arguments read as per row and the fix. The rule: B is a
non-leading axis length of an array in ``args`` (or ``sigma``/``counts``): every
array argument is named; else B is a non-leading axis length of ``x0``: the 1-D
arguments of length B are named (they could be one value per parameter). Where the
shapes leave no doubt, or ``args_axes`` is given, or there is no batch, nothing is
said.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt

# Warnings said while tracing, one fit against its truth to 1e-6: none rests on the
# backend's rounding (XLA's expensive backend optimizations off, conftest.py).
pytestmark = pytest.mark.fewer_optimizations


def traced(call):
    """``call()`` traced, not compiled nor run (``jax.eval_shape``): the warning is said
    by the argument checks, before any program exists (tests below show it under ``jit``
    and that the reading it names is the one used); its cases compiled 17 solves for it
    (39 CPU s of the module, CI)."""
    return jax.eval_shape(call)


B = 6  # the batch size of the ambiguous cases
T = jnp.linspace(0.0, 2.0, B)  # a shared time axis whose length happens to be B
CURVES = jnp.exp(-jnp.outer(jnp.linspace(0.5, 1.5, B), T))  # (B, B): B curves of B bins


def decay(p, t, y):
    return p[0] * jnp.exp(-p[1] * t) - y


def decay_objective(p, t, y):
    return 0.5 * jnp.sum(decay(p, t, y) ** 2)


def weighted(x, weights):
    return jnp.sum(weights * (x - 1.0) ** 2)


P0 = jnp.ones((B, 2))
STEPS = {"max_steps": 3}


def solve_minimize(**options):
    return fixedopt.minimize(decay_objective, P0, False, **STEPS, **options)


def solve_least_squares(**options):
    return fixedopt.least_squares(decay, P0, False, **STEPS, **options)


def covariance(**options):
    return fixedopt.covariance(P0, decay, False, **options)


def hessian_covariance(**options):
    return fixedopt.hessian_covariance(P0, decay_objective, False, **options)


def _decay_tree(p, data):
    return decay_objective(p, data["t"], data["y"])


SQUARE = jnp.zeros((3, 3))  # 3 rows of 3 parameters: B equals x0's trailing axis

# name: (call, the text the message must contain)
WARNS = {
    "minimize_shared_grid": (
        lambda: solve_minimize(args=(T, CURVES), batched=True),
        f"args[0] of shape ({B},)",
    ),
    "least_squares_shared_grid": (
        lambda: solve_least_squares(args=(T, CURVES), batched=True),
        f"args[0] of shape ({B},)",
    ),
    "least_squares_with_sigma": (  # sigma is appended to args: not named, not doubled
        lambda: solve_least_squares(args=(T, CURVES), batched=True, sigma=0.1),
        f"args[1] of shape ({B}, {B})",
    ),
    "least_squares_poisson": (
        lambda: fixedopt.least_squares(
            lambda p, t: jnp.broadcast_to(p[0] * jnp.exp(-p[1] * t), (B,)),  # split: 1 time
            P0,
            False,
            args=(T,),
            batched=True,
            estimator="poisson",
            counts=jnp.ones((B, B)),
            **STEPS,
        ),  # the counts (B, B), appended to args, are the evidence
        f"args[0] of shape ({B},)",
    ),
    "covariance": (
        lambda: covariance(args=(T, CURVES), batched=True),
        f"args[0] of shape ({B},)",
    ),
    "hessian_covariance": (
        lambda: hessian_covariance(args=(T, CURVES), batched=True),
        f"args[0] of shape ({B},)",
    ),
    "trailing_axis_of_x0": (  # per-parameter weights of length 3, in a batch of 3
        lambda: fixedopt.minimize(weighted, SQUARE, False, args=(jnp.ones(3),), batched=True),
        "args[0] of shape (3,)",
    ),
    "a_tree_argument": (
        lambda: fixedopt.minimize(
            _decay_tree, P0, False, args=({"t": T, "y": CURVES},), batched=True, **STEPS
        ),
        f"args[0]['t'] of shape ({B},)",
    ),
}


SILENT = {
    "unambiguous_shapes": lambda: fixedopt.minimize(
        decay_objective,
        jnp.ones((4, 2)),
        False,
        batched=True,
        **STEPS,
        args=(jnp.ones((4, 7)), jnp.ones((4, 7))),
    ),
    "args_axes_shares_the_grid": lambda: solve_minimize(
        args=(T, CURVES), batched=True, args_axes=(None, 0)
    ),
    "args_axes_confirms_per_row": lambda: solve_least_squares(
        args=(jnp.ones((B, B)), CURVES), batched=True, args_axes=(0, 0)
    ),
    "least_squares_sigma_with_args_axes": lambda: solve_least_squares(
        args=(T, CURVES), batched=True, args_axes=(None, 0), sigma=0.1
    ),
    "covariance_with_args_axes": lambda: covariance(
        args=(T, CURVES), batched=True, args_axes=(None, 0)
    ),
    "not_batched": lambda: fixedopt.minimize(
        decay_objective, jnp.ones(2), False, args=(T, CURVES[0]), **STEPS
    ),
    "square_x0_with_per_row_data": lambda: fixedopt.minimize(  # (B, m) data is data
        lambda x, y: jnp.sum((x - jnp.mean(y)) ** 2),
        SQUARE,
        False,
        batched=True,
        args=(jnp.ones((3, 40)),),
    ),
    "python_scalars_only": lambda: fixedopt.minimize(
        lambda x, c: jnp.sum((x - c) ** 2), SQUARE, False, args=(1.0,), batched=True
    ),
    "curve_fit_decides_itself": lambda: fixedopt.curve_fit(
        lambda t, a, k: a * jnp.exp(-k * t), T, CURVES, P0, batched=True, max_steps=3
    ),
}


@pytest.mark.parametrize("case", list(WARNS))
def test_an_ambiguous_batch_axis_warns_once_naming_the_argument_and_the_fix(case):
    call, named = WARNS[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced(call)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1, messages
    (message,) = messages
    assert named in message, message
    assert "args_axes" in message and "None for shared and 0 for per row" in message
    assert "equals the batch size" in message
    assert "args[2]" not in message  # least squares' appended sigma is not the user's
    # It points at the caller's line (this file), not into fixedopt.
    assert caught[0].filename == __file__


def test_the_message_of_the_shared_grid_case():
    with pytest.warns(UserWarning) as record:
        traced(lambda: solve_minimize(args=(T, CURVES), batched=True))
    assert str(record[0].message) == (
        f"batched=True: args[0] of shape ({B},) and args[1] of shape ({B}, {B}) are read as "
        f"per row: their leading axis of length {B} equals the batch size, so each is split "
        f"one slice per row. But {B} is also the length of axis 1 of args[1] of shape "
        f"({B}, {B}), so an argument shared by every row (a grid of x values, a weight per "
        "parameter) cannot be told from a per-row one by its shape. Say which with "
        "`args_axes`, one entry per argument, None for shared and 0 for per row: e.g. "
        "args_axes=(None, 0) shares args[0]; giving args_axes explicitly silences this "
        "warning."
    )


@pytest.mark.parametrize("case", list(SILENT))
def test_unambiguous_or_explicit_calls_are_silent(case):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced(SILENT[case])


def test_the_warning_fires_while_tracing_once_per_compilation_under_jit():
    solve = jax.jit(lambda t, y: solve_minimize(args=(t, y), batched=True).x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = solve(T, CURVES)
        again = solve(T + 1.0, CURVES)  # same shapes: no new trace, no new warning
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert np.all(np.isfinite(np.asarray(first))) and again.shape == first.shape


def test_the_warned_reading_is_the_one_used_and_args_axes_fixes_it():
    """The warning describes what happens: by default row b sees the single value
    t[b]; with args_axes=(None, 0) every row fits its curve on the whole grid."""
    truth = jnp.stack([jnp.ones(B), jnp.linspace(0.5, 1.5, B)], axis=1)
    with pytest.warns(UserWarning, match="args_axes"):
        split = fixedopt.least_squares(decay, P0, False, args=(T, CURVES), batched=True)
    shared = fixedopt.least_squares(
        decay, P0, False, args=(T, CURVES), batched=True, args_axes=(None, 0)
    )
    np.testing.assert_allclose(np.asarray(shared.x), np.asarray(truth), atol=1e-6)
    assert not np.allclose(np.asarray(split.x), np.asarray(truth), atol=1e-2)
