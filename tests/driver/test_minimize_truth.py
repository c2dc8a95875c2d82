"""A quick slice of the ``minimize`` status-truth suite (``fixedopt.testing_problems``;
all of it: ``python -m benchmarks.run --suite status_truth``), in float64, with the
objective times 1e-6, 1 and 1e6: a Gaussian peak with an amplitude of 1e4 on a
background of 100, a degenerate minimum (Powell's singular function: ``f* = 0``, a
singular Hessian) and a saturation curve (parameters 240 and 5.5e-4) with the defaults,
and the saturation curve again with ``LBFGS(scaling="hessian")``. Each row is judged
independently in float64 (scipy's MINPACK polishes the returned point). Before L-BFGS
certified its verdicts from the true Hessian (``tests/test_certify.py``), four
saturation rows here ended ``CONVERGED`` far from the minimizer with the defaults."""

import numpy as np
import pytest

import fixedopt
from benchmarks.status_truth import minimize_cases
from fixedopt import testing_problems

SLICE = (  # (problem, the scaling of L-BFGS's initial inverse Hessian)
    ("peak", "auto"),
    ("powell_singular", "auto"),
    ("saturation", "auto"),
    ("saturation", "hessian"),
)


@pytest.mark.parametrize(("name", "scaling"), SLICE)
def test_minimize_statuses_tell_the_truth_in_any_units(name, scaling):
    """Every row CONVERGED exactly when accurate (no false CONVERGED, no accurate row
    left running); in particular no accurate row runs to max_steps."""
    solver = fixedopt.LBFGS(scaling=scaling)
    rows = minimize_cases({name: testing_problems.MINIMIZE[name]}, (np.float64,), solver)
    lies = [(r["start"], r["scale"], r["status"], r["gap"]) for r in rows if not r["truthful"]]
    assert not lies, lies
    assert not any(r["status"] == "MAX_STEPS" and r["accurate"] for r in rows)


def test_the_judge_is_independent_of_the_solver():
    """The judge's verdicts on known points: the minimizer is accurate, a point off it
    by 1e-3 relatively is not (float64), and within the float32 allowance it is."""
    residuals = testing_problems.MINIMIZE["helical_valley"].residuals
    x0, x_star = np.array([-1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0])
    assert testing_problems.judge(residuals, x0, x_star, np.float64)["accurate"]
    off = x_star + np.array([1e-3, 0.0, 0.0])
    assert not testing_problems.judge(residuals, x0, off, np.float64)["accurate"]
    near = x_star + np.array([1e-3 * np.sqrt(np.finfo(np.float32).eps), 0.0, 0.0])
    assert testing_problems.judge(residuals, x0, near, np.float32)["accurate"]
