"""The thresholds of a backend's kernels that a trace reads, as static context.

The numbers are the machine profile's (``fixedopt._numerics.backends.Backend.kernels``,
each beside its reason and measurement); the driver enters them around a solve's trace
(:func:`using`), and the reductions (``fixedopt._numerics.reduce``) and the small
solves (``fixedopt._solvers.small_linalg``), which sit below the driver, read them here
(:func:`current`) at trace time. Outside a solve a trace reads :data:`PLAIN`: none of
these kernels, JAX's own operations (reductions, dots, LAPACK's solves).

Example:
  >>> from fixedopt._numerics import kernels
  >>> kernels.current() == kernels.PLAIN
  True
  >>> with kernels.using(kernels.Kernels(small_n=16)):
  ...     kernels.current().small_n
  16
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import NamedTuple


class Kernels(NamedTuple):
    """Where a trace takes a kernel of its own over JAX's operation (0: never)."""

    fold: int = 0  # reductions of rows longer than this fold to this many entries first
    fold_chunks: int = 0  # ... up to this many chunks (longer rows: the plain reduction)
    small_n: int = 0  # free blocks of at most this many unknowns solved elementwise (else LAPACK)
    roll_above: int = 0  # ... above this many, a rolled elimination (0: unrolled up to small_n)
    product_terms: int = 0  # products with a Jacobian unrolled up to this many multiply-adds
    summed_n: int = 0  # J^T J, J^T r and |r|^2 as one reduction up to this many columns ...
    summed_few_n: int = 0  # ... any Jacobian up to this many; above, where products unroll


PLAIN = Kernels()  # outside a solve: JAX's own operations
_CURRENT = contextvars.ContextVar("fixedopt_kernels", default=PLAIN)


@contextlib.contextmanager
def using(kernels: Kernels) -> Iterator[None]:
    """Trace what runs inside with ``kernels`` (a solve's: its machine profile's)."""
    token = _CURRENT.set(kernels)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> Kernels:
    """The kernels of this trace (static): :data:`PLAIN` outside :func:`using`."""
    return _CURRENT.get()
