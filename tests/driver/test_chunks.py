"""A batch in chunks each solved whole (``fixedopt._driver.chunks``, a TPU's least squares),
here on the CPU through a profile that has them: rows as the lanes solve them, stragglers
solved again, padded chunks skipped, fixed entries exact, a NaN row alone, one program."""

import functools

import jax
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import chunks, machine
from fixedopt._numerics import backends
from fixedopt.testing import compiled_solves
from fixedopt.testing_problems import gaussian_fits, gaussian_model

pytestmark = pytest.mark.fewer_optimizations

# Plain lanes (no CPU blocks: a batch is one call), and the same with chunks of 64 rows
# that stop once at most 2 rows have run alone for 2 trips.
LANES = backends.CPU._replace(blocks=False, chunked=False, rows_on_host=False)
CHUNKS = LANES._replace(chunk_rows=64, tail_patience=2)
# Starts that take Levenberg-Marquardt 7-49 steps where the others take 2-5.
SLOW = {3: [1e-3, 0, 0, 1, 100], 100: [1, 2, 2, 50, 0], 200: [1, 2, 2, 1e3, 10],
        201: [1e-3, 0, 0, 1, 100]}  # fmt: skip


def residual(p, y):
    return gaussian_model(p) - y


def spots(batch: int, seed: int = 0):
    fits = gaussian_fits(batch, seed)
    x0 = np.array(fits.x0, np.float64)
    for row, start in SLOW.items():
        if row < batch:
            x0[row] = start
    return x0, np.asarray(fits.fixed), np.asarray(fits.data, np.float64)


def solve(monkeypatch, profile, x0, fixed, data):
    monkeypatch.setitem(backends.BACKENDS, "cpu", profile)
    return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True,
                                  ftol=1e-6, max_steps=200)  # fmt: skip


def test_the_profile_chooses_chunks_for_least_squares_only():
    lm, lbfgs = fixedopt.LevenbergMarquardt(), fixedopt.LBFGS()
    tpu = backends.TPU.chunk_rows
    assert machine.schedule(lm, None, "tpu").chunk(4 * tpu) == tpu
    assert machine.schedule(lbfgs, None, "tpu").chunk(4 * tpu) == 0  # its lanes measured
    assert machine.schedule(lm, None, "tpu").chunk(tpu) == 0  # one chunk: the lanes
    assert machine.schedule(lm, 1024, "tpu").chunk(4 * tpu) == 0  # lanes asked for
    assert machine.schedule(lm, None, "cpu").chunk(4 * tpu) == 0


def test_chunks_solve_every_row_as_the_lanes_do(monkeypatch):
    """256 rows in 4 chunks; rows 3, 100, 200 and 201 outlast their chunks' patience and
    are solved again after them; row 70 starts at NaN. The same steps, statuses and
    values as the lanes' solve (another program: equal to rounding), fixed entries
    bit-identical."""
    x0, fixed, data = spots(256)
    x0[70, 0] = np.nan
    lanes = solve(monkeypatch, LANES, x0, fixed, data)
    solved_again = []  # rows left by their chunks, seen by the stragglers' turn
    real = chunks._index

    def index(last, first, left, chunk):
        record = lambda last, count: solved_again.append(int(count)) if last else None
        jax.debug.callback(record, last, left.sum())
        return real(last, first, left, chunk)

    monkeypatch.setattr(chunks, "_index", index)
    chunked = solve(monkeypatch, CHUNKS, x0, fixed, data)
    assert solved_again == [len(SLOW)]  # the four stragglers, solved again together
    np.testing.assert_array_equal(chunked.status, lanes.status)
    np.testing.assert_array_equal(chunked.steps, lanes.steps)
    assert np.asarray(lanes.steps)[list(SLOW)].min() > 2 + CHUNKS.tail_patience
    assert np.asarray(chunked.status)[70] != fixedopt.Status.CONVERGED
    assert np.all(np.asarray(chunked.converged)[np.arange(256) != 70])
    x, expected = np.asarray(chunked.x), np.asarray(lanes.x)
    rows = np.arange(256) != 70
    np.testing.assert_allclose(x[rows], expected[rows], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(x[fixed], x0[fixed])


def test_a_padded_batch_skips_its_empty_chunks_and_a_new_mask_compiles_nothing(monkeypatch):
    """130 rows run in the 256-row program (the next power of two): chunks 3 and 4 hold
    no row to solve; a new fixed set reuses the program."""
    x0, fixed, data = spots(130, seed=1)
    lanes = solve(monkeypatch, LANES, x0, fixed, data)
    chunked = solve(monkeypatch, CHUNKS, x0, fixed, data)
    np.testing.assert_array_equal(chunked.status, lanes.status)
    np.testing.assert_allclose(chunked.x, lanes.x, rtol=1e-12, atol=0)
    before = compiled_solves()
    other = np.roll(fixed, 1, axis=1)
    again = solve(monkeypatch, CHUNKS, x0, other, data)
    assert compiled_solves() == before
    np.testing.assert_array_equal(np.asarray(again.x)[other], x0[other])


def test_a_batch_that_chunks_do_not_divide_fills_its_last(monkeypatch):
    """Inside a caller's ``jit`` a batch keeps its size (200 rows: 3 chunks of 64 and 8
    rows filled up with copies of row 0); compared with the lanes in a ``jit`` too (a
    program compiled by the caller's ``jit`` rounds otherwise than fixedopt's own)."""
    x0, fixed, data = spots(200, seed=2)

    def solve_in_jit(profile, x0, fixed, data):
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True,
                                      ftol=1e-6, max_steps=200)  # fmt: skip

    solved = {}
    for name, profile in (("lanes", LANES), ("chunks", CHUNKS)):
        monkeypatch.setitem(backends.BACKENDS, "cpu", profile)
        solved[name] = jax.jit(functools.partial(solve_in_jit, profile))(x0, fixed, data)
    np.testing.assert_array_equal(solved["chunks"].status, solved["lanes"].status)
    np.testing.assert_allclose(solved["chunks"].x, solved["lanes"].x, rtol=1e-12, atol=0)
