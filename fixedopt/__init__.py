"""fixedopt: batched optimization in JAX where each row has its own fixed components.

The public surface; every name is defined in a private module and re-exported here.
"""

from fixedopt._covariance import Covariance as Covariance
from fixedopt._covariance import covariance as covariance
from fixedopt._curve_fit import CurveFit as CurveFit
from fixedopt._curve_fit import curve_fit as curve_fit
from fixedopt._differentiation import Implicit as Implicit
from fixedopt._differentiation import Unroll as Unroll
from fixedopt._flax import mask_from as mask_from
from fixedopt._hessian_covariance import hessian_covariance as hessian_covariance
from fixedopt._mask import fix as fix
from fixedopt._mask import project as project
from fixedopt._minimize import least_squares as least_squares
from fixedopt._minimize import minimize as minimize
from fixedopt._optax import KeepFixedState as KeepFixedState
from fixedopt._optax import apply_updates as apply_updates
from fixedopt._optax import keep_fixed as keep_fixed
from fixedopt._records import to_dataframe as to_dataframe
from fixedopt._records import to_records as to_records
from fixedopt._report import Report as Report
from fixedopt._report import report as report
from fixedopt._solution import Solution as Solution
from fixedopt._solver import Problem as Problem
from fixedopt._solver import Solver as Solver
from fixedopt._solver import Step as Step
from fixedopt._solver import StepContext as StepContext
from fixedopt._solvers.gauss_newton import GaussNewton as GaussNewton
from fixedopt._solvers.gauss_newton import LevenbergMarquardt as LevenbergMarquardt
from fixedopt._solvers.gradient_descent import GradientDescent as GradientDescent
from fixedopt._solvers.lbfgs import LBFGS as LBFGS
from fixedopt._solvers.optax_solver import Optax as Optax
from fixedopt._status import Outcome as Outcome
from fixedopt._status import Reason as Reason
from fixedopt._status import Status as Status

__version__ = "0.1.0"

__all__ = [
    "LBFGS",
    "Covariance",
    "CurveFit",
    "GaussNewton",
    "GradientDescent",
    "Implicit",
    "KeepFixedState",
    "LevenbergMarquardt",
    "Optax",
    "Outcome",
    "Problem",
    "Reason",
    "Report",
    "Solution",
    "Solver",
    "Status",
    "Step",
    "StepContext",
    "Unroll",
    "apply_updates",
    "covariance",
    "curve_fit",
    "fix",
    "hessian_covariance",
    "keep_fixed",
    "least_squares",
    "mask_from",
    "minimize",
    "project",
    "report",
    "to_dataframe",
    "to_records",
]
