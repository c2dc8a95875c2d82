"""The L-BFGS ring buffer under ``vmap``: slices, not gathers; same values as indexing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._derivatives.ring import read_slot, write_slot

_rng = np.random.default_rng(0)
HISTORY = jnp.asarray(_rng.normal(size=(5, 4, 3)))  # 5 rows, 4 slots, 3 entries
VALUE = jnp.asarray(_rng.normal(size=(5, 3)))


@pytest.mark.parametrize(
    "slot", [jnp.array(2), jnp.array([0, 3, 1, 2, 3])], ids=["shared", "per-row"]
)
def test_read_and_write_agree_with_indexing(slot):
    axis = None if slot.ndim == 0 else 0
    read = jax.vmap(read_slot, in_axes=(0, axis))(HISTORY, slot)
    written = jax.vmap(write_slot, in_axes=(0, axis, 0))(HISTORY, slot, VALUE)
    rows = np.arange(5)
    expected_write = np.asarray(HISTORY).copy()
    expected_write[rows, np.broadcast_to(slot, (5,))] = VALUE
    np.testing.assert_array_equal(read, np.asarray(HISTORY)[rows, np.broadcast_to(slot, (5,))])
    np.testing.assert_array_equal(written, expected_write)


def weighted(x, target):
    return jnp.sum(jnp.arange(1.0, 9.0) * (x - target) ** 2)


def primitives(jaxpr, found, skip=()):
    """The primitives of ``jaxpr`` and its sub-jaxprs, but those of ``skip`` equations."""
    for eqn in jaxpr.eqns:
        found.add(eqn.primitive.name)
        if eqn.primitive.name in skip:
            continue
        for param in eqn.params.values():
            for sub in param if isinstance(param, tuple | list) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    primitives(inner, found, skip)
    return found


def loop_body(jaxpr):
    """The body of the first ``while`` loop in ``jaxpr`` (depth first): the lanes' loop."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while":
            return eqn.params["body_jaxpr"].jaxpr
        for param in eqn.params.values():
            inner = getattr(param, "jaxpr", param)
            if hasattr(inner, "eqns") and (body := loop_body(inner)) is not None:
                return body
    return None


def test_batched_lbfgs_reads_and_writes_its_history_without_gathers():
    def solve(x0, fixed, target):
        return fixedopt.minimize(weighted, x0, fixed, args=(target,), batched=True).x

    x0 = jnp.zeros((16, 8))
    jaxpr = jax.make_jaxpr(solve)(x0, x0 > 0, x0 + 1.0)
    # Each step of the lanes' loop; its refill (a cond) gathers the next rows and
    # scatters the stopped rows' results by design, once per refill, not per step.
    found = primitives(loop_body(jaxpr.jaxpr), set(), skip=("cond",))
    assert "dynamic_update_slice" in found  # the parser reaches the loop body
    assert not found & {"gather", "scatter"}, found & {"gather", "scatter"}
