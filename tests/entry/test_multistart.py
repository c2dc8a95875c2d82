"""``fixedopt.multistart``: K starts per row in one batched solve, each row's best kept,
statuses truthful, fixed entries bit-identical in every start."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Status

T = jnp.linspace(0.0, 4.0, 9)


def decay(p, y):
    return p[0] * jnp.exp(-p[1] * T) - y


def double_well(x, tilt):
    """Two minima per entry, near -1 (the lower, for ``tilt > 0``) and near +1."""
    return jnp.sum((x**2 - 1.0) ** 2 + tilt * x)


def test_one_problem_keeps_the_best_start_and_every_start_is_returned():
    """From +1.5 a local solver stops in the well at +1 (CONVERGED, honestly a local
    minimum); a start of its own at -1.5 finds the lower well, and the best is kept."""
    x0 = jnp.array([1.5, 1.5])
    alone = fixedopt.minimize(double_well, x0, False, args=(0.3,))
    assert bool(alone.converged) and np.all(np.asarray(alone.x) > 0)
    more = jnp.array([[-1.5, -1.5], [-1.5, 1.5]])
    best, every, chosen = fixedopt.multistart(
        fixedopt.minimize, double_well, x0, False, starts=more, args=(0.3,), return_all=True
    )
    assert every.x.shape == (3, 2) and every.status.shape == (3,)
    assert int(chosen) == 1 and bool(best.converged)
    assert np.all(np.asarray(best.x) < 0)
    np.testing.assert_allclose(np.asarray(every.x[0]), np.asarray(alone.x), rtol=1e-10)
    assert float(best.value) == float(every.value.min())


def test_batched_rows_each_keep_their_best_and_share_args_correctly():
    """Three decay fits (per-row data, a shared time axis closed over) from growth-rate
    starts; row 1 fixes its amplitude. Each row ends at its own truth."""
    y = jnp.stack([5.0 * jnp.exp(-1.5 * T), 2.0 * jnp.exp(-0.5 * T), 3.0 * jnp.exp(-2.0 * T)])
    x0 = jnp.array([[1.0, -3.0], [2.0, -1.0], [3.0, 1.0]])
    fixed = jnp.array([[False, False], [True, False], [False, False]])
    best, every, chosen = fixedopt.multistart(
        fixedopt.least_squares, decay, x0, fixed, args=(y,), batched=True, starts=5,
        return_all=True,
    )  # fmt: skip
    assert every.x.shape == (5, 3, 2) and chosen.shape == (3,)
    np.testing.assert_allclose(np.asarray(best.x), [[5, 1.5], [2, 0.5], [3, 2]], rtol=1e-8)
    assert [Status(int(s)) for s in best.status] == [Status.CONVERGED] * 3
    assert np.all(np.asarray(every.x[:, 1, 0]) == 2.0), "row 1's amplitude is fixed"


def test_the_kept_start_is_the_lowest_converged_then_the_lowest_finite():
    """(3 starts, 4 rows.) Row 0: start 1 has the lowest value but did not converge;
    converged start 2 is kept. Row 1: no converged start, the lowest finite value
    (start 1; start 0 is NaN, start 2 inf). Row 2: nothing finite, start 0. Row 3:
    start 2 is lower than start 0 by rounding only (a tie): start 0 stays."""
    nan, inf = jnp.nan, jnp.inf
    value = jnp.array([[3.0, nan, nan, 1.0], [1.0, 5.0, nan, 9.0], [2.0, inf, nan, 1.0 - 1e-12]])
    converged = jnp.array([[True, False, False, True], [False, False, False, False],
                           [True, False, False, True]])  # fmt: skip
    from fixedopt._entry.multistart import best_start

    assert best_start(value, converged).tolist() == [2, 1, 0, 0]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_fixed_entries_are_bit_identical_in_every_start(dtype):
    """Fixed values with awkward bits (a signed zero, 1e-6 and 1e6 scales, a value on
    its bound) stay those bits in every start's solution and in the best, with a box,
    a one-sided bound and no bound among the free entries."""
    rng = np.random.default_rng(0)
    x0 = jnp.asarray(rng.uniform(0.5, 1.5, (4, 5)) * [1e-6, 1.0, 1e6, 1.0, 1.0], dtype)
    x0 = x0.at[0, 1].set(-0.0).at[2, 3].set(np.pi * 1e-6)
    fixed = jnp.asarray(rng.random((4, 5)) < 0.4).at[0, 1].set(True).at[2, 3].set(True)
    lower = jnp.asarray([-1.0, -2.0, -jnp.inf, -jnp.inf, 0.0], dtype)
    upper = jnp.asarray([1.0, 2.0, jnp.inf, jnp.inf, jnp.inf], dtype)
    target = jnp.asarray(rng.normal(size=(4, 5)), dtype)
    fun = lambda x, t: jnp.sum((x - t) ** 2) + 0.1 * jnp.sum(x**4)
    best, every, _ = fixedopt.multistart(
        fixedopt.minimize, fun, x0, fixed, args=(target,), bounds=(lower, upper),
        batched=True, starts=4, key=3, return_all=True,
    )  # fmt: skip
    bits = lambda a: np.asarray(a).view(np.uint32 if dtype == jnp.float32 else np.uint64)
    mask = np.asarray(fixed)
    for x in [best.x, *every.x]:
        assert np.array_equal(bits(x)[mask], bits(x0)[mask])
    free = np.asarray(every.x)[:, ~mask]
    lower_free = np.broadcast_to(np.asarray(lower), (4, 5))[~mask]
    upper_free = np.broadcast_to(np.asarray(upper), (4, 5))[~mask]
    assert np.all((free >= lower_free) & (free <= upper_free))
    assert np.all(np.asarray(best.converged))


def test_drawn_starts_escape_a_bad_start_in_a_box():
    """Every row starts in the upper well, inside the box [-2, 2]: the drawn starts
    (uniform in the box) find the lower well in each row."""
    x0 = jnp.full((6, 1), 1.2)
    best = fixedopt.multistart(
        fixedopt.minimize, double_well, x0, False, args=(0.3,), batched=True, args_axes=None,
        bounds=(-2.0, 2.0), starts=8,
    )  # fmt: skip
    assert np.all(np.asarray(best.x) < 0) and np.all(np.asarray(best.converged))


def test_sigma_per_row_is_repeated_for_every_start():
    """``sigma`` with the batch axis goes with its row in every start: the chi-square
    (``value``) of each row is its own."""
    y = jnp.stack([5.0 * jnp.exp(-1.5 * T) + 0.1 * jnp.sin(7 * T), 2.0 * jnp.exp(-0.5 * T)])
    sigma = jnp.array([[0.5], [2.0]]) * jnp.ones((2, 9))
    x0 = jnp.array([[4.0, 1.0], [1.0, 1.0]])
    best = fixedopt.multistart(fixedopt.least_squares, decay, x0, False, starts=3, args=(y,),
                               batched=True, sigma=sigma)  # fmt: skip
    x = np.asarray(best.x)
    chi2 = [
        0.5 * np.sum((np.asarray(decay(x[r], y[r])) / np.asarray(sigma[r])) ** 2) for r in (0, 1)
    ]
    np.testing.assert_allclose(np.asarray(best.value), chi2, rtol=1e-8, atol=1e-20)
    assert np.all(np.asarray(best.converged))


def test_bad_starts_are_named():
    with pytest.raises(ValueError, match="`starts` must be at least 1"):
        fixedopt.multistart(fixedopt.minimize, double_well, jnp.ones(2), False, starts=0,
                            args=(0.3,))  # fmt: skip


def test_a_spread_given_as_an_array_draws_the_same_starts():
    """``spread`` is data, not part of a program's key: an array is taken (it was
    refused as an unhashable static argument) and draws what the float draws."""
    x0 = jnp.full((2, 2), 3.0)
    kept = []
    for spread in (0.5, jnp.asarray(0.5)):
        _, every, _ = fixedopt.multistart(
            fixedopt.minimize, double_well, x0, False, args=(0.3,), batched=True,
            args_axes=None, starts=4, spread=spread, return_all=True,
        )  # fmt: skip
        kept.append(every.x)
    np.testing.assert_array_equal(kept[0], kept[1])


def test_a_new_mask_and_new_fixed_values_lower_no_program():
    """``multistart``'s own programs (the draws, the start-major inputs, the choice) take
    the mask and the fixed values as data, as the solve does: a second call with others
    lowers nothing, and each call keeps its fixed entries bit for bit."""
    lowered, here = [], threading.current_thread()

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration" and (
            threading.current_thread() is here
        ):
            lowered.append(str(kwargs.get("fun_name", "?")))

    def call(x0, fixed):
        best = fixedopt.multistart(fixedopt.minimize, double_well, x0, fixed, args=(0.3,),
                                   batched=True, args_axes=None, starts=4)  # fmt: skip
        np.testing.assert_array_equal(np.asarray(best.x)[fixed], np.asarray(x0)[fixed])

    call(jnp.full((3, 2), 0.5), np.array([[True, False], [False, False], [False, True]]))
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        call(jnp.full((3, 2), 0.7), np.array([[False, True], [True, False], [False, False]]))
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert lowered == []
