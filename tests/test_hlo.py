"""The compiled batched solve never copies a shared constant once per row."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fixedopt

BATCH, N = 16, 24
_rng = np.random.default_rng(0)
_factor = _rng.normal(size=(N, N))
SHARED_MATRIX = jnp.asarray(_factor @ _factor.T / N + np.eye(N))  # one SPD matrix


def dense_quadratic(x, target):
    return 0.5 * x @ SHARED_MATRIX @ x - target @ x


# Least squares is left out on purpose: Gauss-Newton and Levenberg-Marquardt form a
# per-row n x n normal matrix J^T J by design.
@pytest.mark.parametrize(
    "solver",
    [fixedopt.LBFGS(), fixedopt.GradientDescent(), fixedopt.Optax(optax.adam(0.1))],
    ids=lambda solver: type(solver).__name__,
)
def test_no_per_row_copy_of_a_shared_matrix(solver):
    x0 = jnp.zeros((BATCH, N))
    fixed = jnp.asarray(_rng.random((BATCH, N)) < 0.3)
    target = jnp.asarray(_rng.normal(size=(BATCH, N)))

    def batched_solve(x0, fixed, target):
        return fixedopt.minimize(
            dense_quadratic, x0, fixed, args=(target,), batched=True, solver=solver
        ).x

    hlo = jax.jit(batched_solve).lower(x0, fixed, target).compile().as_text()
    per_row_copies = re.findall(rf"\[{BATCH},{N},{N}\]", hlo)
    assert per_row_copies == [], f"found {len(per_row_copies)} arrays of shape (B, n, n)"
    # The matrix itself is in the program, once, as an (n, n) array.
    assert re.search(rf"\[{N},{N}\]", hlo)
