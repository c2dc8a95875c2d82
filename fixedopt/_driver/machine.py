"""The machine profile: every decision about how a solve runs on its backend, in one place.

:func:`schedule` makes one static :class:`Schedule` per solve (``fixedopt._driver.engine.run``)
from the plan and the backend; the driver reads it and nothing else of the machine:
the matmul precision, the layout of the rows, the lanes' width (:meth:`Schedule.width`,
from one row's bytes), CPU blocks and their tail, folding and summing of reductions,
the compiler options (the solve's and its check's after the loop), and when the lanes
refill; and, for a covariance outside a solve, where it runs
(:func:`covariance_on_device`), whether ``curve_fit`` compiles it beside its solve
(:func:`covariance_compiled_ahead`) and its matmul precision
(:func:`covariance_precision`). The tuned numbers are the per-backend ``Backend``
defaults of ``fixedopt._numerics.backends`` (its ``CPU``, ``GPU``, ``TPU``: adding or
changing a backend is an edit there), each beside its reason and the measurement that
set it (a heading of ``docs/decisions.md``), the thresholds of XLA:CPU's kernels among
them: where the reductions fold (``fixedopt._numerics.reduce``) and where the small solves and the
normal sums take their elementwise paths (``fixedopt._solvers.small_linalg``). Those
modules sit below the driver: the engine gives them the backend's
:class:`~fixedopt._numerics.kernels.Kernels` as static context around the solve's trace
(``fixedopt._numerics.kernels.using``).

**Matmul precision.** On a TPU, JAX's default precision runs a float32 matrix product
in bfloat16 passes (about three digits; a GPU with TF32 keeps about four). A user's
``x @ (H @ x)`` then has a gradient too noisy for a status to trust: ``minimize`` on
16,384 rows of n = 64 (``0.5 x'Hx - c'x + 0.1 sum x^4``, 30% fixed, bounds ±3) ended
6.7% CONVERGED, 72% STALLED, 21% MAX_STEPS on a TPU v5e (issue 61); traced at
``"highest"`` (float32 products) they converge as on the CPU, and sooner: 0.108 s a call
against 1.50 s (n = 8: 0.052 s against 1.01 s; ``docs/decisions.md``, "The TPU's matmul precision").
So on these backends the solve (the objective, its
derivatives, the solver's own linear algebra and the derivative rule after it) is traced
at ``"highest"``, unless the user chose a precision (``jax.default_matmul_precision`` or
the ``jax_default_matmul_precision`` option): that choice is kept, which is how a user
trades the digits back for speed. A CPU computes float32 products in float32 at any
setting, and its programs are traced exactly as before (no setting entered).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import jax

from fixedopt._contract.solver import Solver
from fixedopt._numerics import backends, cpu_compiler

# The precision a solve is traced at there, unless the user set one: float32 products
# (six bfloat16 passes on a TPU), measured above.
SOLVE_PRECISION = "highest"


def matmul_precision(backend: str) -> str | None:
    """The matmul precision a solve for ``backend`` is traced at: :data:`SOLVE_PRECISION`
    on a backend of
    ``fixedopt._numerics.backends.REDUCED_FLOAT32_MATMULS`` when the user has set none; None
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
    if backend not in backends.REDUCED_FLOAT32_MATMULS:
        return None
    if jax.config.jax_default_matmul_precision is not None:  # type: ignore[attr-defined]
        return None
    return SOLVE_PRECISION


@contextlib.contextmanager
def solve_precision(backend: str) -> Iterator[None]:
    """Trace what runs inside at :func:`matmul_precision` for ``backend``; where that
    is None, enter nothing (a CPU's programs stay as they were)."""
    with traced_at(matmul_precision(backend)):
        yield


@contextlib.contextmanager
def traced_at(precision: str | None) -> Iterator[None]:
    """Trace what runs inside at matmul ``precision`` (:attr:`Schedule.precision`);
    None: enter nothing."""
    if precision is None:
        yield
        return
    with jax.default_matmul_precision(precision):
        yield


@contextlib.contextmanager
def covariance_precision(backend: str | None = None) -> Iterator[None]:
    """Trace a covariance's programs (the model's Jacobian at the solution and the
    products of its inverse) at the matmul precision a solve is traced at on ``backend``
    (:func:`matmul_precision`; default: where the call runs): on a TPU float32 products,
    not bfloat16 passes, unless the user chose a precision; on a CPU nothing entered
    (its programs as before). At the TPU's default precision ``Model.fit``'s covariance
    by LAPACK's whole-batch path differed from the CPU's by up to 9.1e-3 of
    ``sqrt(var_i var_j)`` (``docs/decisions.md``, "A TPU's covariance at the solve's
    precision"). ``covariance.early_on_device`` keeps the precision for the program it
    has lowered later (``ahead.soon``), where this context does not reach."""
    with solve_precision(backends.platform() if backend is None else backend):
        yield


def covariance_on_device(backend: str | None = None) -> bool:
    """Whether a covariance computed here takes the device's elementwise QR, the rows it
    does not certify LAPACK's on the host's CPU (``Backend.device_qr_covariance``), on
    ``backend`` (default: ``fixedopt._numerics.backends.platform``, where the call
    runs). The covariance sits
    below the driver: its callers ask here and pass the answer down
    (``fixedopt._results.covariance.covariance_and``).

    Example:
      >>> from fixedopt._driver.machine import covariance_on_device
      >>> covariance_on_device("tpu"), covariance_on_device("cpu")
      (True, False)
    """
    return backends.defaults(backend).device_qr_covariance


def covariance_compiled_ahead(backend: str | None = None) -> bool:
    """Whether ``curve_fit`` compiles the covariance program of :func:`covariance_on_device`'s
    path in fixedopt's thread while the caller traces and compiles the solve
    (``Backend.covariance_ahead``: a TPU, whose host has cores to spare), on ``backend``
    (default: where the call runs). A CPU compiles it in the call, after the solve.

    Example:
      >>> from fixedopt._driver.machine import covariance_compiled_ahead
      >>> covariance_compiled_ahead("tpu"), covariance_compiled_ahead("cpu")
      (True, False)
    """
    return backends.defaults(backend).covariance_ahead


# The rows' layout in the lanes: a row's entries along the minor axis (the one value so
# far); the TPU's small rows want the batch there ("rows-minor", issue 61).
ROWS_MAJOR = "rows-major"


class Schedule(NamedTuple):
    """How one solve runs on its machine: static, made once per solve by :func:`schedule`."""

    backend: str  # the platform compiled for
    defaults: backends.Backend  # its tuned numbers
    precision: str | None  # the matmul precision traced at (None: JAX's, untouched)
    layout: str  # the rows' layout in the lanes (ROWS_MAJOR)
    lanes: int | None  # the lanes asked for (None: :meth:`width` of a row's bytes)
    refill_cost: float  # a refill (one evaluation a row) in steps of the solver
    tail: bool  # a CPU block: stop when its tail is left (fixedopt._driver.batching)
    compiler_options: tuple[tuple[str, Any], ...]  # XLA's options at the top level
    check_options: tuple[tuple[str, Any], ...]  # those of the check after the loop

    def of_tail(self) -> Schedule:
        """A CPU block's tail's schedule: ``Backend.tail_lanes`` lanes, compiled with the
        check's options where the solve's keep XLA's (``minimize``'s solvers: on the
        CPU XLA:CPU's elemental emitter, as least squares' are). A trip of at most
        ``tail_lanes`` rows is its kernels' launches more than their arithmetic, and the
        elemental emitter compiles a kernel in a fraction of the time: quad n = 64's
        tail 2.57 -> 1.55 s of CPU, its compile inside a first call on 2 cores
        (``docs/decisions.md``, "Where quad n = 64's compile goes")."""
        options = self.compiler_options or self.check_options
        return self._replace(lanes=self.defaults.tail_lanes, compiler_options=options)

    def folds(self, rows: int, length: int) -> bool:
        """Whether reductions of ``rows`` rows of ``length`` entries fold
        (``fixedopt._numerics.reduce.folding``): rows longer than ``Kernels.fold``, too
        few entries in all for XLA:CPU's YNN (``Backend.ynn_entries``)."""
        fold = self.defaults.kernels.fold
        return 0 < fold < length and rows * length < self.defaults.ynn_entries

    def width(self, total: int, row_bytes: int) -> int:
        """The lanes for ``total`` rows whose step's working set is ``row_bytes`` each:
        :attr:`lanes` or the default, at most ``total``."""
        if self.lanes is not None:
            return min(self.lanes, total)
        return min(default_width(total, row_bytes, self.backend), total)


def schedule(solver: Solver[Any], lanes: int | None, backend: str, tail: bool = False) -> Schedule:
    """The :class:`Schedule` of a solve by ``solver`` through ``lanes`` (None: the
    default) on ``backend``; ``tail``: a CPU block's."""
    tuned = backends.defaults(backend)
    options = cpu_compiler.CPU_OPTIONS if _tuned_compiler(tuned, solver) else {}
    check = cpu_compiler.CPU_OPTIONS if tuned.tuned_check and cpu_compiler.accepted() else {}
    return Schedule(
        backend=backend,
        defaults=tuned,
        precision=matmul_precision(backend),
        layout=ROWS_MAJOR,
        lanes=lanes,
        refill_cost=1.0 / solver.evaluations_per_step,
        tail=tail,
        compiler_options=tuple(sorted(options.items())),
        check_options=tuple(sorted(check.items())),
    )


def _tuned_compiler(tuned: backends.Backend, solver: Solver[Any]) -> bool:
    """Whether ``solver``'s solves compile with ``cpu_compiler.CPU_OPTIONS`` (a
    least-squares solver, where the backend tunes its compiler and jaxlib takes them)."""
    return tuned.tuned_compiler and solver.needs_residuals and cpu_compiler.accepted()


def default_width(batch: int, row_bytes: int, backend: str) -> int:
    """The default number of lanes for ``batch`` rows whose loop state takes
    ``row_bytes`` bytes each, on ``backend`` ("cpu", "gpu", "tpu", ...): never more than
    an eighth of the rows (on the CPU of a block), so that slow rows overlap with
    others, and never fewer than 8."""
    width = _lanes(backends.defaults(backend), row_bytes)
    return min(batch, max(min(width, -(-batch // 8)), 8))


def _lanes(tuned: backends.Backend, row_bytes: int) -> int:
    """The lanes for rows of ``row_bytes`` bytes, before the batch bounds them: those
    that fit the cache, within the backend's fewest and most."""
    if not tuned.cache_bytes:
        return tuned.most_lanes
    in_cache = tuned.cache_bytes // max(row_bytes, 1)
    return min(tuned.most_lanes, max(tuned.fewest_lanes, in_cache))


def block_rows(data_bytes: int) -> int:
    """On a CPU, the rows of the one size in which a batch whose rows' data take
    ``data_bytes`` bytes each is compiled (:mod:`fixedopt._driver.batching`): at least 8
    rows for each of the :func:`default_width` lanes (a row's loop state holds its data,
    so the width from a row's bytes is at most ``cache_bytes // data_bytes``), a power
    of two."""
    lanes = _lanes(backends.CPU, data_bytes)
    return 8 * (1 << (lanes - 1).bit_length())
