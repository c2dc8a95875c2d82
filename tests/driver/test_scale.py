"""Scale: progress reports, and batches sharded across devices."""

import os
import pathlib
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from tests.helpers import quadratic, quadratic_rows


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


SHARDED = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    jax.config.update("jax_enable_x64", True)
    import fixedopt
    from tests.helpers import quadratic, quadratic_rows

    assert len(jax.devices()) == 4
    x0, fixed, args = quadratic_rows(size=64)
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    rows = NamedSharding(mesh, P("batch"))
    put = lambda a: jax.device_put(a, rows)

    @jax.jit
    def solve(x0, fixed, curvature, center):
        return fixedopt.minimize(quadratic, x0, fixed, args=(curvature, center), batched=True)

    sharded = solve(put(x0), put(fixed), *map(put, args))
    reference = fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True)
    np.testing.assert_allclose(sharded.x, reference.x, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(sharded.steps, reference.steps)
    assert len(sharded.x.sharding.device_set) == 4, sharded.x.sharding
    assert sharded.x.sharding.is_equivalent_to(rows, 2), sharded.x.sharding

    # Per-device solves with shard_map: each device runs its own rows through its lanes.
    per_device = jax.jit(jax.shard_map(
        lambda x0, fixed, curvature, center: fixedopt.minimize(
            quadratic, x0, fixed, args=(curvature, center), batched=True, lanes=4),
        mesh=mesh, in_specs=P("batch"), out_specs=P("batch"), check_vma=False))
    mapped = per_device(put(x0), put(fixed), *map(put, args))
    np.testing.assert_allclose(mapped.x, reference.x, rtol=1e-10, atol=1e-10)
    assert len(mapped.x.sharding.device_set) == 4
    print("sharded ok")
    """
)


def test_sharded_batch_on_four_devices():
    root = pathlib.Path(__file__).resolve().parents[2]
    environment = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    environment["PYTHONPATH"] = str(root)
    result = subprocess.run(
        [sys.executable, "-c", SHARDED], env=environment, cwd=root, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "sharded ok" in result.stdout


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
