"""A quick slice of the ``minimize`` status-truth suite (``tests/minimize_truth.py``;
all of it: ``python -m benchmarks.run --suite status_truth``, results in
``benchmarks/results/cpu-status-truth-after.md``): problems with singular and
zero-residual minima (helical valley, Box 3D, Wood, Rosenbrock) and badly scaled fits
(a saturation curve with parameters 240 and 5.5e-4, a Gaussian), in float32 and
float64, the objective times 1e-6, 1 and 1e6. Each row is judged independently in
float64 (scipy's MINPACK polishes the returned point)."""

import numpy as np
import pytest

from benchmarks.status_truth import minimize_cases
from tests import minimize_truth

SLICE = {  # problem: the starts of the slice
    "helical_valley": (0, 1),
    "box_3d": (0, 1),
    "saturation": (0, 1),
    "gaussian": (0,),
    "rosenbrock": (0,),
    "wood": (0,),
}


# Known lies (the full table has them all): L-BFGS's quasi-Newton model, fooled by
# parameters of very different scales (saturation: an amplitude of 240 next to a rate
# of 5.5e-4) or by a curved valley in float32 (Box 3D, Wood), passes XTOL far from the
# minimum. Strict: a fix turns these into failures to remove from the list.
KNOWN_LIES = {"box_3d", "saturation", "wood"}
CASES = [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="false XTOL (see above)"))
    if name in KNOWN_LIES else name
    for name in SLICE
]  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_minimize_statuses_tell_the_truth_in_any_units(name):
    """Every row CONVERGED exactly when accurate (no false CONVERGED, no accurate row
    left running), none of them at max_steps. (The same verdict in other units is not
    asserted: on the badly scaled saturation fit the last bits of the objective's
    scale change the path, and a row may end accurate and CONVERGED in one unit and
    inaccurate and STALLED in another, both true.)"""
    problem = minimize_truth.PROBLEMS[name]
    starts = tuple(problem.starts[i] for i in SLICE[name])
    rows = minimize_cases({name: problem._replace(starts=starts)}, minimize_truth.DTYPES)
    lies = [(r["dtype"], r["start"], r["scale"], r["status"], r["gap"]) for r in rows
            if not r["truthful"]]  # fmt: skip
    assert not lies, lies
    assert not any(r["status"] == "MAX_STEPS" for r in rows)


def test_the_judge_is_independent_of_the_solver():
    """The judge's verdicts on known points: the minimizer is accurate, a point off it
    by 1e-3 relatively is not (float64), and within the float32 allowance it is."""
    residuals = minimize_truth.PROBLEMS["helical_valley"].residuals
    x0, x_star = np.array([-1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0])
    assert minimize_truth.judge(residuals, x0, x_star, np.float64)["accurate"]
    off = x_star + np.array([1e-3, 0.0, 0.0])
    assert not minimize_truth.judge(residuals, x0, off, np.float64)["accurate"]
    near = x_star + np.array([1e-3 * np.sqrt(np.finfo(np.float32).eps), 0.0, 0.0])
    assert minimize_truth.judge(residuals, x0, near, np.float32)["accurate"]
