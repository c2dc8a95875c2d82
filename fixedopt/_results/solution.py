"""What a solve returns: ``Solution`` (its ``Status`` and ``Reason`` codes:
``fixedopt._contract.status``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._results.report import Report, report
from fixedopt._results.solution_fields import SolutionFields


class Solution(SolutionFields):
    """The result of :func:`fixedopt.minimize` or :func:`fixedopt.least_squares`.

    A pytree: it works under ``jit`` and ``vmap``. Under ``batched=True`` every field
    has the leading batch axis. It remembers its problem's mask and bounds, so that
    :func:`fixedopt.covariance`, :func:`fixedopt.hessian_covariance` and
    :func:`fixedopt.report` need not be told them again.

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
      fixed: the solve's fixed mask, normalized: a tree like ``x`` of boolean arrays
        of its leaves' shapes (a Python ``bool`` given for a leaf, broadcast).
      bounds: ``None`` (no bounds) or the solve's ``(lower, upper)``, normalized: two
        trees like ``x``, broadcast to its shapes and cast to its dtypes.
      at_bound: the bound-active entries at ``x``, a tree like ``x`` of booleans: free
        entries on a bound that the gradient pushes against (``grad > 0`` at the
        lower bound, ``< 0`` at the upper). The implicit derivative holds them at
        their bound; the covariances and the report flag them. An entry on its bound
        with a zero or inward gradient is not held, and not flagged.
      normal: None, but where :func:`fixedopt.curve_fit` asks its solve for the
        solver's normal matrix ``J^T J`` of the residuals at ``x`` (flat, ``(n, n)``
        per row), from which its covariance is computed without evaluating the
        Jacobian again (the ``solution`` of its ``CurveFit`` has None here).

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> fun = lambda x: jnp.sum((x - jnp.array([-1.0, 0.5, 3.0])) ** 2)
      >>> sol = fixedopt.minimize(fun, jnp.zeros(3), jnp.array([False, False, True]),
      ...                         bounds=(0.0, 2.0))
      >>> print(sol.x)
      [0.  0.5 0. ]
      >>> sol.fixed.tolist(), sol.at_bound.tolist()  # x[0] is held by its lower bound
      ([False, False, True], [True, False, False])
    """

    __slots__ = ()

    def unconverged_as_nan(self) -> Solution:
        """This solution with NaN in the free entries of ``x`` of every row that did
        not converge (``status != CONVERGED``): what ``nan_unconverged=True`` returns.
        Fixed entries keep their values (bit for bit), so that a map of a row's
        parameters shows what was given and leaves out what was not fitted.

        Example:
          >>> import jax.numpy as jnp
          >>> import fixedopt
          >>> fun = lambda x: jnp.sum((x - 2.0) ** 4)
          >>> fixed = jnp.array([[False, True], [True, True]])  # row 1: nothing to fit
          >>> sol = fixedopt.minimize(fun, jnp.zeros((2, 2)), fixed, batched=True,
          ...                         max_steps=2, nan_unconverged=True)
          >>> print(sol.status, sol.x)
          [1 0] [[nan  0.]
           [ 0.  0.]]
        """

        def leaf(x: jax.Array, fixed: jax.Array) -> jax.Array:
            kept = jnp.reshape(
                self.converged, self.converged.shape + (1,) * (x.ndim - self.converged.ndim)
            )
            return jnp.where(kept | fixed, x, jnp.nan)

        return self._replace(x=jax.tree.map(leaf, self.x, self.fixed))

    def summary(self, row: int | None = None, **options: Any) -> Report:
        """This solve at a glance: :func:`fixedopt.report` of it (``row``, ``covariance``
        and ``names`` as there; the fixed and at-bound flags are the solve's own);
        prints as text, renders as a table in a notebook.

        Example:
          >>> import jax.numpy as jnp
          >>> import fixedopt
          >>> sol = fixedopt.minimize(lambda x: jnp.sum((x - 2.0) ** 2), jnp.zeros(2), False)
          >>> "CONVERGED" in str(sol.summary())
          True
        """
        return report(self, row, **options)
