"""What a solve returns: ``Solution`` (its ``Status`` and ``Reason`` codes: ``_status``)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from fixedopt._report import Report, report
from fixedopt._validate import PyTree


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
        return report(self, row, **options)
