"""``fixedopt._numerics.reduce``: the folded reductions against NumPy's, across the
lengths where folding starts and stops, and the one kernel they compile to on the CPU
where the plain reduction compiles to three (XLA's tree-reduction rewrite)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt._numerics import reduce

LENGTHS = [1, 31, 32, 33, 64, 100, 1024, 1025]


def _vectors(n, dtype, seed=0, batch=()):
    rng = np.random.default_rng(seed + n)
    values = rng.normal(size=(*batch, n)) * 10.0 ** rng.integers(-3, 4, size=(*batch, n))
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", LENGTHS)
def test_sums_and_dots_are_numpys_to_rounding(n, dtype):
    a, b = _vectors(n, dtype), _vectors(n, dtype, seed=1)
    exact = np.sum(a.astype(np.float64) * b.astype(np.float64))
    scale = np.sum(np.abs(a.astype(np.float64) * b.astype(np.float64)))
    eps = np.finfo(dtype).eps
    assert abs(float(reduce.dot(jnp.asarray(a), jnp.asarray(b))) - exact) <= 4 * eps * scale
    assert abs(float(reduce.total(jnp.asarray(a * b))) - exact) <= 4 * eps * scale
    norm = np.sqrt(np.sum(a.astype(np.float64) ** 2))
    assert abs(float(reduce.norm(jnp.asarray(a))) - norm) <= 4 * eps * norm


@pytest.mark.parametrize("n", LENGTHS)
def test_extremes_and_tests_are_numpys_exactly(n):
    a = _vectors(n, np.float64, batch=(3,))
    a[1, n // 2] = np.nan  # NaN wins, as in jnp.max
    for ours, theirs in ((reduce.largest, np.max), (reduce.smallest, np.min)):
        np.testing.assert_array_equal(ours(jnp.asarray(a)), theirs(a, axis=-1))
        np.testing.assert_array_equal(ours(jnp.asarray(a[0]), initial=0.0),
                                      theirs(a[0], initial=0.0))  # fmt: skip
    integers = (a[0] * 1000).astype(np.int32) if n > 1 else np.array([-7], np.int32)
    assert int(reduce.largest(jnp.asarray(integers))) == integers.max()
    assert int(reduce.smallest(jnp.asarray(integers))) == integers.min()
    for k in (0, n - 1):  # one True entry, first or last: in the padded chunk too
        flags = np.zeros(n, bool)
        flags[k] = True
        assert bool(reduce.any_true(jnp.asarray(flags))) and not bool(
            reduce.all_true(jnp.asarray(~flags))
        )
    assert not bool(reduce.any_true(jnp.zeros(n, bool)))
    assert bool(reduce.all_true(jnp.ones(n, bool)))


def test_an_integer_sum_keeps_the_dtype_asked_for():
    counts = jnp.ones((2, 40), jnp.int32)
    total = reduce.total(counts, dtype=jnp.int32)
    assert total.dtype == jnp.int32 and total.tolist() == [40, 40]


def _kernels(function, *args) -> tuple[int, int]:
    text = jax.jit(function).lower(*args).compile().as_text()
    return len(re.findall(r" fusion\(", text)), len(re.findall(r"reduce-window\(", text))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's rewrite")
def test_a_row_reduction_in_the_lanes_shape_is_one_kernel():
    """33 lanes of 64 entries: the plain sum is XLA:CPU's padded reduce-window and a
    reduce (three kernels); folded, one. If this fails, XLA changed how it compiles
    small reductions, and the module's reason to exist needs measuring again."""
    a = jnp.ones((33, 64))
    plain = _kernels(lambda a: jnp.sum(a * a, axis=-1) + 1.0, a)
    folded = _kernels(lambda a: reduce.dot(a, a) + 1.0, a)
    assert plain[1] == 1 and plain[0] == 3
    assert folded == (1, 0)
