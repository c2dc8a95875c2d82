"""Reverse mode through the implicit rule's conjugate gradients (free blocks of more
than ``DENSE_UP_TO`` entries), a NaN row among the rows: against the closed form of a
quadratic's solution (NumPy's dense solve). jax.scipy.sparse.linalg.cg there could
not be transposed (``NotImplementedError``, every row)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import fixedopt
from fixedopt._derivatives.implicit import DENSE_UP_TO

# A closed form to 1e-8, a NaN row's status and exact zeros (a select): nothing a backend
# optimization changes (conftest.py).
pytestmark = pytest.mark.fewer_optimizations

N = DENSE_UP_TO + 4
ROWS = 2


def smoothed(x, c):
    """``0.5 |x - c|^2 + 0.25 |diff x|^2``: Hessian ``A = I + 0.5 D^T D``."""
    return 0.5 * jnp.sum((x - c) ** 2) + 0.25 * jnp.sum(jnp.diff(x) ** 2)


def test_gradient_through_conjugate_gradients_with_a_nan_row():
    rng = np.random.default_rng(0)
    c = rng.normal(size=(ROWS, N))
    c[1, 5] = np.nan  # row 1 stops NONFINITE: its derivative is 0
    fixed = np.zeros((ROWS, N), bool)
    fixed[:, 0] = fixed[0, 7] = True
    weights = rng.normal(size=(ROWS, N))

    def loss(c):
        sol = fixedopt.minimize(smoothed, jnp.zeros((ROWS, N)), fixed, args=(c,),
                                batched=True)  # fmt: skip
        finite = jnp.where(jnp.arange(ROWS)[:, None] == 1, 0.0, sol.x)
        return jnp.sum(weights * finite), sol.status

    gradient, status = jax.grad(loss, has_aux=True)(jnp.asarray(c))
    assert list(np.asarray(status)) == [0, fixedopt.Status.NONFINITE]
    difference = np.diff(np.eye(N), axis=0)
    hessian = np.eye(N) + 0.5 * difference.T @ difference
    for row in (0,):
        free = ~fixed[row]
        expected = np.zeros(N)  # dx_F/dc_F = A_FF^-1 (symmetric); fixed entries: 0
        expected[free] = np.linalg.solve(hessian[np.ix_(free, free)], weights[row][free])
        assert_allclose(gradient[row], expected, rtol=1e-8, atol=1e-12)
    assert np.all(np.asarray(gradient[1]) == 0.0)
