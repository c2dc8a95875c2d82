"""``fixedopt._numerics.reduce``: the folded reductions against NumPy's, across the
lengths where folding starts and stops, folding on and off; the one kernel they compile
to on the CPU where the plain reduction compiles to three (XLA's tree-reduction
rewrite); and where the lanes turn folding on."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import machine
from fixedopt._numerics import backends, kernels, reduce

LENGTHS = [1, 31, 32, 33, 64, 100, 256, 257, 1025]


@pytest.fixture(params=[True, False], ids=["folded", "plain"])
def folding(request):
    """Folding on or off, at the CPU's width (its machine profile's kernels)."""
    with kernels.using(backends.CPU.kernels), reduce.folding(request.param):
        yield request.param


def _vectors(n, dtype, seed=0, batch=()):
    rng = np.random.default_rng(seed + n)
    values = rng.normal(size=(*batch, n)) * 10.0 ** rng.integers(-3, 4, size=(*batch, n))
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", LENGTHS)
def test_sums_and_dots_are_numpys_to_rounding(n, dtype, folding):
    a, b = _vectors(n, dtype), _vectors(n, dtype, seed=1)
    exact = np.sum(a.astype(np.float64) * b.astype(np.float64))
    scale = np.sum(np.abs(a.astype(np.float64) * b.astype(np.float64)))
    eps = np.finfo(dtype).eps
    assert abs(float(reduce.dot(jnp.asarray(a), jnp.asarray(b))) - exact) <= 4 * eps * scale
    assert abs(float(reduce.total(jnp.asarray(a * b))) - exact) <= 4 * eps * scale
    norm = np.sqrt(np.sum(a.astype(np.float64) ** 2))
    assert abs(float(reduce.norm(jnp.asarray(a))) - norm) <= 4 * eps * norm


@pytest.mark.parametrize("n", LENGTHS)
def test_extremes_and_tests_are_numpys_exactly(n, folding):
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


def test_an_integer_sum_keeps_the_dtype_asked_for(folding):
    counts = jnp.ones((2, 40), jnp.int32)
    total = reduce.total(counts, dtype=jnp.int32)
    assert total.dtype == jnp.int32 and total.tolist() == [40, 40]


def _kernels(function, *args) -> tuple[int, int]:
    text = jax.jit(function).lower(*args).compile().as_text()
    return len(re.findall(r" fusion\(", text)), len(re.findall(r"reduce-window\(", text))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's rewrite")
def test_a_row_reduction_in_the_lanes_shape_is_one_kernel(folding):
    """33 lanes of 64 entries: the plain sum is XLA:CPU's padded reduce-window and a
    reduce (three kernels); folded, one. If this fails, XLA changed how it compiles
    small reductions, and the module's reason to exist needs measuring again."""
    a = jnp.ones((33, 64))
    plain = _kernels(lambda a: jnp.sum(a * a, axis=-1) + 1.0, a)
    ours = _kernels(lambda a: reduce.dot(a, a) + 1.0, a)
    assert plain[1] == 1 and plain[0] == 3
    assert ours == ((1, 0) if folding else plain)


def test_folding_is_on_for_narrow_lanes_on_the_cpu_only():
    cpu = machine.schedule(fixedopt.LBFGS(), None, "cpu")
    assert cpu.folds(33, 64)
    assert not cpu.folds(33, 32)  # nothing to fold
    assert not cpu.folds(1024, 64)  # YNN's: the plain one is faster
    others = ("gpu", "cuda", "rocm", "tpu")
    assert not any(machine.schedule(fixedopt.LBFGS(), None, b).folds(8, 64) for b in others)


def _solve_program(n: int, rows: int, lanes: int | None) -> str:
    def solve(x0, fixed, target):
        fun = lambda x, t: 0.5 * jnp.sum((x - t) ** 2)
        options = {} if lanes is None else {"lanes": lanes}
        return fixedopt.minimize(fun, x0, fixed, args=(target,), batched=True, **options)

    shapes = [jax.ShapeDtypeStruct((rows, n), dtype) for dtype in (float, bool, float)]
    return jax.jit(solve).lower(*shapes).compile().as_text()


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's rewrite")
@pytest.mark.parametrize("lanes", [None, 1 << 30], ids=["default lanes", "whole batch"])
def test_the_lanes_fold_where_it_pays(monkeypatch, lanes):
    """n = 64: the default lanes (W = 32 of 256 rows, 2048 entries) fold, and their
    program keeps a few reduce-windows (the objective's own sum, where it is traced:
    the line search, the refill, the certification); switched off, it held 35 more. The
    whole batch (256 x 64 entries, YNN's) does not fold: the same program either way."""
    folded = _solve_program(64, 256, lanes).count("reduce-window(")
    monkeypatch.setitem(backends.BACKENDS, "cpu", backends.CPU._replace(ynn_entries=0))
    plain = _solve_program(64, 256, lanes).count("reduce-window(")
    if lanes is None:
        assert folded <= 8 and plain >= folded + 30, (folded, plain)
    else:
        assert folded == plain, (folded, plain)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, jnp.bfloat16])
def test_power_of_two_is_frexps_power_exactly(dtype):
    """``power_of_two`` (the exponent's bits, no ``pow``) is NumPy's ``2^e`` of ``frexp``
    where that is a normal float, and to the bit what ``ldexp(1, frexp(x)[1])`` compiles
    to everywhere (subnormals as the machine treats them), from the least subnormal to
    the largest float; 1 at zero, negatives, inf and NaN."""
    info = jnp.finfo(dtype)
    rng = np.random.default_rng(5)
    low, high = np.log2(float(info.smallest_subnormal)), np.log2(float(info.max)) - 1
    sizes = 2.0 ** rng.uniform(low, high, 4000) * rng.uniform(1.0, 1.999, 4000)
    edges = [info.smallest_subnormal, info.tiny, info.max, 0.0, -1.0, np.inf, np.nan]
    values = np.concatenate([sizes, np.asarray(edges, np.float64)])
    x = jnp.asarray(np.clip(values, None, float(info.max)), dtype)
    got = np.asarray(jax.jit(reduce.power_of_two)(x), np.float64)

    def before(x):  # power_of_two as it was
        usable = jnp.isfinite(x) & (x > 0)
        return jnp.where(usable, jnp.ldexp(jnp.ones_like(x), jnp.frexp(x)[1]), 1.0)

    np.testing.assert_array_equal(got, np.asarray(jax.jit(before)(x), np.float64))
    wide = np.asarray(x, np.float64)
    normal = np.isfinite(wide) & (wide >= float(info.tiny)) & (wide < float(info.max) / 2)
    expected = np.ldexp(1.0, np.frexp(wide[normal])[1])
    np.testing.assert_array_equal(got[normal], expected)
