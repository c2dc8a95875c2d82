"""The description of a solve the driver reads: the static :class:`Plan` (one compiled
program each) and the traced :class:`Inputs`, built once by ``fixedopt._entry.describe``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from fixedopt._contract.solver import Solver
from fixedopt._derivatives.differentiation import IMPLICIT, Differentiation
from fixedopt._driver.loop import Resume, Stopping
from fixedopt._driver.progress import Progress
from fixedopt._inputs.validate import Bounds, PyTree
from fixedopt._objective.losses import Loss


class Plan(NamedTuple):
    """The static description of a solve: each distinct plan is one compiled program.

    With :class:`Inputs` (its traced data) it is all the driver reads of a call."""

    fun: Callable[..., Any]  # the user's function (a UserFunction: hashable, with its notes)
    solver: Solver[Any]
    least_squares: bool  # residuals (least_squares) or a scalar (minimize)
    loss: Loss | None  # least squares: a robust loss or the Poisson likelihood; None: squares
    batched_args: tuple[bool, ...] | None  # None: one problem; else per args leaf
    lanes: int | None = None  # a batch: rows the loop advances at a time (None: default)
    backend: str = "cpu"  # the platform compiled for (its machine.Schedule)
    vectorized: bool = False  # fun takes the lane batch (see fixedopt._objective.vectorized)
    differentiate: Differentiation = IMPLICIT  # the loops and the derivative rule
    max_trips: int | None = None  # unrolled: the scans' static length (max_steps); else None
    progress: Progress | None = None  # None: no progress callback
    normal: bool = False  # report the solver's J^T J at x (Solution.normal): curve_fit's


class Inputs(NamedTuple):
    """The traced data of a solve, validated; with a batch, every leaf has the batch axis
    (but the shared leaves of ``args``, and ``stopping``)."""

    x0: PyTree
    fixed: PyTree  # the normalized mask, boolean arrays like x0
    fixed_values: PyTree
    bounds: Bounds | None  # normalized (lower, upper) trees like x0
    args: tuple[Any, ...]
    sigma: jax.Array | None  # least squares: each residual's standard deviation
    counts: jax.Array | None  # estimator="poisson": the observed counts
    split_index: jax.Array | None  # strategy="split": each row's packed free positions
    stopping: Stopping  # the tolerances and max_steps, in the dtype of x0
    batch: jax.Array | None = None  # rows padded (_driver.batching): the true batch size
    # Where each row's loop goes on from (_driver.after_loop); None: claims checked inside
    resume: Resume | None = None
