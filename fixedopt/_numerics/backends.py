"""The backends' tuned defaults: one :class:`Backend` each (:data:`CPU`, :data:`GPU`,
:data:`TPU`), every number and switch beside its one-line reason and the measurement that
set it (a heading of ``docs/decisions.md``); adding or changing a backend is an edit here.

The driver makes a solve's ``fixedopt._driver.machine.Schedule`` from them; the modules
below the driver that choose by machine read them here, at the call, for the platform
it runs on (:func:`defaults`): XLA:CPU's options for a fit's programs
(``fixedopt._numerics.cpu_compiler.jit_for_cpu``, :attr:`Backend.tuned_compiler`) and a
batch's rows in chunks (``fixedopt._numerics.buckets.chunks_here``,
:attr:`Backend.chunked`).

Example:
  >>> from fixedopt._numerics import backends
  >>> backends.defaults("cpu").chunked, backends.defaults("tpu").minor_rows
  (True, True)
  >>> backends.defaults("some-new-chip") == backends.GPU  # an unknown accelerator
  True
"""

from __future__ import annotations

from typing import NamedTuple

import jax

from fixedopt._numerics.kernels import Kernels

# The backends whose float32 matmuls drop bits at JAX's default precision: a TPU's
# bfloat16 passes, an NVIDIA GPU's TF32 (Ampere and later). ``jax.default_backend()``
# says "gpu" for either GPU platform; "cuda" and "rocm" are their own names
# (``fixedopt._driver.machine.matmul_precision``).
REDUCED_FLOAT32_MATMULS = frozenset({"tpu", "gpu", "cuda", "rocm"})


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
    # A fit's programs compile with XLA:CPU's options (fixedopt._numerics.cpu_compiler):
    # a least-squares solve, and at the top level its covariance and curves (jit_for_cpu)
    tuned_compiler: bool
    # The check of CONVERGED claims after the loop (fixedopt._driver.after_loop) compiles
    # with cpu_compiler.CPU_OPTIONS, whatever the solver
    tuned_check: bool = False
    minor_rows: bool = False  # the lanes' loop carries its arrays rows last (packing.py)
    # A batch's rows padded to its compiled size and cut back in NumPy, not by a small
    # program per batch size (fixedopt._numerics.buckets.pad_rows): the host's memory is
    # the device's
    rows_on_host: bool = False
    # A program that maps each row on its own (the covariance) runs at the top level in
    # chunks of one compiled size, their rows put together in NumPy
    # (fixedopt._numerics.buckets.chunks_here): the host's memory is the device's
    chunked: bool = False
    # curve_fit's covariance from the solver's last J^T J (float64, n <= 8), where the
    # covariance runs in chunks with cpu_compiler's row-wise options
    # (docs/decisions.md, "A covariance from the solver's normal equations")
    normal_covariance: bool = False
    # A covariance's small blocks by the elementwise QR on the device whatever their
    # height, the rows it does not certify by LAPACK's path on the host's CPU, at the top
    # level: a TPU's SVD and QR compile for seconds (machine.covariance_on_device, read
    # by fixedopt.covariance, curve_fit and Model.fit; docs/decisions.md, "A TPU's new
    # process and its covariance")
    device_qr_covariance: bool = False
    # curve_fit's covariance program of that path (the model's Jacobian at x, its QR)
    # traced and lowered once the call's arguments are checked, its XLA compile in
    # fixedopt's thread while the caller traces and compiles the solve: a TPU's host has
    # 13 cores, and the two compiles ran one after the other (spectra_slow: 6.2 s after
    # the solve's 10.0 s; docs/decisions.md, "A TPU's covariance compiled beside its
    # solve"); on 2 cores it did not pay ("A covariance compiled while the solve compiles")
    covariance_ahead: bool = False
    # A least-squares model of at least this many residuals (or with a loop) has its rows
    # started by their lanes' next trip, on the trip's evaluation (the program holds the
    # model once: fixedopt._driver.shared_start); 0: never. Smaller models ran slower so
    # (docs/decisions.md, "One evaluation of the model in the lanes' program")
    start_in_step_residuals: int = 256
    # The cost of a refill whose rows start on their next trip (no evaluation: gathers
    # and writes), in steps (Schedule.refill_cost's unit): the spectra's compiled call
    # 0.41 s of CPU at 1.0, 0.31 at 0.1, 0.31-0.38 at 0.03 (same decision)
    bare_refill_cost: float = 0.1


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
    # A CPU's memory is the host's: a copy there costs less than a program to compile,
    # for the padded rows and for a covariance's chunks (docs/decisions.md, "One compiled
    # solve for every batch size").
    rows_on_host=True,
    chunked=True,
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
# Its covariance: the elementwise QR on the chip, LAPACK's rows on the host
# (Backend.device_qr_covariance), compiled beside the solve (Backend.covariance_ahead).
TPU = GPU._replace(minor_rows=True, device_qr_covariance=True, covariance_ahead=True)
BACKENDS = {"cpu": CPU, "gpu": GPU, "cuda": GPU, "rocm": GPU, "tpu": TPU}


def platform() -> str:
    """The platform a computation runs on by default here: that of
    ``jax.default_device`` where one is set (a CPU beside a TPU, say), else
    ``jax.default_backend()``."""
    # The option's value in this context (jax.default_device's too); unannotated in jax.
    device = jax.config.jax_default_device  # type: ignore[attr-defined]
    if device is None:
        return jax.default_backend()
    return device if isinstance(device, str) else str(device.platform)


def defaults(backend: str | None = None) -> Backend:
    """The tuned defaults of ``backend`` (default: :func:`platform`, where a call runs;
    an unknown accelerator: :data:`GPU`'s)."""
    return BACKENDS.get(platform() if backend is None else backend, GPU)
