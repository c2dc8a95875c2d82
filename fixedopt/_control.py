"""The one loop primitive: a ``while_loop``, or a fixed-length ``scan`` to unroll.

``lax.while_loop`` cannot be differentiated in reverse mode. To differentiate a solve
by unrolling its iterations (``differentiate="unroll"``), every loop becomes a
``lax.scan`` over its maximum trip count whose body does nothing once the condition
fails: the same iterates, at the cost of always running to the maximum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp

State = TypeVar("State")  # the loop's carry: any pytree of arrays, the same every trip


def loop(
    condition: Callable[[State], jax.Array | bool],
    body: Callable[[State], State],
    state: State,
    unroll_length: int | None = None,
) -> State:
    """``lax.while_loop(condition, body, state)``, or its unrolled equivalent.

    Args:
      condition: ``state -> bool``, a scalar (``()``) boolean.
      body: ``state -> state``, with the same structure, shapes and dtypes.
      state: the initial state.
      unroll_length: ``None`` for a ``while_loop``; else the static trip count of a
        ``scan`` whose body keeps the state once ``condition`` is False.
    """
    if unroll_length is None:
        return jax.lax.while_loop(condition, body, state)

    def step(state: State, _: None) -> tuple[State, None]:
        going = condition(state)
        new = body(state)
        return jax.tree.map(lambda a, b: jnp.where(going, a, b), new, state), None

    final: State = jax.lax.scan(step, state, None, length=unroll_length)[0]
    return final
