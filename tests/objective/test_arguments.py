"""Which ``args`` are per row: a None among them shifts nothing."""

import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt


@pytest.mark.parametrize("args_axes", [None, (0, None, 0)])
def test_a_none_in_args_leaves_the_per_row_args_after_it_per_row(args_axes):
    # The per-row target after a None was read as shared (its axes one place off):
    # every row then fitted row 0's target, without a word.
    target = jnp.arange(3.0)[:, None]
    solution = fixedopt.least_squares(
        lambda p, scale, nothing, target: scale * (p - target), jnp.zeros((3, 1)), False,
        args=(jnp.ones(3), None, target), batched=True, args_axes=args_axes,
    )  # fmt: skip
    np.testing.assert_allclose(solution.x[:, 0], [0.0, 1.0, 2.0], atol=1e-12)
