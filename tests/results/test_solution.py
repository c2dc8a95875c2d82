"""A ``Solution`` remembers its problem: the normalized mask and bounds of the solve and
its bound-active entries, as pytree fields that ``jit``, ``vmap`` and pickling carry.

References: the inputs themselves (normalized by hand: a Python ``bool`` broadcast,
scalar bounds broadcast and cast to the dtype of ``x0``), and for ``at_bound`` the
sign of the objective's gradient at ``x``, computed here with ``jax.grad``.
"""

import pickle

import jax
import numpy as np
import pytest

import fixedopt
from tests.helpers import assert_rows_identical, quadratic, quadratic_rows

BOUNDS = (-0.3, np.array([0.3, 0.3, 0.3, np.inf]))  # scalar and per-entry


def solve(x0, fixed, args):
    return fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, bounds=BOUNDS)


def bounded_solve():
    x0, fixed, args = quadratic_rows(size=6, n=4, seed=2)
    return solve(x0, fixed, args), x0, fixed, args


def test_jit_vmap_and_pickle_carry_them():
    sol, x0, fixed, args = bounded_solve()
    assert_rows_identical(jax.jit(solve)(x0, fixed, args), sol)

    def one(x0, fixed, curvature, center):
        return fixedopt.minimize(quadratic, x0, fixed, args=(curvature, center), bounds=BOUNDS)

    mapped = jax.vmap(one)(x0, fixed, *args)
    np.testing.assert_array_equal(mapped.fixed, sol.fixed)
    np.testing.assert_array_equal(mapped.at_bound, sol.at_bound)
    np.testing.assert_array_equal(mapped.bounds[1], sol.bounds[1])
    assert_rows_identical(pickle.loads(pickle.dumps(sol)), sol)


# The tests below read normalized inputs, exact signs at bounds, fields and records:
# nothing a backend optimization changes (conftest.py). After the test above, whose jitted
# and vmapped solves must give the plain call's bits, and whose programs they reuse.
@pytest.mark.fewer_optimizations
def test_the_fields_are_the_normalized_problem_and_its_active_set():
    sol, x0, fixed, args = bounded_solve()
    np.testing.assert_array_equal(sol.fixed, fixed)
    lower, upper = sol.bounds
    assert lower.dtype == upper.dtype == x0.dtype and lower.shape == upper.shape == x0.shape
    np.testing.assert_array_equal(lower, np.full(x0.shape, -0.3))
    np.testing.assert_array_equal(upper, np.tile([0.3, 0.3, 0.3, np.inf], (6, 1)))
    grad = np.asarray(jax.vmap(jax.grad(quadratic))(sol.x, *args))
    x = np.asarray(sol.x)
    pushed = ((x == lower) & (grad > 0)) | ((x == upper) & (grad < 0))
    np.testing.assert_array_equal(sol.at_bound, pushed & ~fixed)
    assert np.asarray(sol.at_bound).any()  # the bounds hold some entries
    bare = fixedopt.minimize(quadratic, x0[0], True, args=tuple(a[0] for a in args))
    assert bare.bounds is None and bare.fixed.dtype == bool and bool(bare.fixed.all())
    assert not np.asarray(bare.at_bound).any()


@pytest.mark.fewer_optimizations
def test_records_and_frames_hold_the_results_only():
    sol = bounded_solve()[0]
    (record, *_) = fixedopt.to_records(sol)
    assert set(record) == {"x", "fun", "success", "status", "message", "nit", "grad_norm",
                           "reason"}  # fmt: skip
