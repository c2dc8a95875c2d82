"""Rows started by their lanes' next trip, on the trip's one evaluation of the model
(``fixedopt._driver.shared_start``): the program holds the model once, and every row
keeps the bits, steps and status of a row started by the refill's own evaluation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import engine
from fixedopt.testing import compiled_solves

T = np.linspace(0.0, 2.0, 300)  # 300 residuals: at least Backend.start_in_step_residuals


def long_residuals(p, y):
    return p[0] * jnp.exp(-p[1] * T) + p[2] - y


def long_residuals_apart(p, y):  # the same model, another program: started by the refill
    return p[0] * jnp.exp(-p[1] * T) + p[2] - y


def short_residuals(p, y):
    return p[0] * jnp.exp(-p[1] * T[:20]) + p[2] - y


@pytest.mark.parametrize("rows, lanes", [(40, 8), (5, None)], ids=["refills", "whole_batch"])
def test_a_long_model_is_evaluated_once_in_its_program(rows, lanes):
    # Lowered only (inside the caller's jit: nothing compiled); the model's exp is its
    # evaluation (its derivative reuses it). A short model keeps the refill's start.
    def exps(residuals, m):
        def solve(x0, y):
            return fixedopt.least_squares(residuals, x0, np.zeros((rows, 3), bool), args=(y,),
                                          batched=True, lanes=lanes).x  # fmt: skip

        x0, y = np.ones((rows, 3), np.float32), np.zeros((rows, m), np.float32)
        return jax.jit(solve).lower(x0, y).as_text().count("stablehlo.exponential")

    assert exps(long_residuals, 300) == 1
    assert exps(short_residuals, 20) == 2


def test_rows_started_in_their_trip_keep_the_refills_bits(monkeypatch):
    rng = np.random.default_rng(3)
    rows = 12
    y = 2.0 * np.exp(-1.3 * T) + 0.5 + rng.normal(0.0, 0.01, (rows, T.size))
    x0 = np.array([2.0, 1.3, 0.5]) * rng.uniform(0.5, 1.5, (rows, 3))
    fixed = rng.random((rows, 3)) < 0.3
    lower, upper = np.full((rows, 3), -1.0), np.full((rows, 3), 4.0)
    x0[2, 0] = np.nan  # NONFINITE at its start
    x0[4, 1], fixed[4, 1] = 4.0, False  # a start on its bound

    def solve(residuals, max_steps):
        return fixedopt.least_squares(residuals, x0, fixed, args=(y,), batched=True, lanes=4,
                                      bounds=(lower, upper), max_steps=max_steps)  # fmt: skip

    started = [solve(long_residuals, steps) for steps in (50, 1, 0)]
    # A new mask and new fixed values run the same program, the new fixed entries exact.
    before, moved = compiled_solves(), np.nan_to_num(x0, nan=1.0)
    mask = np.roll(fixed, 1, axis=1)
    again = fixedopt.least_squares(long_residuals, moved, mask, args=(y,), batched=True,
                                   lanes=4, bounds=(lower, upper), max_steps=50)  # fmt: skip
    assert compiled_solves() == before
    np.testing.assert_array_equal(np.asarray(again.x)[mask], moved[mask])
    monkeypatch.setattr(engine, "_start_in_step", lambda *_: False)
    apart = [solve(long_residuals_apart, steps) for steps in (50, 1, 0)]
    for one, other in zip(started, apart):
        for name in ("x", "value", "grad_norm", "steps", "status", "reason"):
            np.testing.assert_array_equal(getattr(one, name), getattr(other, name), err_msg=name)
        np.testing.assert_array_equal(np.asarray(one.x)[fixed], x0[fixed])  # NaN too
    statuses = set(np.asarray(started[0].status).tolist())
    assert {fixedopt.Status.CONVERGED, fixedopt.Status.NONFINITE} <= statuses
    assert set(np.asarray(started[1].steps).tolist()) <= {0, 1}
    assert not np.any(started[2].steps)
