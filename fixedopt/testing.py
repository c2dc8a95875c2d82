"""Test hooks: what a test of code built on fixedopt may observe.

A public module of its own (like ``numpy.testing``), so that tests and benchmarks
never reach into fixedopt's private modules.
"""

from __future__ import annotations

from fixedopt._engine import run as _compiled_solve


def compiled_solves() -> int:
    """The number of programs compiled so far for ``minimize`` and ``least_squares``.

    One program per objective, solver configuration, static option and set of shapes;
    a new mask, new fixed values, new bounds or new tolerances reuse it. Compare the
    count before and after a call to prove that the call compiled nothing.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> from fixedopt.testing import compiled_solves
      >>> def fun(x):
      ...     return jnp.sum((x - 1.0) ** 2)
      >>> x0 = jnp.zeros((4, 3))
      >>> _ = fixedopt.minimize(fun, x0, x0 > 0, batched=True)
      >>> before = compiled_solves()
      >>> _ = fixedopt.minimize(fun, x0, jnp.eye(4, 3, dtype=bool), batched=True)
      >>> compiled_solves() - before  # a new mask: nothing compiled
      0
    """
    # ``_cache_size`` is jit's own count of compiled programs: private, so the stubs
    # of ``jax.jit``'s result (``JitWrapped``) do not list it.
    size: int = _compiled_solve._cache_size()  # type: ignore[attr-defined]
    return size
