"""The check of CONVERGED claims after the loop (``fixedopt._driver.after_loop``): a
row re-run after a rejected claim is independent of the other re-run rows (the same
bits alone, in a batch and shuffled), counts the check's step as one, and a row that
keeps claiming falsely ends STALLED after ``PASSES`` passes.

Every solve here has 4 rows of float64 and Levenberg-Marquardt's defaults: one loop
program and one check program, reused (``lanes=2``: the rows re-run go through the
same compiled loop as the first pass)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Status
from fixedopt._driver import after_loop, loop
from fixedopt._numerics import cpu_compiler
from tests.helpers import bits


def saddle(x, a):
    """``|r|^2 / 2`` has a saddle point at 0 (value ``a^2 / 2``) where the cosine test
    holds; minima at ``(+-sqrt(a), 0)`` (value 0)."""
    return jnp.stack([x[0] ** 2 - a, x[1], 0.5 * x[0] * x[1]])


# Rows 0 and 2 start at the saddle point (a claim at step 0, rejected: a re-run);
# rows 1 and 3 start off it and are checked once, where they converge.
STARTS = np.array([[0.0, 0.0], [2.0, 0.5], [0.0, 0.0], [-1.5, 0.3]])
SHIFTS = np.array([1.0, 2.0, 3.0, 0.5])


def solve(order=slice(None), starts=STARTS, max_steps=100):
    return fixedopt.least_squares(
        saddle, jnp.asarray(starts[order]), False, args=(jnp.asarray(SHIFTS[order]),),
        batched=True, lanes=2, max_steps=max_steps,
    )  # fmt: skip


def assert_same_row(solution, row, reference, reference_row, message):
    """Every field of ``solution``'s row ``row`` bit-identical to ``reference``'s row
    ``reference_row``."""
    for field in fixedopt.Solution._fields:
        mine, theirs = getattr(solution, field), getattr(reference, field)
        for leaf, other in zip(jax.tree.leaves(mine), jax.tree.leaves(theirs)):
            np.testing.assert_array_equal(bits(np.asarray(leaf)[row]),
                                          bits(np.asarray(other)[reference_row]),
                                          err_msg=f"{message} {field}")  # fmt: skip


@pytest.fixture(scope="module")
def batch():
    return solve()


def test_rows_re_run_after_a_rejected_claim_are_independent(batch):
    """Rows 0 and 2 are re-run together; each has the same bits when re-run alone
    (the other saddle row replaced by a row that converges at once) and when the
    batch is shuffled."""
    assert np.all(np.asarray(batch.converged))
    np.testing.assert_allclose(np.abs(np.asarray(batch.x[:, 0])), np.sqrt(SHIFTS), rtol=1e-6)
    order = np.array([2, 3, 0, 1])
    shuffled = solve(order)
    for row in range(4):
        assert_same_row(shuffled, int(np.flatnonzero(order == row)[0]), batch, row,
                        f"row {row} shuffled")  # fmt: skip
        alone = STARTS.copy()
        other = 2 - row if row in (0, 2) else 0  # the other saddle row, started elsewhere
        alone[other] = [1.0, 0.0]
        assert_same_row(solve(starts=alone), row, batch, row, f"row {row} alone")


def test_the_check_compiles_with_the_solves_cpu_options(batch):
    """On the CPU, at the top level, the check's program is compiled with XLA:CPU's
    elemental emitter (``cpu_compiler.CPU_OPTIONS``: 0.6x its compile), whatever the
    solver: ``batch``'s claims were checked by the tuned ``jit``."""
    if jax.default_backend() != "cpu" or not cpu_compiler.accepted():
        pytest.skip("the CPU's options only")
    assert after_loop._check_tuned._cache_size() >= 1


def test_the_checks_step_counts_as_one(batch):
    """A start rejected at step 0 leaves along the check's step: one step. With
    ``max_steps=1`` the rows stop there (MAX_STEPS) at the check's lower point; the
    whole solve takes that one step and then the steps of a solve from that point."""
    first = solve(max_steps=1)
    saddles = [0, 2]
    np.testing.assert_array_equal(np.asarray(first.steps)[saddles], 1)
    assert np.all(np.asarray(first.status)[saddles] == Status.MAX_STEPS)
    values = np.asarray(first.value)[saddles]
    assert np.all(values < 0.5 * SHIFTS[saddles] ** 2)  # lower than the saddle
    from_there = solve(starts=np.where(np.isin(np.arange(4), saddles)[:, None],
                                       np.asarray(first.x), STARTS))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(batch.steps)[saddles],
                                  1 + np.asarray(from_there.steps)[saddles])  # fmt: skip
    np.testing.assert_allclose(np.asarray(batch.x)[saddles], np.asarray(from_there.x)[saddles],
                               rtol=1e-9, atol=1e-12)  # fmt: skip


def _always_rejected(problem, x, value, grad):
    """The least-squares start's check, with every claim shown wrong (decrement
    ``inf``) and a step of 1e-3 of ``x`` downhill."""
    step = -1e-3 * jnp.sign(grad) * jnp.maximum(jnp.abs(x), 1.0)
    return jnp.asarray(jnp.inf, value.dtype), jnp.where(problem.fixed, 0.0, step)


def test_a_row_that_keeps_claiming_falsely_stops_stalled_after_the_passes(monkeypatch):
    """Every claim shown wrong: after ``PASSES`` passes (1 here: one check, one
    re-run) the saddle rows, claimed at their start and again after the rejection
    (at their minimum), end STALLED (reason NONE), not CONVERGED; the rows that
    converge after steps are not claimed and stay CONVERGED. A fresh model (the
    patched check compiles)."""
    monkeypatch.setattr(loop, "curvature_check", _always_rejected)
    monkeypatch.setattr(after_loop, "PASSES", 1)
    passes = []
    check = after_loop._check
    monkeypatch.setattr(after_loop, "_check", lambda *a: passes.append(1) or check(*a))
    fun = lambda x, a: saddle(x, a) * 1.0  # a new function: its own programs
    solution = fixedopt.least_squares(fun, jnp.asarray(STARTS), False, batched=True,
                                      args=(jnp.asarray(SHIFTS),), lanes=2)  # fmt: skip
    status = np.asarray(solution.status)
    np.testing.assert_array_equal(status[[0, 2]], Status.STALLED)
    np.testing.assert_array_equal(np.asarray(solution.reason)[[0, 2]], fixedopt.Reason.NONE)
    np.testing.assert_array_equal(status[[1, 3]], Status.CONVERGED)
    assert len(passes) == 1, passes
