"""The suites: which problems at which sizes, with which methods; and the micro-benchmarks.

* ``solvers`` — the solver check: quad/rosen B=256 n=64 and quad B=256 n=512 against
  the scipy loop and the optax recipe (plus a new-mask compile check per case).
* ``cpu`` — the protocol's problems and methods on the subset of the size grid that
  runs in about 25 minutes on a 2-core machine, then the micro-benchmarks: ``quad``
  at B×n = 256×8, 256×64, 2048×64, 256×512, 2048×512, 16384×8 (float64) and 2048×64
  (float32); ``dquad`` at 256×64, 2048×64, 256×512; ``rosen`` at 256×64, 2048×64;
  ``spectra`` (n = 10) at B = 256, 2048 (float64) and 2048 (float32); the straggler
  case at 2048×64. The scipy/lmfit loops solve 256 rows, jaxopt at most 2^15 entries,
  both extrapolated; no ``fixedopt-split`` at 2048×512 and 16384×8.
* ``gpu`` — sizes that fill an accelerator (B up to 2^20); the per-row loops solve
  256 rows and are extrapolated, jaxopt at most 2^23 entries. Runs on any
  backend (the file names it); not yet run on a GPU.
* ``micro`` — the micro-benchmarks alone.

``--quick`` runs each suite's ``quick`` variant: small batches, a smoke run.
"""

from __future__ import annotations

import dataclasses

from benchmarks.cases import Case

MINIMIZE = (
    "scipy-lbfgsb-loop",
    "jaxopt-lbfgsb-vmap",
    "optax-lbfgs-vmap-mask",
    "tfp-lbfgs-batch",
    "fixedopt-mask",
    "fixedopt-split",
    "fixedopt-mask-chunk64",
)
MINIMIZE_LARGE = tuple(m for m in MINIMIZE if m != "fixedopt-split")  # saves ~2 min on CPU
MINIMIZE_DEVICE = tuple(m for m in MINIMIZE if m != "fixedopt-mask-chunk64")  # a CPU cache trick
LEAST_SQUARES = ("scipy-least-squares-loop", "lmfit-loop", "fixedopt-lm")
STRAGGLER = (
    "scipy-lbfgsb-loop",
    "optax-lbfgs-vmap-mask",
    "fixedopt-mask-compact",
    "fixedopt-mask-nocompact",
)
SOLVERS = ("scipy-lbfgsb-loop", "optax-lbfgs-vmap-mask", "fixedopt-mask")


@dataclasses.dataclass(frozen=True)
class Micro:
    """Sizes of the micro-benchmarks."""

    objective: tuple[tuple[str, int, int], ...]  # (problem, B, n)
    adam_size: int
    adam_steps: int
    strategy: tuple[int, int]  # (B, n) of the split-vs-mask solves
    compiles: tuple[int, int]  # (B, n) of the compile checks
    split_free_counts: tuple[int, ...]
    rounds: int = 7


@dataclasses.dataclass(frozen=True)
class Suite:
    cases: tuple[Case, ...]
    loop_rows: int | None = None  # rows the scipy/lmfit loops solve (None: all)
    jaxopt_work: int | None = None  # most B * n that jaxopt solves (None: all)
    micro: Micro | None = None
    new_mask_check: bool = False  # per case, for fixedopt-mask (the solvers suite)


def _cases(problems, sizes, methods, dtype="float64"):
    return tuple(Case(problems, b, n, methods, dtype) for b, n in sizes)


MICRO = Micro(
    objective=(
        ("quad", 16384, 64),
        ("quad", 2048, 512),
        ("dquad", 16384, 64),
        ("dquad", 2048, 512),
        ("rosen", 16384, 64),
        ("rosen", 2048, 512),
    ),
    adam_size=2**24,
    adam_steps=5,
    strategy=(256, 512),
    compiles=(256, 64),
    split_free_counts=(20, 28, 32, 33, 48, 64, 17, 16),
)
MICRO_QUICK = Micro(
    objective=(("quad", 256, 64), ("dquad", 256, 64)),
    adam_size=2**20,
    adam_steps=3,
    strategy=(32, 64),
    compiles=(32, 16),
    split_free_counts=(5, 8, 9, 16, 4),
    rounds=3,
)

CPU = Suite(
    cases=(
        *_cases(("quad",), ((256, 8), (256, 64), (2048, 64), (256, 512)), MINIMIZE),
        *_cases(("quad",), ((2048, 512), (16384, 8)), MINIMIZE_LARGE),
        *_cases(("dquad",), ((256, 64), (2048, 64), (256, 512)), MINIMIZE),
        *_cases(("rosen",), ((256, 64), (2048, 64)), MINIMIZE),
        *_cases(("quad",), ((2048, 64),), MINIMIZE, "float32"),
        *_cases(("spectra",), ((256, 10), (2048, 10)), LEAST_SQUARES),
        *_cases(("spectra",), ((2048, 10),), LEAST_SQUARES, "float32"),
        *_cases(("quad", "straggler"), ((2048, 64),), STRAGGLER),
    ),
    loop_rows=256,
    jaxopt_work=2**15,
    micro=MICRO,
)
CPU_QUICK = Suite(
    cases=(
        *_cases(("quad",), ((32, 64),), MINIMIZE),
        *_cases(("dquad",), ((32, 8),), MINIMIZE),
        *_cases(("rosen",), ((32, 8),), MINIMIZE, "float32"),
        *_cases(("spectra",), ((32, 10),), LEAST_SQUARES),
        *_cases(("quad", "straggler"), ((64, 16),), STRAGGLER),
    ),
    loop_rows=16,
    micro=MICRO_QUICK,
)

GPU = Suite(
    cases=(
        *_cases(("quad",), ((2**14, 64), (2**17, 64), (2**20, 64), (2**17, 512)), MINIMIZE_DEVICE),
        *_cases(("dquad",), ((2**17, 64),), MINIMIZE_DEVICE),
        *_cases(("rosen",), ((2**17, 64),), MINIMIZE_DEVICE),
        *_cases(("quad",), ((2**20, 64),), MINIMIZE_DEVICE, "float32"),
        *_cases(("spectra",), ((2**20, 10),), LEAST_SQUARES),
        *_cases(("quad", "straggler"), ((2**17, 64),), STRAGGLER),
    ),
    loop_rows=256,
    jaxopt_work=2**23,
    micro=dataclasses.replace(
        MICRO,
        objective=(("quad", 2**17, 64), ("dquad", 2**17, 64), ("rosen", 2**17, 64)),
        strategy=(2**14, 512),
    ),
)

SUITES = {
    "solvers": Suite(
        cases=(
            Case(("quad",), 256, 64, SOLVERS),
            Case(("rosen",), 256, 64, SOLVERS),
            Case(("quad",), 256, 512, SOLVERS),
        ),
        new_mask_check=True,
    ),
    "cpu": CPU,
    "gpu": GPU,
    "micro": Suite(cases=(), micro=MICRO),
}
QUICK = {
    "solvers": dataclasses.replace(
        SUITES["solvers"],
        cases=tuple(dataclasses.replace(c, batch=32) for c in SUITES["solvers"].cases),
    ),
    "cpu": CPU_QUICK,
    "gpu": Suite(  # small enough for a CPU; exercises the subsampled anchors
        cases=(
            Case(("quad",), 2**12, 64, MINIMIZE_DEVICE),
            Case(("spectra",), 2**12, 10, LEAST_SQUARES),
            Case(("quad", "straggler"), 2**10, 16, STRAGGLER),
        ),
        loop_rows=16,
        jaxopt_work=2**15,
        micro=MICRO_QUICK,
    ),
    "micro": Suite(cases=(), micro=MICRO_QUICK),
}
