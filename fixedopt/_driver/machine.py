"""The machine profile: every decision about how a solve runs on its backend, in one place.

:func:`schedule` makes one static :class:`Schedule` per solve (``fixedopt._driver.engine.run``)
from the plan and the backend; the driver reads it and nothing else of the machine:
the matmul precision, the layout of the rows, the lanes' width (:meth:`Schedule.width`,
from one row's bytes), CPU blocks and their tail, folding and summing of reductions,
the compiler options (the solve's and its check's after the loop), and when the lanes
refill; and, for a covariance outside a solve, where it runs
(:func:`covariance_on_device`). The tuned numbers are the
per-backend :class:`Backend` defaults below (:data:`CPU`, :data:`GPU`, :data:`TPU`),
each beside its reason and the measurement that set it (a heading of
``docs/decisions.md``), the thresholds of XLA:CPU's kernels among them: where the
reductions fold (``fixedopt._numerics.reduce``) and where the small solves and the
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
from fixedopt._numerics import cpu_compiler
from fixedopt._numerics.kernels import Kernels

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
    ``jax.default_backend()`` (:func:`fixedopt._numerics.cpu_compiler.platform`)."""
    return cpu_compiler.platform()


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


class Backend(NamedTuple):
    """A backend's tuned defaults (:data:`CPU`, :data:`GPU`, :data:`TPU`)."""

    fewest_lanes: int  # the default lanes' least width (before the batch bounds it)
    most_lanes: int  # and most
    cache_bytes: int  # the lanes' working set aimed at (0: no cache rule, most_lanes)
    blocks: bool  # a batch runs as blocks of one compiled size, its tail solved again
    tail_lanes: int  # a block's tail: at most this many rows left running alone ...
    tail_patience: int  # ... for this many trips stop the block
    ynn_entries: int  # reductions of rows x length below this fold (where kernels.fold)
    kernels: Kernels  # the thresholds its traces read (fixedopt._numerics.kernels)
    tuned_compiler: bool  # least-squares solves compile with cpu_compiler.CPU_OPTIONS
    # The check of CONVERGED claims after the loop (fixedopt._driver.after_loop) compiles
    # with cpu_compiler.CPU_OPTIONS, whatever the solver
    tuned_check: bool = False
    minor_rows: bool = False  # the lanes' loop carries its arrays rows last (packing.py)
    # A batch's rows padded to its compiled size and cut back in NumPy, not by a small
    # program per batch size (fixedopt._numerics.buckets.pad_rows): the host's memory is
    # the device's
    rows_on_host: bool = False
    # curve_fit's covariance from the solver's last J^T J (float64, n <= 8), where the
    # covariance runs in chunks with cpu_compiler's row-wise options
    # (docs/decisions.md, "A covariance from the solver's normal equations")
    normal_covariance: bool = False
    # A covariance's small blocks by the elementwise QR on the device whatever their
    # height, the rows it does not certify by LAPACK's path on the host's CPU, at the top
    # level: a TPU's SVD and QR compile for seconds (covariance_on_device, read by
    # fixedopt.covariance, curve_fit and Model.fit; docs/decisions.md, "A TPU's new
    # process and its covariance")
    device_qr_covariance: bool = False


# The CPU (XLA:CPU of jaxlib 0.10, measured on 2-core EPYC machines).
CPU = Backend(
    # Lanes: as many rows as fit half of a core's L2 cache (1 MiB), so a step's working
    # set stays in cache, but at least 64: rows of a few kB (L-BFGS at n = 64, 512) fit
    # 5-34 to the cache but ran 6-24% slower than at 64-256 lanes, a trip's fixed part
    # (its test, the refill, the solver's scalars) not growing with its lanes
    # (docs/decisions.md, "Lane widths on the CPU").
    fewest_lanes=64,
    most_lanes=4096,
    cache_bytes=1 << 19,
    # Blocks: one compiled size per model, so a new batch size compiles nothing; 4 blocks
    # of the Gaussian spot, 8 of quad n = 64 ran as fast as one batch of their rows
    # (docs/decisions.md, "One compiled solve for every batch size").
    blocks=True,
    # The tail: a lone trip of 64 lanes cost 0.40 ms where the row's own step costs
    # 24-37 us; 16 lone trips (a few ms) are what a batch without a straggler can pay
    # (docs/decisions.md, "One degenerate spectrum in 2,000").
    tail_lanes=2,
    tail_patience=16,
    # Folding pays where XLA:CPU's tree-reduction rewrite splits a reduction in three,
    # below the arrays its YNN library takes: seen 4000 entries rewritten, 4096 to YNN,
    # at lengths 40 to 200 (docs/decisions.md, "Row reductions folded to 32 entries").
    ynn_entries=4096,
    kernels=Kernels(
        # Rows longer than 32 fold to 32 entries: the rewrite leaves reductions of at most
        # 32 alone; 1.28x-1.35x at n = 64, 1.41x at 128, 1.48x at 256 (docs/decisions.md,
        # "Row reductions folded to 32 entries").
        fold=32,
        # Up to 8 chunks (n = 256); n = 512 folded cost 0.35 s of compile for 1.16x
        # (the same decision).
        fold_chunks=8,
        # Free blocks up to 16 unknowns solved elementwise, not by a LAPACK call per
        # batch, which cannot fuse (docs/decisions.md, "Small normal-equation solves").
        small_n=16,
        # Unrolled up to 5 unknowns: XLA:CPU compiles the unrolled solve into ~n^2 / 1.2
        # kernels (n = 5: 0.4 s of compile, 8: 0.9 s, 16: 4.2 s); above, a rolled
        # elimination compiles in 0.2 s and runs 2-3x slower alone, a few percent of a
        # step (docs/decisions.md, "Small normal-equation solves").
        roll_above=5,
        # Products with a Jacobian unrolled up to 1024 multiply-adds (its Gram matrix's
        # m n (n + 1) / 2): Gpufit's 5x5 Gaussian (375 terms) LM ~2x faster at 1e5 fits;
        # a 128-bin decay (1920 terms) faster and sooner compiled with the dots.
        product_terms=1024,
        # J^T J, J^T r and |r|^2 as one reduction: up to 10 columns where the products
        # unroll, any Jacobian up to 7: Gpufit's Gaussian 1.42x, a 128-bin decay 1.6x,
        # polynomials n = 6, 7, 8 1.13-1.4x, 1.2x, 1.0x; n = 12 0.9x (docs/decisions.md,
        # "When the normal sums are one reduction").
        summed_n=10,
        summed_few_n=7,
    ),
    # The elemental emitter: least-squares solves compile in 0.6-0.8x the time, run as
    # fast (docs/decisions.md, "XLA:CPU's elemental emitter for least-squares solves").
    tuned_compiler=True,
    # The check after the loop too, for every solver (L-BFGS's loop keeps XLA's defaults):
    # quad n = 64's check 99 -> 73 kernels, 0.63x its compile (docs/decisions.md, "The
    # check after the loop with the elemental emitter").
    tuned_check=True,
    # A CPU's memory is the host's: a copy there costs less than a program to compile.
    rows_on_host=True,
    normal_covariance=True,
)
# An accelerator: 2^16 lanes (at most an eighth of the batch), kept while a cost model
# fitted on an H200, where lanes=B ran 1.35x-5.2x faster, was too loose to set another
# (docs/decisions.md, "Lane widths on an accelerator"); none of the CPU's tricks,
# measured on XLA:CPU only (issue 61 measures the TPU): no folding, no summing, no
# rolled solve; the elementwise small solves and products (small_n, product_terms)
# kept as the CPU measured them, until an accelerator is measured.
GPU = Backend(fewest_lanes=1 << 16, most_lanes=1 << 16, cache_bytes=0, blocks=False,
              tail_lanes=2, tail_patience=16, ynn_entries=0,
              kernels=Kernels(small_n=16, product_terms=1024),
              tuned_compiler=False)  # fmt: skip
# A TPU: the lanes' loop carries rows on the minor axis, which a TPU tiles by 128: a
# carry of (rows, 8) rows padded each row to 128 entries and was transposed every trip
# (docs/decisions.md, "Rows on a TPU's minor axis").
# Its covariance: the elementwise QR on the chip, LAPACK's rows on the host (above).
TPU = GPU._replace(minor_rows=True, device_qr_covariance=True)
BACKENDS = {"cpu": CPU, "gpu": GPU, "cuda": GPU, "rocm": GPU, "tpu": TPU}


def defaults(backend: str) -> Backend:
    """The tuned defaults of ``backend`` (an unknown accelerator: :data:`GPU`'s)."""
    return BACKENDS.get(backend, GPU)


def covariance_on_device(backend: str | None = None) -> bool:
    """Whether a covariance computed here takes the device's elementwise QR, the rows it
    does not certify LAPACK's on the host's CPU (``Backend.device_qr_covariance``), on
    ``backend`` (default: :func:`platform`, where the call runs). The covariance sits
    below the driver: its callers ask here and pass the answer down
    (``fixedopt._results.covariance.covariance_and``).

    Example:
      >>> from fixedopt._driver.machine import covariance_on_device
      >>> covariance_on_device("tpu"), covariance_on_device("cpu")
      (True, False)
    """
    return defaults(platform() if backend is None else backend).device_qr_covariance


# The rows' layout in the lanes: a row's entries along the minor axis (the one value so
# far); the TPU's small rows want the batch there ("rows-minor", issue 61).
ROWS_MAJOR = "rows-major"


class Schedule(NamedTuple):
    """How one solve runs on its machine: static, made once per solve by :func:`schedule`."""

    backend: str  # the platform compiled for
    defaults: Backend  # its tuned numbers
    precision: str | None  # the matmul precision traced at (None: JAX's, untouched)
    layout: str  # the rows' layout in the lanes (ROWS_MAJOR)
    lanes: int | None  # the lanes asked for (None: :meth:`width` of a row's bytes)
    refill_cost: float  # a refill (one evaluation a row) in steps of the solver
    tail: bool  # a CPU block: stop when its tail is left (fixedopt._driver.batching)
    compiler_options: tuple[tuple[str, Any], ...]  # XLA's options at the top level
    check_options: tuple[tuple[str, Any], ...]  # those of the check after the loop

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
    tuned = defaults(backend)
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


def _tuned_compiler(tuned: Backend, solver: Solver[Any]) -> bool:
    """Whether ``solver``'s solves compile with ``cpu_compiler.CPU_OPTIONS`` (a
    least-squares solver, where the backend tunes its compiler and jaxlib takes them)."""
    return tuned.tuned_compiler and solver.needs_residuals and cpu_compiler.accepted()


def default_width(batch: int, row_bytes: int, backend: str) -> int:
    """The default number of lanes for ``batch`` rows whose loop state takes
    ``row_bytes`` bytes each, on ``backend`` ("cpu", "gpu", "tpu", ...): never more than
    an eighth of the rows (on the CPU of a block), so that slow rows overlap with
    others, and never fewer than 8."""
    width = _lanes(defaults(backend), row_bytes)
    return min(batch, max(min(width, -(-batch // 8)), 8))


def _lanes(tuned: Backend, row_bytes: int) -> int:
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
    lanes = _lanes(CPU, data_bytes)
    return 8 * (1 << (lanes - 1).bit_length())
