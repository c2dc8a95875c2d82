"""Methods under comparison, by name: each turns a :class:`Problem` into a prepared solve.

See :mod:`benchmarks.base` for the interface; the implementations live in
:mod:`benchmarks.loops` (per-row NumPy baselines), :mod:`benchmarks.anchors` (jaxopt,
TFP) and :mod:`benchmarks.jax_methods` (the optax recipe and fixedopt).
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.anchors import jaxopt_lbfgsb_vmap, tfp_lbfgs_batch
from benchmarks.base import RowResults, Runner, Settings, Skipped
from benchmarks.jax_methods import (
    fixedopt_compiles_on_new_mask,
    fixedopt_lm,
    fixedopt_mask,
    fixedopt_mask_chunk64,
    fixedopt_mask_compact,
    fixedopt_mask_nocompact,
    fixedopt_split,
    optax_lbfgs_vmap_mask,
)
from benchmarks.loops import lmfit_loop, scipy_lbfgsb_loop, scipy_least_squares_loop
from benchmarks.problems import Problem

METHODS: dict[str, Callable[[Problem, Settings], Runner]] = {
    "scipy-lbfgsb-loop": scipy_lbfgsb_loop,
    "jaxopt-lbfgsb-vmap": jaxopt_lbfgsb_vmap,
    "optax-lbfgs-vmap-mask": optax_lbfgs_vmap_mask,
    "tfp-lbfgs-batch": tfp_lbfgs_batch,
    "fixedopt-mask": fixedopt_mask,
    "fixedopt-mask-compact": fixedopt_mask_compact,
    "fixedopt-mask-nocompact": fixedopt_mask_nocompact,
    "fixedopt-mask-chunk64": fixedopt_mask_chunk64,
    "fixedopt-split": fixedopt_split,
    "scipy-least-squares-loop": scipy_least_squares_loop,
    "lmfit-loop": lmfit_loop,
    "fixedopt-lm": fixedopt_lm,
}
REFERENCE = "scipy-lbfgsb-loop"
LEAST_SQUARES_REFERENCE = "scipy-least-squares-loop"

__all__ = [
    "LEAST_SQUARES_REFERENCE",
    "METHODS",
    "REFERENCE",
    "RowResults",
    "Runner",
    "Settings",
    "Skipped",
    "fixedopt_compiles_on_new_mask",
]
