"""Certification in the lanes: the rows a step leaves CONVERGED wait, PENDING, until a
few of them are checked together (:func:`certify_some`), so that a trip's check costs a
fraction of its step (:mod:`fixedopt._driver.lanes`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Solver
from fixedopt._contract.status import PENDING, RUNNING, Status
from fixedopt._driver.loop import LoopState, Stopping, certify, checks, to_certify
from fixedopt._driver.packing import Packed, Packing
from fixedopt._numerics import reduce

Rows = TypeVar("Rows")  # a batch's per-row data (a pytree with a leading batch axis)


def certify_slots(width: int) -> int:
    """How many PENDING lanes a trip certifies at most (static): an eighth of the
    lanes, so that a trip's certification costs a fraction of its step (L-BFGS's
    takes up to ``n`` Hessian-vector products per row); the others wait."""
    return max(1, min(width, -(-width // 8)))


def certify_some(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    stopping: Stopping,
    states: Packing,
    data: Any,
    packed: Packed,
) -> Packed:
    """Certify the verdicts of the first :func:`certify_slots` PENDING lanes (in lane
    order; ``packed``: the lanes' loop states, packed by ``states``), in a ``lax.cond``
    that runs when as many lanes wait as it has slots, or when a lane waits and none
    runs: the lanes are gathered, certified by ``fixedopt._driver.loop.certify`` and
    written back. A row's arithmetic does not depend on
    when its turn comes: a waiting lane takes no step.

    The cond costs all its slots whatever number of lanes waits. Run whenever one
    waited, it ran on nearly every trip where rows stop a few at a time (quad n = 16,
    B = 1024: about 5 a trip of 128 lanes, 16 slots), and the certified solve took 2.1x
    the uncertified one's time; waiting for full slots, 1.3x (``docs/decisions.md``,
    "Certifying L-BFGS's CONVERGED verdicts")."""
    status = states.unpack(packed).status
    waiting = status == PENDING
    width = waiting.shape[0]
    if width == 0:  # an empty batch
        return packed
    slots = certify_slots(width)

    def check(packed: Packed) -> Packed:
        index = first_true(waiting, slots)
        inside = jnp.minimum(index, width - 1)
        rows = jax.tree.map(lambda a: a[inside], data)
        chosen: LoopState = states.unpack(states.take(packed, inside))
        chosen = chosen._replace(status=jnp.full_like(chosen.status, Status.CONVERGED))

        def one(row: Any, state: LoopState) -> LoopState:
            return certify(solver, problem_of(row), state, stopping)

        checked = states.pack(jax.vmap(one)(rows, chosen))
        return states.put(packed, index, checked)

    certified: Packed = jax.lax.cond(certify_due(status, slots), check, lambda p: p, packed)
    return certified


def waiting(solver: Solver[Any], state: LoopState) -> LoopState:
    """``state``, PENDING where its verdict is to be checked (``to_certify``)."""
    if not checks(solver):
        return state
    return state._replace(status=jnp.where(to_certify(solver, state), PENDING, state.status))


def certify_due(status: jax.Array, slots: int) -> jax.Array:
    """Whether the lanes of ``status`` (``(W,)``) certify this trip: as many wait
    (PENDING) as the check has ``slots``, or one waits and none runs (so no row waits
    forever: running rows stop by ``max_steps`` at the latest)."""
    waits = reduce.total(status == PENDING, dtype=jnp.int32)
    return (waits >= slots) | ((waits > 0) & ~reduce.any_true(status == RUNNING))


def first_true(mask: jax.Array, count: int) -> jax.Array:
    """The indices of the first ``count`` True entries of the ``(W,)`` ``mask``, in
    order, padded with ``W``: ``jnp.nonzero(mask, size=count, fill_value=W)[0]`` as
    one scatter of the ranks (nonzero's general n-d lowering: 245 more lines of
    compiled program, of 10k, for L-BFGS on quad n = 8)."""
    width = mask.shape[0]
    rank = jnp.cumsum(mask, dtype=jnp.int32) - 1
    target = jnp.where(mask & (rank < count), rank, count)  # out of range: dropped
    lanes = jnp.arange(width, dtype=jnp.int32)
    return jnp.full((count,), width, jnp.int32).at[target].set(lanes, mode="drop")
