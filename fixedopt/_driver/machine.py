"""The machine profile: what the driver decides per backend about how a solve runs.

A solve is traced for one platform (:func:`platform`: the default device's), and the
choices that depend on it are made here, each beside the measurement that set it. So
far the matmul precision (:func:`solve_precision`); the lane widths (``widths.py``),
reductions (``fixedopt._numerics.reduce``) and compiler options (``compiler.py``) still
live in their own modules (issue 60 gathers them here).

**Matmul precision.** On a TPU, JAX's default precision runs a float32 matrix product
in bfloat16 passes (about three digits; a GPU with TF32 keeps about four). A user's
``x @ (H @ x)`` then has a gradient too noisy for a status to trust: ``minimize`` on
16,384 rows of n = 64 (``0.5 x'Hx - c'x + 0.1 sum x^4``, 30% fixed, bounds ±3) ended
6.7% CONVERGED, 72% STALLED, 21% MAX_STEPS in 1.70 s on a TPU v5e; traced at
``"highest"`` (float32 products) 100% CONVERGED in 49 ms, 8.4 steps a row (issue 61;
``benchmarks/results/tpu-tpu-*``). So on these backends the solve (the objective, its
derivatives, the solver's own linear algebra and the derivative rule after it) is traced
at ``"highest"``, unless the user chose a precision (``jax.default_matmul_precision`` or
the ``jax_default_matmul_precision`` option): that choice is kept, which is how a user
trades the digits back for speed. A CPU computes float32 products in float32 at any
setting, and its programs are traced exactly as before (no setting entered).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax

# The backends whose float32 matmuls drop bits at JAX's default precision: a TPU's
# bfloat16 passes, an NVIDIA GPU's TF32 (Ampere and later). ``jax.default_backend()``
# says "gpu" for either GPU platform; "cuda" and "rocm" are their own names.
REDUCED_FLOAT32_MATMULS = frozenset({"tpu", "gpu", "cuda", "rocm"})
# The precision a solve is traced at there, unless the user set one: float32 products
# (six bfloat16 passes on a TPU), measured above.
SOLVE_PRECISION = "highest"


def platform() -> str:
    """The platform a computation runs on by default here: that of
    ``jax.default_device`` where one is set (a CPU beside a TPU, say), else
    ``jax.default_backend()``."""
    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend()
    return device if isinstance(device, str) else str(device.platform)


def matmul_precision(backend: str) -> str | None:
    """The matmul precision a solve for ``backend`` is traced at: :data:`SOLVE_PRECISION`
    on a backend of :data:`REDUCED_FLOAT32_MATMULS` when the user has set none; None
    (JAX's setting, untouched) elsewhere.

    Example:
      >>> import jax
      >>> from fixedopt._driver.machine import matmul_precision
      >>> matmul_precision("tpu"), matmul_precision("cpu")
      ('highest', None)
      >>> with jax.default_matmul_precision("default"):  # the user's own choice
      ...     print(matmul_precision("tpu"))
      None
    """
    if backend not in REDUCED_FLOAT32_MATMULS:
        return None
    if jax.config.jax_default_matmul_precision is not None:
        return None
    return SOLVE_PRECISION


@contextlib.contextmanager
def solve_precision(backend: str) -> Iterator[None]:
    """Trace what runs inside at :func:`matmul_precision` for ``backend``; where that
    is None, enter nothing (a CPU's programs stay as they were)."""
    precision = matmul_precision(backend)
    if precision is None:
        yield
        return
    with jax.default_matmul_precision(precision):
        yield
