"""What a solve returns: ``Solution`` and the named ``Status`` codes."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import jax


class Status(enum.IntEnum):
    """Why a row stopped. Stored as ``int32`` in :attr:`Solution.status`.

    Compare with ``solution.status == fixedopt.Status.CONVERGED``; turn a code back
    into its name with ``fixedopt.Status(int(code)).name``.
    """

    CONVERGED = 0
    """The projected gradient's max-norm over free entries fell to ``gtol``."""
    MAX_STEPS = 1
    """``max_steps`` iterations ran without convergence."""
    NONFINITE = 2
    """The objective or its gradient turned NaN/Inf; the last finite iterate is kept."""
    LINESEARCH_FAILED = 3
    """No acceptable step was found (line search, or trust-region damping overflow)."""
    STALLED = 4
    """The relative decrease of the objective fell below ``ftol``."""


RUNNING = -1  # internal: the loop goes on while a row's status is RUNNING


class Solution(NamedTuple):
    """The result of :func:`fixedopt.minimize` or :func:`fixedopt.least_squares`.

    A pytree: it works under ``jit`` and ``vmap``. Under ``batched=True`` every field
    has the leading batch axis.

    Attributes:
      x: the solution, with the structure, shapes and dtypes of ``x0``; fixed entries
        bit-identical to their fixed values.
      value: the objective at ``x`` (``0.5 * sum(residuals**2)`` for least squares).
      grad_norm: max over free entries of ``|x - clip(x - grad, lower, upper)|``, the
        projected gradient (``|grad|`` without bounds).
      steps: the iterations taken by this row.
      converged: ``status == Status.CONVERGED``.
      status: an ``int32`` :class:`Status` code.
    """

    x: Any
    value: jax.Array
    grad_norm: jax.Array
    steps: jax.Array
    converged: jax.Array
    status: jax.Array
