"""Test hooks: what a test of code built on fixedopt may observe.

A public module of its own (like ``numpy.testing``), so that tests and benchmarks
never reach into fixedopt's private modules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fixedopt._driver import ahead as _ahead
from fixedopt._driver import engine as _engine
from fixedopt._numerics import backends as _backends


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
    return _engine.compiled_programs()


def wait_for_compiles_ahead() -> None:
    """Wait until every program fixedopt compiles ahead in its own thread is compiled.

    On the CPU, the first call of a batch of more than 8 rows also starts compiling,
    in a thread, the program that solves a block's slow last rows again (its tail);
    the call may return before that compile ends. A benchmark that times the calls
    after a first one waits for it here first, so that they run on a machine that
    compiles nothing else.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> from fixedopt.testing import wait_for_compiles_ahead
      >>> x0 = jnp.zeros((40, 3))
      >>> _ = fixedopt.minimize(lambda x: jnp.sum((x - 1.0) ** 2), x0, x0 > 0, batched=True)
      >>> wait_for_compiles_ahead()  # the tail's program, compiled meanwhile
    """
    _ahead.settle()


@contextlib.contextmanager
def no_compiles_ahead() -> Iterator[None]:
    """Within this block, fixedopt compiles nothing ahead in its own thread: a CPU
    block's tail is compiled by the call that first has one, as before issue 62 (for
    a benchmark's comparison; the results are the same, bit for bit).

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> from fixedopt.testing import no_compiles_ahead
      >>> x0 = jnp.zeros((40, 3))
      >>> with no_compiles_ahead():
      ...     sol = fixedopt.minimize(lambda x: jnp.sum((x - 1.0) ** 2), x0, x0 > 0, batched=True)
      >>> print(sol.x[0].round(6))
      [1. 1. 1.]
    """
    before, _ahead.enabled[0] = _ahead.enabled[0], False
    try:
        yield
    finally:
        _ahead.enabled[0] = before


@contextlib.contextmanager
def lapack_solves() -> Iterator[None]:
    """Within this block, least-squares steps solve every free block with LAPACK.

    Free blocks of up to 16 entries are normally solved by unrolled elementwise
    arithmetic that XLA fuses (``fixedopt._solvers.small_linalg``, up to the machine
    profile's ``Kernels.small_n``, here set to 0 for every backend); inside this block the
    solvers call LAPACK's Cholesky and XLA's dot instead, as larger blocks do. Both
    give the same steps to rounding: the block exists so that benchmarks and tests
    can compare the two programs in one process. Compiled solves are dropped on
    entry and on exit, so each side compiles its own program; a function the caller
    jits itself around the solve must be a new function on each side.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> from fixedopt.testing import lapack_solves
      >>> t = jnp.linspace(0.0, 1.0, 8)
      >>> line = lambda p: p[0] * t + p[1] - (2.0 * t + 1.0)
      >>> with lapack_solves():
      ...     sol = fixedopt.least_squares(line, jnp.zeros(2), jnp.zeros(2, bool))
      >>> print(sol.x.round(6))
      [2. 1.]
    """
    saved = dict(_backends.BACKENDS)
    for name, backend in saved.items():
        kernels = backend.kernels._replace(small_n=0)
        _backends.BACKENDS[name] = backend._replace(kernels=kernels)
    _engine.clear_compiled()
    try:
        yield
    finally:
        _backends.BACKENDS.update(saved)
        _engine.clear_compiled()
