"""Scale: progress reports and long rows (batches sharded across devices:
tests/entry/test_distributed.py)."""

import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from tests.helpers import quadratic, quadratic_rows


# The reports' text and the rows' count, which no backend optimization changes: compiled
# without XLA's expensive passes (conftest.py).
@pytest.mark.fewer_optimizations
def test_progress_reports_rows_stopped(capfd):
    x0, fixed, args = quadratic_rows(size=40)
    fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, progress=5)
    lines = capfd.readouterr().out.strip().splitlines()
    assert lines[0].startswith("fixedopt: step 5: ")
    assert "/40 rows stopped, max |projected grad| of running rows" in lines[0]
    assert lines[-1] == "fixedopt: all 40 rows stopped"


def test_progress_off_adds_no_callback():
    x0, fixed, args = quadratic_rows(size=6)  # not 8 = n: the batch size would be ambiguous
    text = lambda **options: str(
        jax_make_jaxpr(
            lambda x0: fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, **options).x
        )(x0)
    )
    assert "callback" not in text() and "callback" in text(progress=True)


def jax_make_jaxpr(function):
    import jax

    return jax.make_jaxpr(function)


def test_bad_scale_options():
    x0, fixed, args = quadratic_rows(size=8)
    with pytest.raises(ValueError, match="`lanes` must be None or an int >= 1"):
        fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, lanes=0)
    with pytest.raises(ValueError, match='`progress` must be a bool, an int >= 1 or "bar"'):
        fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, progress=-1)


# A batch sharded over devices (jit over row-sharded inputs, and shard_map: each device
# its own rows through its own lanes), equal to one device's solve and sharded alike:
# tests/entry/test_distributed.py, over 4 devices of 2 processes (2 each).


def test_long_rows_agree_with_single_rows():
    """n = 256: the batched recursion gives each row what it gets alone."""
    x0, fixed, args = quadratic_rows(size=20, n=256)
    batched = fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True)
    assert bool(jnp.all(batched.converged))
    for row in (0, 17, 19):
        alone = fixedopt.minimize(quadratic, x0[row], fixed[row], args=tuple(a[row] for a in args))
        assert int(alone.steps) == int(batched.steps[row])
        # Both stop at |projected grad| <= 1e-6 with curvatures >= 1, so both lie within
        # 1e-6 of the optimum; different (vectorized vs. single-row) rounding along the
        # way shows at ~1e-9 here.
        np.testing.assert_allclose(alone.x, batched.x[row], atol=1e-7)
