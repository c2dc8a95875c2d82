"""The solver suites (:data:`PLANS`, full and quick): problems, sizes and methods; ``cpu``
runs ~25 minutes on 2 cores (then the micro-benchmarks), ``gpu`` fills a device."""

import dataclasses

from benchmarks.cases import Case, run_case
from benchmarks.methods import GTOL, Settings
from benchmarks.micro import run as run_micro

MINIMIZE = ("scipy-lbfgsb-loop", "jaxopt-lbfgsb-vmap", "optax-lbfgs-vmap-mask", "tfp-lbfgs-batch",
            "fixedopt-mask", "fixedopt-split", "fixedopt-mask-vmap")  # fmt: skip
LARGE = MINIMIZE[:5] + MINIMIZE[6:]  # no split at the largest sizes (saves ~2 min on CPU)
DEVICE = MINIMIZE
LEAST_SQUARES = ("scipy-least-squares-loop", "lmfit-loop", "fixedopt-lm")
STRAGGLER = ("scipy-lbfgsb-loop", "optax-lbfgs-vmap-mask", "fixedopt-mask",
             "fixedopt-mask-vmap")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Plan:
    """Cases to run (and micro-benchmarks), and how the slow methods are subsampled."""

    cases: tuple[Case, ...] = ()
    loop_rows: int | None = None  # rows the scipy/lmfit loops solve (None: all)
    jaxopt_work: int | None = None  # most B * n that jaxopt solves (None: all)
    micro: dict | None = None  # keywords of micro.run


def grid(problems, sizes, methods, dtype="float64") -> tuple[Case, ...]:
    return tuple(Case(problems, b, n, methods, dtype) for b, n in sizes)


def run_plan(plan: Plan, args) -> list[dict]:
    """Every case of ``plan`` (then its micro-benchmarks), as records."""
    records = []
    for case in plan.cases:
        gtol = args.gtol if args.gtol is not None and case.dtype == "float64" else None
        settings = Settings(gtol or GTOL[case.dtype], args.max_steps or 5000,
                            plan.loop_rows, plan.jaxopt_work)  # fmt: skip
        records += [r | {"max_steps": settings.max_steps} for r in run_case(case, settings, args)]
    return records + (run_micro(**plan.micro) if plan.micro else [])


MICRO = {  # the sizes of micro.run
    "objective": (("quad", 16384, 64), ("quad", 2048, 512), ("dquad", 16384, 64),
                  ("dquad", 2048, 512), ("rosen", 16384, 64), ("rosen", 2048, 512)),
    "adam_size": 2**24, "adam_steps": 5, "strategy": (256, 512), "compiles": (256, 64),
    "split_free_counts": (20, 28, 32, 33, 48, 64, 17, 16),
}  # fmt: skip
MICRO_QUICK = {"objective": (("quad", 64, 16),), "adam_size": 2**14, "adam_steps": 2,
               "strategy": (16, 8), "compiles": (16, 8), "split_free_counts": (3, 4, 2),
               "rounds": 3, "dispatch_size": (16, 8)}  # fmt: skip
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
    loop_rows=256, jaxopt_work=2**15, micro=MICRO,
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
    loop_rows=256, jaxopt_work=2**23,
    micro=MICRO | {"strategy": (2**14, 512), "objective": (
        ("quad", 2**17, 64), ("dquad", 2**17, 64), ("rosen", 2**17, 64))},
)  # fmt: skip


def smoke(minimize) -> Plan:
    """Every method of a full suite once, tiny: a smoke run."""
    cases = (*grid(("quad",), ((16, 8),), minimize), *grid(("spectra",), ((8, 10),), LEAST_SQUARES),
             *grid(("quad", "straggler"), ((16, 8),), STRAGGLER))  # fmt: skip
    return Plan(cases, loop_rows=4, jaxopt_work=64, micro=MICRO_QUICK)


PLANS = {"cpu": (CPU, smoke(MINIMIZE)), "gpu": (GPU, smoke(DEVICE))}  # name: (full, quick)
