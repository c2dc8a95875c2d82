"""A row's covariance is a function of that row alone: bit-identical alone, in a batch
of others and shuffled, in float32 and float64, whether its row takes the elementwise
inverse (certified) or LAPACK's (rank-deficient rows), and equal to scipy's formula."""

import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt

_T = np.linspace(0.0, 1.0, 40)
_ROWS = 300  # two chunks of 256: a row alone runs in a chunk of 8


def _residual(p, y):
    return p[0] * jnp.exp(-p[1] * jnp.asarray(_T, p.dtype)) + p[2] + p[3] * _T - y


def _rows(dtype):
    rng = np.random.default_rng(5)
    x = rng.uniform(0.5, 2.0, (_ROWS, 4))
    y = x[:, :1] * np.exp(-x[:, 1:2] * _T) + x[:, 2:3] + x[:, 3:4] * _T
    y = y + 0.01 * rng.normal(size=y.shape)
    fixed = rng.random((_ROWS, 4)) < 0.2
    # every 50th row rank-deficient: rate 0 makes the exponential's amplitude and the
    # offset collinear (LAPACK's SVD then its pseudo-inverse)
    x[::50, 1], fixed[::50, 1] = 0.0, True
    fixed[::50, [0, 2, 3]] = False
    return jnp.asarray(x, dtype), jnp.asarray(fixed), jnp.asarray(y, dtype)


def _covariance(x, fixed, y, rows):
    rows = np.asarray(rows)
    found = fixedopt.covariance(x[rows], _residual, fixed[rows], args=(y[rows],), batched=True)
    return np.asarray(found.covariance)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["float32", "float64"])
def test_a_rows_covariance_is_the_same_alone_in_a_batch_and_shuffled(dtype):
    x, fixed, y = _rows(dtype)
    whole = _covariance(x, fixed, y, np.arange(_ROWS))
    order = np.random.default_rng(0).permutation(_ROWS)
    shuffled = _covariance(x, fixed, y, order)
    np.testing.assert_array_equal(shuffled[np.argsort(order)], whole)
    for row in (0, 1, 50, 77):  # 0 and 50: rank-deficient
        np.testing.assert_array_equal(_covariance(x, fixed, y, [row])[0], whole[row])
        np.testing.assert_array_equal(_covariance(x, fixed, y, [row, 50, 3])[0], whole[row])
    assert np.all(np.isinf(whole[::50][:, [0, 2], [0, 2]]))  # undetermined: inf
    assert np.all(np.isfinite(whole[1]))


def test_each_row_is_scipys_pseudo_inverse_formula():
    """``s^2 (J_F^T J_F)^+`` with scipy's SVD cut-off, from the analytic Jacobian, on
    certified and rank-deficient rows (whose undetermined parameters are inf)."""
    x, fixed, y = (np.asarray(a) for a in _rows(jnp.float64))
    found = _covariance(*_rows(jnp.float64), np.arange(_ROWS))
    for b in (1, 2, 77, 50):
        p, free = x[b], ~fixed[b]
        e = np.exp(-p[1] * _T)
        jacobian = np.stack([e, -p[0] * _T * e, np.ones_like(_T), _T], axis=1)[:, free]
        r = p[0] * e + p[2] + p[3] * _T - y[b]
        _, s, vt = np.linalg.svd(jacobian, full_matrices=False)
        kept = s > np.finfo(float).eps * max(jacobian.shape) * s[0]
        pseudo = (vt[kept].T / s[kept] ** 2) @ vt[kept]
        expected = r @ r / (_T.size - free.sum()) * pseudo
        block = found[b][np.ix_(free, free)]
        if kept.all():
            np.testing.assert_allclose(block, expected, rtol=1e-9)
        else:  # the exponential's amplitude and the offset: undetermined
            assert np.all(np.isinf(block[[0, 1]][:, [0, 1]]))
            np.testing.assert_allclose(block[2, 2], expected[2, 2], rtol=1e-9)
