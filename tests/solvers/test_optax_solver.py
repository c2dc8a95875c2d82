"""fixedopt.Optax: equal optimizers make equal solvers, so a new ``Optax`` object built
like the last one reuses its compiled solve (counted with ``compiled_solves``)."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fixedopt
from fixedopt.testing import compiled_solves

SCHEDULE = lambda: optax.exponential_decay(0.1, 10, 0.5)

EQUAL = {  # each builds the same optimizer twice
    "adam": lambda: optax.adam(0.1),
    "adamw_schedule": lambda: optax.adamw(SCHEDULE(), weight_decay=0.3),
    "chain": lambda: optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1, momentum=0.9)),
    "lbfgs": lambda: optax.lbfgs(),
    "array_rate": lambda: optax.adam(jnp.asarray(0.1)),
}

UNEQUAL = {  # pairs that must not share a compiled program
    "rate": (lambda: optax.adam(0.1), lambda: optax.adam(0.2)),
    "constructor": (lambda: optax.adam(0.1), lambda: optax.adamw(0.1)),
    "schedule": (
        lambda: optax.adam(optax.exponential_decay(0.1, 10, 0.5)),
        lambda: optax.adam(optax.exponential_decay(0.1, 10, 0.4)),
    ),
    "int_or_float": (lambda: optax.sgd(1), lambda: optax.sgd(1.0)),
    "signed_zero": (lambda: optax.sgd(0.1, momentum=0.0), lambda: optax.sgd(0.1, momentum=-0.0)),
    "array_or_float": (lambda: optax.adam(jnp.asarray(0.1)), lambda: optax.adam(0.1)),
    "array_dtype": (
        lambda: optax.adam(jnp.asarray(0.1, jnp.float32)),
        lambda: optax.adam(jnp.asarray(0.1, jnp.float64)),
    ),
    "momentum": (lambda: optax.sgd(0.1, momentum=0.9), lambda: optax.sgd(0.1, momentum=0.8)),
}


@pytest.mark.parametrize("name", list(EQUAL))
def test_optax_solvers_built_alike_are_equal_and_hash_equal(name):
    first, second = fixedopt.Optax(EQUAL[name]()), fixedopt.Optax(EQUAL[name]())
    assert first.optimizer is not second.optimizer
    assert first == second and hash(first) == hash(second)


@pytest.mark.parametrize("name", list(UNEQUAL))
def test_optax_solvers_built_differently_are_unequal(name):
    make_first, make_second = UNEQUAL[name]
    assert fixedopt.Optax(make_first()) != fixedopt.Optax(make_second())


def test_a_captured_value_without_value_equality_compares_by_identity():
    """An object in an optimizer's closure that cannot be compared by value is compared
    by identity: the same object, equal; another one like it, not."""

    class Rate:  # no __eq__ of its own, and unhashable
        __hash__ = None

        def __call__(self, count):
            return 0.1

    rate = Rate()
    solver = fixedopt.Optax(optax.sgd(rate))
    assert solver == fixedopt.Optax(solver.optimizer)
    assert solver == fixedopt.Optax(optax.sgd(rate))
    assert solver != fixedopt.Optax(optax.sgd(Rate()))


def test_a_new_optax_object_built_alike_does_not_recompile():
    """Three solves, each with a new ``Optax(optax.adam(0.1))``: one program; a new
    learning rate: one more."""
    fun = lambda x, target: jnp.sum((x - target) ** 2)
    x0, fixed, target = jnp.zeros((4, 3)), jnp.eye(4, 3, dtype=bool), jnp.full((4, 3), 2.0)

    def solve(rate):
        solver = fixedopt.Optax(optax.adam(rate))
        return fixedopt.minimize(fun, x0, fixed, args=(target,), batched=True, solver=solver,
                                 max_steps=200)  # fmt: skip

    before = compiled_solves()
    solutions = [solve(0.1) for _ in range(3)]
    assert compiled_solves() - before == 1
    for solution in solutions[1:]:
        np.testing.assert_array_equal(solution.x, solutions[0].x)
    other = solve(0.2)
    assert compiled_solves() - before == 2
    np.testing.assert_array_equal(other.x[np.asarray(fixed)], 0.0)
    assert not np.array_equal(other.x, solutions[0].x)
