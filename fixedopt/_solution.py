"""What a solve returns: ``Solution``, the named ``Status`` codes and ``Reason``."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, NamedTuple

import jax

from fixedopt._validate import PyTree

if TYPE_CHECKING:  # a cycle at run time: the report builds on Solution
    from fixedopt._report import Report


class Status(enum.IntEnum):
    """Why a row stopped: a verdict to filter on. Stored as ``int32`` in
    :attr:`Solution.status`.

    Compare with ``solution.status == fixedopt.Status.CONVERGED``; turn a code back
    into its name with ``fixedopt.Status(int(code)).name``. The README has the table of
    what each status means and what to do about it.
    """

    CONVERGED = 0
    """A convergence test was met; :attr:`Solution.reason` says which."""
    MAX_STEPS = 1
    """``max_steps`` iterations ran without meeting a test: raise ``max_steps``."""
    NONFINITE = 2
    """The objective or its gradient turned NaN/Inf and no finite step was found; the
    last finite iterate is kept."""
    LINESEARCH_FAILED = 3
    """No acceptable step within the line search's (or the damping's) budget while the
    objective still changed measurably and the row was not stationary: typically a
    wrong or noisy gradient or a non-smooth objective."""
    STALLED = 4
    """No further progress is possible at working precision (the step no longer
    changes ``x`` or ``f``), but the row is not stationary to that precision: an
    ill-conditioned or badly scaled problem for the dtype; try float64 or rescale."""
    INFEASIBLE = 5
    """The row's bounds are empty or NaN on a free entry (``lower > upper``); the
    starting point is returned unchanged."""


class Reason(enum.IntEnum):
    """Which test a row met. Stored as ``int32`` in :attr:`Solution.reason`.

    Tolerances are relative (scale-invariant) and default to ``sqrt(eps)`` of the
    dtype; fixed and bound-active entries are excluded from every test.
    """

    NONE = 0
    """Not converged."""
    GTOL = 1
    """The gradient test: for least-squares solvers, the largest cosine between the
    residual and a free Jacobian column (MINPACK); otherwise ``|g| sqrt(gamma/(2|f|))``
    with the last step's curvature scale ``gamma = s.y / y.y``: its square is the
    relative reduction a secant model predicts, an estimate of ``(f - f*) / |f|``."""
    FTOL = 2
    """Both the actual and the predicted relative reduction of the objective fell to
    ``ftol`` (MINPACK's test)."""
    XTOL = 3
    """The model's step, relative to ``x`` (scaled norms for least squares), fell to
    ``xtol``."""
    ABS_GTOL = 4
    """The absolute test: the max-norm of the projected gradient fell to ``abs_gtol``."""
    PRECISION = 5
    """No further progress is possible at working precision and the row is stationary
    to that precision: a test holds with tolerance ``sqrt(eps)``."""


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
      reason: an ``int32`` :class:`Reason` code: the test that was met.
    """

    x: PyTree
    value: jax.Array
    grad_norm: jax.Array
    steps: jax.Array
    converged: jax.Array
    status: jax.Array
    reason: jax.Array

    def summary(self, row: int | None = None, **options: Any) -> Report:
        """This solve at a glance: :func:`fixedopt.report` of it (``row``, ``covariance``,
        ``fixed``, ``bounds`` and ``names`` as there); prints as text, renders as a
        table in a notebook.

        Example:
          >>> import jax.numpy as jnp
          >>> import fixedopt
          >>> sol = fixedopt.minimize(lambda x: jnp.sum((x - 2.0) ** 2), jnp.zeros(2), False)
          >>> "CONVERGED" in str(sol.summary())
          True
        """
        from fixedopt._report import report  # the report builds on Solution

        return report(self, row, **options)
