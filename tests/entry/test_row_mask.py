"""``where=``: the rows of a batch to solve (issue 63). The rows left out are not
solved and spend no lane: the solved rows equal, bit for bit, the same rows solved
alone; the others report SKIPPED, NaN where free, their fixed values where fixed."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt

T = np.linspace(0.0, 3.0, 30)


def decay(t, a, rate):
    return a * jnp.exp(-rate * t)


YS = np.stack([decay(T, 2.0, 1.3), np.zeros(30), decay(T, 1.0, 0.5), np.zeros(30)])
WHERE = np.array([True, False, True, False])


def test_skipped_rows_report_skipped_and_nan_and_solved_rows_equal_their_own_fit():
    fixed = np.array([[0, 0], [1, 0], [0, 0], [0, 0]])
    popt, pcov, res = fixedopt.curve_fit(decay, T, YS, [1.0, 1.0], batched=True, where=WHERE,
                                         fixed=fixed, result=True)  # fmt: skip
    alone, alone_pcov = fixedopt.curve_fit(decay, T, YS[WHERE], [1.0, 1.0], batched=True)
    np.testing.assert_array_equal(popt[WHERE], alone)
    np.testing.assert_array_equal(pcov[WHERE], alone_pcov)
    skipped = fixedopt.Status.SKIPPED
    np.testing.assert_array_equal(res.solution.status, [0, skipped, 0, skipped])
    np.testing.assert_array_equal(res.solution.steps[~WHERE], [0, 0])
    assert popt[1, 0] == 1.0 and np.isnan(popt[1, 1]) and np.all(np.isnan(popt[3]))
    assert np.isnan(res.perr[1, 1]) and res.perr[1, 0] == 0.0 and np.all(np.isnan(res.perr[3]))


def test_skipped_rows_spend_no_lane(monkeypatch):
    """The solve sees the two rows to solve, not four."""
    import fixedopt._entry.row_mask as row_mask

    seen = []
    original = row_mask.run
    monkeypatch.setattr(row_mask, "run", lambda plan, inputs: seen.append(
        inputs.x0.shape) or original(plan, inputs))  # fmt: skip
    residual = lambda p, y: decay(T, *p) - y
    fixedopt.least_squares(residual, jnp.ones((4, 2)), False, args=(YS,), batched=True,
                           where=WHERE)  # fmt: skip
    assert seen == [(2, 2)]


def test_a_gradient_through_the_solved_rows():
    """d(a)/d(scale of the data) = a for a decay: 2 + 1 for rows 0 and 2."""
    residual = lambda p, y: decay(T, *p) - y

    def total(scale):
        sol = fixedopt.least_squares(residual, jnp.ones((4, 2)), False, args=(scale * YS,),
                                     batched=True, where=WHERE)  # fmt: skip
        return sol.x[0, 0] + sol.x[2, 0]

    np.testing.assert_allclose(jax.grad(total)(1.0), 3.0, rtol=1e-9)


def test_no_row_and_bad_masks():
    fun = lambda x: jnp.sum((x - 1.0) ** 2)
    sol = fixedopt.minimize(fun, jnp.zeros((3, 2)), False, batched=True, where=np.zeros(3, bool))
    assert np.all(sol.status == fixedopt.Status.SKIPPED) and np.all(np.isnan(sol.x))
    with pytest.raises(ValueError, match=r"`where` must have shape \(3,\), one flag per row"):
        fixedopt.minimize(fun, jnp.zeros((3, 2)), False, batched=True, where=[True, False])
    with pytest.raises(ValueError, match=r"`where` .* needs batched=True"):
        fixedopt.minimize(fun, jnp.zeros(2), False, where=[True])
    with pytest.raises(TypeError, match="`where` must be known at trace time"):
        jax.jit(lambda w: fixedopt.minimize(fun, jnp.zeros((3, 2)), False, batched=True,
                                            where=w).x)(jnp.ones(3, bool))  # fmt: skip
