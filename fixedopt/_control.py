"""The one loop primitive: a ``while_loop``, or a fixed-length ``scan`` to unroll.

``lax.while_loop`` cannot be differentiated in reverse mode. To differentiate a solve
by unrolling its iterations (``differentiate="unroll"``), every loop becomes a
``lax.scan`` over its maximum trip count whose body does nothing once the condition
fails: the same iterates, at the cost of always running to the maximum.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def loop(condition, body, state, unroll_length: int | None = None):
    """``lax.while_loop(condition, body, state)``, or its unrolled equivalent.

    Args:
      condition: ``state -> bool``.
      body: ``state -> state``.
      state: the initial state.
      unroll_length: ``None`` for a ``while_loop``; else the static trip count of a
        ``scan`` whose body keeps the state once ``condition`` is False.
    """
    if unroll_length is None:
        return jax.lax.while_loop(condition, body, state)

    def step(state, _):
        going = condition(state)
        new = body(state)
        return jax.tree.map(lambda a, b: jnp.where(going, a, b), new, state), None

    return jax.lax.scan(step, state, None, length=unroll_length)[0]
