"""The solver suites (:data:`PLANS`, full and quick): problems, sizes and methods. ``cpu``
runs ~15 minutes on 2 cores, ``gpu`` fills a device; both end with split against mask on
four mask patterns. ``scale``: stragglers under one ``vmap`` and through the lanes, and
XLA's peak memory of batched solves up to 1e6 rows, both ways."""

import dataclasses
import time

import jax
import numpy as np

from benchmarks import timing
from benchmarks.cases import SEED, Case, quality, run_case
from benchmarks.methods import GTOL, WHOLE_BATCH, Settings, as_rows, fixedopt_call
from fixedopt.testing_problems import BATCHED, quad

MINIMIZE = ("scipy-lbfgsb-loop", "jaxopt-lbfgsb-vmap", "optax-lbfgs-vmap-mask", "tfp-lbfgs-batch",
            "fixedopt-mask", "fixedopt-split", "fixedopt-mask-vmap")  # fmt: skip
LARGE = MINIMIZE[:5] + MINIMIZE[6:]  # no split at the largest sizes (saves ~2 min on CPU)
DEVICE = MINIMIZE
LEAST_SQUARES = ("scipy-least-squares-loop", "lmfit-loop", "fixedopt-lm")
STRAGGLER = ("scipy-lbfgsb-loop", "optax-lbfgs-vmap-mask", "fixedopt-mask",
             "fixedopt-mask-vmap")  # fmt: skip
VMAP_OR_LANES = ("fixedopt-mask-vmap", "fixedopt-mask")  # one vmap, then the default lanes
PATTERNS = {"per-row 30% fixed": (0.3, False), "shared 30% fixed": (0.3, True),
            "per-row 90% fixed": (0.9, False), "shared 90% fixed": (0.9, True)}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Plan:
    """Cases to run, how the slow methods are subsampled, and the tables after the cases."""

    cases: tuple[Case, ...] = ()
    loop_rows: int | None = None  # rows the scipy/lmfit loops solve (None: all)
    jaxopt_work: int | None = None  # most B * n that jaxopt solves (None: all)
    strategy: tuple[int, int] | None = None  # (B, n) of split against mask (quad)
    memory: tuple[int, ...] = ()  # batch sizes of the peak memory table (quad, n = 8)


def grid(problems, sizes, methods, dtype="float64") -> tuple[Case, ...]:
    return tuple(Case(problems, b, n, methods, dtype) for b, n in sizes)


def run_plan(plan: Plan, args) -> list[dict]:
    """Every case of ``plan``, then split against mask and peak memory, as records."""
    records = []
    for case in plan.cases:
        gtol = args.gtol if args.gtol is not None and case.dtype == "float64" else None
        settings = Settings(gtol or GTOL[case.dtype], args.max_steps or 5000,
                            plan.loop_rows, plan.jaxopt_work)  # fmt: skip
        records += [r | {"max_steps": settings.max_steps} for r in run_case(case, settings, args)]
    if plan.strategy:
        records += split_vs_mask(*plan.strategy, rounds=max(3, args.repeats // 2))
    return records + peak_memory(plan.memory)


def packed_width(fixed: np.ndarray) -> int:
    """``split``'s packed width: the least power of two >= every row's free count, <= n."""
    largest = max(int(np.max(np.sum(~fixed, axis=-1), initial=0)), 1)
    return min(1 << (largest - 1).bit_length(), fixed.shape[-1])


def blocked_call(problem, **options):
    """The public call on ``problem``, blocked (``least_squares`` for a residual form)."""
    call, inputs = fixedopt_call(problem, Settings(), problem.jax_residual is not None, **options)
    return lambda: jax.block_until_ready(call(*inputs))


def split_vs_mask(batch: int, n: int, rounds: int) -> list[dict]:
    """Whole solves of ``quad`` with both strategies, per mask pattern (public calls)."""
    records = []
    for pattern, (fraction, shared) in PATTERNS.items():
        problem = BATCHED["quad"](batch, n, SEED).with_mask(SEED + 7, fraction, shared)
        calls = {s: blocked_call(problem, strategy=s) for s in ("mask", "split")}
        width = packed_width(problem.fixed)
        record = timing.compared(calls, "mask", rounds, kind="strategy", problem="quad", B=batch,
                                 n=n, pattern=pattern, split_width=width)  # fmt: skip
        mask_rows, split_rows = (as_rows(calls[s]()) for s in ("mask", "split"))
        agree = quality(problem, split_rows, mask_rows, Settings.gtol)
        records.append(record | {"split_max_rel_obj_diff_vs_mask": agree["max_rel_obj_diff"],
                                 "steps_mean": float(np.mean(mask_rows.steps))})  # fmt: skip
    return records


def peak_memory(sizes, n: int = 8, timed_batch: int = 100_000) -> list[dict]:
    """XLA memory of the solve per batch size, through the default lanes and as one
    whole-batch vmap; time up to 1e5 rows."""
    records = []
    for batch in sizes:
        problem = quad(batch, n, SEED)
        for lanes in (None, WHOLE_BATCH):
            call, inputs = fixedopt_call(problem, Settings(), lanes=lanes)
            program, stats = timing.compiled(jax.jit(call), *inputs)
            shown = "whole batch" if lanes else "default"
            record = {"kind": "memory", "B": batch, "n": n, "lanes": shown, **stats}
            if batch <= timed_batch:
                start = time.perf_counter()
                solution = jax.block_until_ready(program(*inputs))
                record["time_s"] = time.perf_counter() - start
                record["converged"] = float(np.mean(solution.converged))
            records.append(record)
    return records


CPU = Plan(
    cases=(
        *grid(("quad",), ((256, 8), (256, 64), (2048, 64), (256, 512)), MINIMIZE),
        *grid(("quad",), ((2048, 512), (16384, 8)), LARGE),
        *grid(("dquad",), ((256, 64), (2048, 64), (256, 512)), MINIMIZE),
        *grid(("rosen",), ((256, 64), (2048, 64)), MINIMIZE),
        *grid(("quad",), ((2048, 64),), MINIMIZE, "float32"),
        *grid(("spectra",), ((256, 10), (2048, 10)), LEAST_SQUARES),
        *grid(("spectra",), ((2048, 10),), LEAST_SQUARES, "float32"),
        *grid(("quad", "straggler"), ((2048, 64),), STRAGGLER),
    ),
    loop_rows=256, jaxopt_work=2**15, strategy=(256, 512),
)  # fmt: skip
GPU = Plan(
    cases=(
        *grid(("quad",), ((2**14, 64), (2**17, 64), (2**20, 64), (2**17, 512)), DEVICE),
        *grid(("dquad",), ((2**17, 64),), DEVICE),
        *grid(("rosen",), ((2**17, 64),), DEVICE),
        *grid(("quad",), ((2**20, 64),), DEVICE, "float32"),
        *grid(("spectra",), ((2**20, 10),), LEAST_SQUARES),
        *grid(("quad", "straggler"), ((2**17, 64),), STRAGGLER),
    ),
    loop_rows=256, jaxopt_work=2**23, strategy=(2**14, 512),
)  # fmt: skip
SCALE = Plan(grid(("quad", "straggler"), ((1024, 32), (4096, 32), (16384, 32)), VMAP_OR_LANES),
             memory=(10**5, 3 * 10**5, 10**6))  # fmt: skip


def smoke(minimize) -> Plan:
    """Every method of a full suite once, tiny: a smoke run."""
    cases = (*grid(("quad",), ((16, 8),), minimize), *grid(("spectra",), ((8, 10),), LEAST_SQUARES),
             *grid(("quad", "straggler"), ((16, 8),), STRAGGLER))  # fmt: skip
    return Plan(cases, loop_rows=4, jaxopt_work=64, strategy=(16, 8))


PLANS = {"cpu": (CPU, smoke(MINIMIZE)), "gpu": (GPU, smoke(DEVICE)),  # name: (full, quick)
         "scale": (SCALE, Plan(grid(("quad", "straggler"), ((16, 8),), VMAP_OR_LANES),
                               memory=(2_000,)))}  # fmt: skip
