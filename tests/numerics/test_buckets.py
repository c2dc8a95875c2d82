"""Batch sizes in buckets: a new batch size in the same bucket reuses the compiled solve,
and its rows get the same bits as in any batch of that bucket."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt.testing import compiled_solves
from tests.helpers import (
    assert_rows_identical,
    bits,
    compiling_threads,
    quadratic,
    quadratic_rows,
)


def test_a_new_batch_size_compiles_nothing_and_gives_the_same_bits():
    # On the CPU every batch of more than 8 rows runs through one program (blocks of
    # one size per model, padded): a new size compiles no solve, and a row gets the
    # same bits in every batch.
    x0, fixed, args = quadratic_rows(size=700, seed=4)
    solve = lambda rows, **options: fixedopt.minimize(
        quadratic, x0[:rows], fixed[:rows], args=tuple(a[:rows] for a in args), batched=True,
        **options,
    )  # fmt: skip
    largest = solve(700)
    before = compiled_solves()
    for rows in (100, 9, 20, 99):
        smaller = solve(rows)
        assert smaller.x.shape == (rows, 8) and smaller.status.shape == (rows,)
        assert_rows_identical(largest, smaller, rows=slice(0, rows), err_msg=f"{rows} rows")
    assert compiled_solves() == before, "a new batch size compiled a solve"
    # At most 8 rows run as one vmap, padded to 8: one other program for all of them;
    # an explicit width is another (same bits per row: a row's arithmetic does not
    # depend on its neighbours or the padding).
    five = solve(5)
    assert compiled_solves() == before + 1
    assert_rows_identical(five, solve(2), rows=slice(0, 2))
    assert compiled_solves() == before + 1
    assert_rows_identical(solve(100, lanes=16), solve(90, lanes=16), rows=slice(0, 90))


def test_a_batch_larger_than_a_block_runs_as_blocks_of_one_program(monkeypatch):
    # Blocks of 32 rows (the default for these rows is 16384): 75 rows are three calls
    # of the block's program, the last padded; each row's bits are those of its block
    # solved alone, and NaN in one block's row 0 reaches no other row.
    from fixedopt._driver import batching

    monkeypatch.setattr(batching, "block_rows", lambda data_bytes: 32)
    x0, fixed, (curvature, center) = quadratic_rows(size=75, seed=8)
    center = center.at[32, 0].set(jnp.nan)
    solve = lambda rows: fixedopt.minimize(
        quadratic, x0[rows], fixed[rows], args=(curvature[rows], center[rows]), batched=True
    )  # fmt: skip
    blocks = solve(slice(0, 75))
    before = compiled_solves()
    for start in (0, 32, 64):
        alone = solve(slice(start, start + 32))
        assert_rows_identical(blocks, alone, rows=slice(start, start + 32), err_msg=f"{start}")
    assert compiled_solves() == before
    statuses = np.asarray(blocks.status)
    assert statuses[32] == fixedopt.Status.NONFINITE
    assert np.all(np.delete(statuses, 32) == fixedopt.Status.CONVERGED)


def test_padded_rows_are_never_solved_and_reach_no_real_row():
    # Row 0 diverges to NaN; the padding copies row 0, and none of it leaks into the
    # reported rows, their steps or statuses.
    x0, fixed, (curvature, center) = quadratic_rows(size=37, seed=5)
    center = center.at[0, 0].set(jnp.nan)
    solution = fixedopt.minimize(quadratic, x0, fixed, args=(curvature, center), batched=True)
    assert solution.x.shape == (37, 8)
    assert solution.status[0] == fixedopt.Status.NONFINITE
    assert bool(jnp.all(solution.status[1:] == fixedopt.Status.CONVERGED))
    alone = fixedopt.minimize(quadratic, x0[5], fixed[5], args=(curvature[5], center[5]))
    np.testing.assert_allclose(solution.x[5], alone.x, rtol=1e-10, atol=1e-12)
    assert np.all(np.asarray(solution.x)[np.asarray(fixed)] == 0.0)


def test_a_solve_traced_by_the_caller_is_not_padded():
    x0, fixed, args = quadratic_rows(size=20, seed=6)

    def fitted(center):
        solution = fixedopt.minimize(quadratic, x0, fixed, args=(args[0], center), batched=True)
        return solution.x

    jaxpr = str(jax.make_jaxpr(fitted)(args[1]))
    assert "20,8" in jaxpr.replace(" ", "") and "32,8" not in jaxpr.replace(" ", "")
    gradient = jax.grad(lambda c: jnp.sum(fitted(c)))(args[1])
    assert gradient.shape == (20, 8) and bool(jnp.all(jnp.isfinite(gradient)))


@pytest.mark.parametrize("size, bucket", [(1, 8), (8, 8), (9, 16), (16, 16), (1000, 1024)])
def test_bucket_sizes(size, bucket):
    from fixedopt._numerics.buckets import bucket as bucket_of

    assert bucket_of(size) == bucket


@pytest.mark.parametrize("data_bytes", [1, 100, 2672, 8000, 10**6])
def test_a_block_holds_8_rows_for_each_default_lane(data_bytes):
    # A row's loop state holds its data: its lanes are at most those of data_bytes.
    from fixedopt._driver.machine import block_rows, default_width

    rows = block_rows(data_bytes)
    assert rows & (rows - 1) == 0
    assert rows >= 8 * default_width(10**9, data_bytes, "cpu")
    assert 8 * 64 <= rows <= 8 * 4096


def test_a_covariance_in_chunks_equals_the_whole_batchs_and_compiles_once(monkeypatch):
    from fixedopt._results import covariance as module

    rng = np.random.default_rng(7)
    t = jnp.linspace(0.0, 1.0, 12)
    residual = lambda p, y: p[0] * jnp.exp(-p[1] * t) + p[2] - y
    rows = 300  # two chunks of 256, the second padded
    truth = rng.uniform(0.5, 2.0, (rows, 3))
    y = (
        truth[:, :1] * np.exp(-truth[:, 1:2] * np.asarray(t))
        + truth[:, 2:]
        + 0.01 * rng.normal(size=(rows, 12))
    )
    fixed = rng.random((rows, 3)) < 0.3
    solution = fixedopt.least_squares(residual, truth, fixed, args=(y,), batched=True)
    chunked = fixedopt.covariance(solution, residual, args=(y,))
    before = module._compiled._cache_size()
    smaller = fixedopt.covariance(jax.tree.map(lambda a: a[:290], solution), residual,
                                  args=(y[:290],))  # fmt: skip
    assert module._compiled._cache_size() == before, "a new batch size compiled a covariance"
    from fixedopt._numerics import buckets

    monkeypatch.setattr(buckets, "at_top_level", lambda: False)  # the whole batch at once
    whole = fixedopt.covariance(solution, residual, args=(y,))
    for mine, theirs in zip(jax.tree.leaves(chunked), jax.tree.leaves(whole)):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    first = np.asarray(whole.covariance)[:290]
    np.testing.assert_array_equal(np.asarray(smaller.covariance), first)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_fixed_entries_keep_their_bits_through_a_padded_batch(dtype, scale):
    # 37 rows run padded to 64 (copies of row 0) and are cut back: the fixed values,
    # signed zeros included, come back bit for bit, in float32 and float64, at any scale.
    x0, fixed, (curvature, center) = quadratic_rows(size=37, seed=9)
    rng = np.random.default_rng(9)
    values = scale * rng.uniform(-1.5, 1.5, size=x0.shape)
    values[rng.random(x0.shape) < 0.2] = -0.0
    solution = fixedopt.minimize(
        quadratic, jnp.asarray(x0, dtype), fixed, fixed_values=jnp.asarray(values, dtype),
        args=(jnp.asarray(curvature, dtype), jnp.asarray(scale * center, dtype)), batched=True,
    )  # fmt: skip
    assert solution.x.shape == (37, 8) and solution.x.dtype == dtype
    expected = np.asarray(jnp.asarray(values, dtype))
    mask = np.asarray(fixed)
    np.testing.assert_array_equal(bits(solution.x)[mask], bits(expected)[mask])
    assert bool(jnp.all(solution.status == fixedopt.Status.CONVERGED))


@pytest.mark.compiles_ahead
def test_an_accelerators_rows_on_the_host_are_padded_there_until_their_program_compiles():
    # An accelerator's profile (rows_on_host False): rows mostly NumPy's (a caller's
    # data; a device mask of fewer bytes beside them) are padded in NumPy while their
    # pad program compiles in fixedopt's thread, then by that program, which the call
    # compiles no more, with the same values and types; rows on the device go through
    # the compiled pad at once.
    from fixedopt._driver import ahead, batching

    rng = np.random.default_rng(3)
    data = rng.normal(size=(5, 27)).astype(np.float32)
    mask = jnp.asarray(rng.random((5, 3)) < 0.5)  # on the device, 15 bytes
    shared = np.float32(2.0)  # not padded
    leaves, flags = (data, mask, shared), (True, True, False)
    pad = lambda leaves: batching._padded(leaves, 8, flags, False)
    first, threads = compiling_threads(lambda: pad(leaves), "jit(_pad_compiled)")
    ahead.settle()
    assert isinstance(first[0], np.ndarray) and first[2] is shared
    assert threads == [] or all(name.startswith("fixedopt-ahead") for name in threads)
    again, threads = compiling_threads(lambda: pad(leaves), "jit(_pad_compiled)")
    assert threads == [] and isinstance(again[0], jax.Array)
    for mine, theirs in zip(first, again):
        assert np.shape(mine) == np.shape(theirs) and np.result_type(mine) == theirs.dtype
        np.testing.assert_array_equal(mine, theirs)
    on_device = (jnp.asarray(data[:, :26]), mask, shared)  # a program of its own
    grown, threads = compiling_threads(lambda: pad(on_device), "jit(_pad_compiled)")
    assert threads == ["MainThread"] and isinstance(grown[0], jax.Array)
