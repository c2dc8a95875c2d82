"""The solver contract as a user meets it: a solver of one's own, run by the driver.

The driver, not the solver, owns the failure policy: a row moves only to a point its
solver ``accepted``; a ``failed`` step stops the row with a status saying why, at its
last accepted iterate; fixed entries stay bit-identical; other rows never notice.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from tests.helpers import assert_rows_identical, bits


@dataclasses.dataclass(frozen=True)
class Reckless(fixedopt.Solver[None]):
    """A fixed gradient step, proposed however bad it is: NaN entries included."""

    learning_rate: float = 0.4

    def init(self, problem, x, value, grad):
        return None

    def step(self, problem, x, value, grad, state, context):
        x_new = problem.project(x - self.learning_rate * grad)
        value_new, grad_new = problem.value_and_grad(x_new)
        finite = jnp.isfinite(value_new) & jnp.all(jnp.isfinite(grad_new))
        no_model = jnp.asarray(jnp.inf, x.dtype)
        return fixedopt.Step(
            jnp.where(finite, x_new, jnp.nan),  # a failed proposal is garbage
            value_new, grad_new, state, accepted=finite, failed=~finite, nonfinite=~finite,
            flat=jnp.zeros((), bool), predicted=no_model, relative_step=no_model,
        )  # fmt: skip


def walled(x, target, wall):
    """A quadratic that is NaN beyond ``x[0] > wall``."""
    return jnp.where(x[0] > wall, jnp.nan, jnp.sum((x - target) ** 2))


def solve(x0, fixed, target, wall):
    return fixedopt.minimize(
        walled, x0, fixed, args=(target, wall), batched=True, solver=Reckless(), max_steps=200
    )


def test_a_failed_proposal_stops_its_row_at_its_last_accepted_iterate():
    rng = np.random.default_rng(0)
    x0, target = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    fixed = rng.random((6, 4)) < 0.3
    fixed[:, 0] = False
    wall = np.full(6, np.inf)
    target[2, 0], x0[2, 0], wall[2] = 5.0, 0.0, 0.5  # row 2 walks into the NaN wall
    solution = solve(x0, fixed, target, wall)
    status, x = np.asarray(solution.status), np.asarray(solution.x)
    assert status[2] == fixedopt.Status.NONFINITE
    assert np.all(np.isfinite(x[2])) and x[2, 0] <= 0.5 and np.isfinite(solution.value[2])
    good = np.array([0, 1, 3, 4, 5])
    assert np.all(status[good] == fixedopt.Status.CONVERGED)
    alone = solve(x0[good], fixed[good], target[good], wall[good])
    assert_rows_identical(solution, alone, good)
    np.testing.assert_array_equal(bits(x)[fixed], bits(x0)[fixed])


def test_split_and_mask_give_the_same_derivatives_with_active_bounds():
    """``finish`` reuses the loop's last gradient, scattered back from the packed
    variables under ``strategy="split"``: the active set, hence ``dx/dbound`` and
    ``dx/dtarget``, must be the same as under ``strategy="mask"``."""
    rng = np.random.default_rng(1)
    fixed = jnp.asarray(rng.random((3, 5)) < 0.3)
    x0 = jnp.zeros((3, 5))
    target = jnp.asarray(rng.uniform(-2.0, 2.0, (3, 5)))  # some beyond the upper bound 1

    def x_of(target, upper, strategy):
        fun = lambda x, t: jnp.sum((x - t) ** 2) + 0.1 * jnp.sum(x[1:] * x[:-1])
        return fixedopt.minimize(
            fun, x0, fixed, args=(target,), batched=True, bounds=(-1.5, upper),
            strategy=strategy,
        ).x  # fmt: skip

    upper = jnp.asarray(1.0)
    for argnum in (0, 1):
        mask, split = (
            jax.jacfwd(x_of, argnums=argnum)(target, upper, strategy)
            for strategy in ("mask", "split")
        )
        np.testing.assert_allclose(split, mask, atol=1e-7)
    assert np.any(np.asarray(jax.jacfwd(x_of, argnums=1)(target, upper, "mask")) != 0)
