"""Compaction of still-running rows: the same per-row results and step counts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._loop import compaction_sizes


def quadratic(x, curvature, center):
    return 0.5 * jnp.sum(curvature * (x - center) ** 2) + 0.5 * jnp.sum(jnp.diff(x) ** 2)


def batch_with_stragglers(batch=200, n=16, seed=1):
    rng = np.random.default_rng(seed)
    curvature = rng.uniform(1.0, 100.0, (batch, n))
    curvature[:3] *= 1e3  # three badly conditioned rows need many more steps
    x0 = jnp.zeros((batch, n))
    fixed = jnp.asarray(rng.random((batch, n)) < 0.3)
    args = (jnp.asarray(curvature), jnp.asarray(rng.normal(size=(batch, n))))
    return x0, fixed, args


def test_compaction_sizes_shrink_by_eight_down_to_eight_rows():
    assert compaction_sizes(1024) == (128, 16)
    assert compaction_sizes(200) == (25,)
    assert compaction_sizes(60) == ()


@pytest.mark.parametrize("solver", [fixedopt.LBFGS(), fixedopt.GradientDescent()], ids=repr)
def test_compacted_and_plain_runs_agree_row_by_row(solver):
    x0, fixed, args = batch_with_stragglers()
    plain = fixedopt.minimize(
        quadratic, x0, fixed, args=args, batched=True, solver=solver, compact=False
    )
    compacted = fixedopt.minimize(
        quadratic, x0, fixed, args=args, batched=True, solver=solver, compact=True
    )
    assert int(jnp.max(plain.steps)) > float(jnp.median(plain.steps)) + 10  # stragglers
    np.testing.assert_array_equal(compacted.steps, plain.steps)
    np.testing.assert_array_equal(compacted.status, plain.status)
    np.testing.assert_allclose(compacted.x, plain.x, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(compacted.x)[np.asarray(fixed)], 0.0)


def test_compaction_matches_solving_each_row_alone():
    x0, fixed, args = batch_with_stragglers(batch=64)
    compacted = fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True)
    for row in [0, 1, 2, 40]:
        alone = fixedopt.minimize(quadratic, x0[row], fixed[row], args=tuple(a[row] for a in args))
        assert int(alone.steps) == int(compacted.steps[row])
        np.testing.assert_allclose(alone.x, compacted.x[row], rtol=1e-10, atol=1e-12)


def while_loops(batch: int, **options) -> int:
    """The ``while`` loops in the program of a batched solve (traced, not compiled)."""
    x0, fixed = jnp.zeros((batch, 4)), jnp.zeros((batch, 4), bool)
    center = jnp.ones((batch, 4))

    def solve(x0):
        return fixedopt.minimize(quadratic, x0, fixed, args=(1.0, center), batched=True,
                                 **options).x  # fmt: skip

    return str(jax.make_jaxpr(solve)(x0)).count("while[")


def test_compaction_is_the_default_from_4096_rows_and_off_below():
    """``compact=None`` compacts from ``COMPACT_FROM`` rows (one more batch-wide loop
    per smaller batch), never below it; ``compact=False`` keeps the plain loop."""
    from fixedopt._options import COMPACT_FROM

    plain = while_loops(COMPACT_FROM, compact=False)
    assert while_loops(COMPACT_FROM) > plain  # default: compacted
    assert while_loops(COMPACT_FROM, compact=True) == while_loops(COMPACT_FROM)
    assert while_loops(COMPACT_FROM - 1) == while_loops(COMPACT_FROM - 1, compact=False)
