"""Per-row quality of a batched solve, checked independently of the method.

Objective values and gradients are re-evaluated at each method's final ``x`` with the
problem's NumPy objective (in float64, whatever the method computed in), so a method
cannot pass by reporting a stale value.
"""

from __future__ import annotations

import numpy as np

from benchmarks.base import RowResults
from benchmarks.problems import Problem

AGREE_RTOL = 1e-6


def _rows(problem: Problem, result: RowResults) -> np.ndarray:
    return np.arange(problem.batch) if result.rows is None else result.rows


def numpy_values_and_grad_norms(problem: Problem, x: np.ndarray, rows: np.ndarray):
    """Per-row objective and max |projected gradient| over free entries, in NumPy.

    ``x`` holds the rows ``rows`` of the batch.
    """
    x = np.asarray(x, np.float64)
    values, grad = problem.numpy_fun(x, *(a[rows] for a in problem.args))
    if problem.bounds is not None:
        grad = x - np.clip(x - grad, *problem.bounds)
    free_grad = np.where(problem.fixed[rows], 0.0, np.abs(grad))
    return values, np.max(free_grad, axis=-1, initial=0.0)


def reference_values(problem: Problem, reference: RowResults) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, values)``: the reference method's rows and its objective there."""
    rows = _rows(problem, reference)
    return rows, numpy_values_and_grad_norms(problem, reference.x, rows)[0]


def fixed_bit_identical(problem: Problem, result: RowResults) -> bool:
    """Whether every fixed entry of ``x`` has exactly the bits of ``x0`` in ``x``'s dtype."""
    rows = _rows(problem, result)
    fixed = problem.fixed[rows]
    got = np.ascontiguousarray(result.x[fixed])
    want = problem.x0[rows][fixed].astype(got.dtype)
    bits = f"u{got.itemsize}"
    return bool(np.array_equal(got.view(bits), want.view(bits)))


def quality(problem: Problem, result: RowResults, reference, gtol: float) -> dict:
    """Steps, convergence, agreement with the reference and exactness of fixed entries.

    ``reference``: ``(rows, values)`` from :func:`reference_values`; the comparison uses
    those rows (a subsampled reference compares on its subsample).
    """
    rows = _rows(problem, result)
    values, norms = numpy_values_and_grad_norms(problem, result.x, rows)
    ref_rows, ref_values = reference
    position = {row: i for i, row in enumerate(rows)}
    shared = np.array([i for i, row in enumerate(ref_rows) if row in position], int)
    mine = values[[position[row] for row in ref_rows[shared]]]
    scale = np.maximum(np.abs(ref_values[shared]), 1.0)
    relative = np.abs(mine - ref_values[shared]) / scale
    with np.errstate(invalid="ignore"):
        lower = mine < ref_values[shared] - AGREE_RTOL * scale
    return {
        "rows_checked": int(rows.size),
        "steps_mean": float(np.mean(result.steps)),
        "steps_max": int(np.max(result.steps)),
        "converged_frac": float(np.mean(result.converged)),
        "gtol_met_frac": float(np.mean(norms <= gtol)),
        "max_rel_obj_diff": float(np.max(relative, initial=0.0)),
        "rows_compared": int(shared.size),
        "rows_agree_frac": float(np.mean(relative <= AGREE_RTOL)),
        # rows where this method found a clearly lower value than the reference
        "rows_lower_frac": float(np.mean(lower)),
        "fixed_bit_identical": fixed_bit_identical(problem, result),
    }
