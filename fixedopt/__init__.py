"""fixedopt: batched optimization in JAX where each row has its own fixed components.

The public surface; every name is defined in a private module and re-exported here.
"""

from fixedopt._contract.solver import Certificate as Certificate
from fixedopt._contract.solver import Problem as Problem
from fixedopt._contract.solver import Solver as Solver
from fixedopt._contract.solver import Step as Step
from fixedopt._contract.solver import StepContext as StepContext
from fixedopt._contract.status import Outcome as Outcome
from fixedopt._contract.status import Reason as Reason
from fixedopt._contract.status import Status as Status
from fixedopt._derivatives.differentiation import Implicit as Implicit
from fixedopt._derivatives.differentiation import Unroll as Unroll
from fixedopt._driver.compiler import compiler_options as compiler_options
from fixedopt._entry.covariance import covariance as covariance
from fixedopt._entry.curve_fit import CurveFit as CurveFit
from fixedopt._entry.curve_fit import curve_fit as curve_fit
from fixedopt._entry.minimize import least_squares as least_squares
from fixedopt._entry.minimize import minimize as minimize
from fixedopt._entry.multistart import multistart as multistart
from fixedopt._fixing.flax_mask import mask_from as mask_from
from fixedopt._fixing.keep_fixed import KeepFixedState as KeepFixedState
from fixedopt._fixing.keep_fixed import apply_updates as apply_updates
from fixedopt._fixing.keep_fixed import keep_fixed as keep_fixed
from fixedopt._fixing.keep_fixed import schedule_free_eval_params as schedule_free_eval_params
from fixedopt._fixing.mask import fix as fix
from fixedopt._fixing.mask import project as project
from fixedopt._inputs.notices import OptimizeWarning as OptimizeWarning
from fixedopt._inputs.notices import PrecisionWarning as PrecisionWarning
from fixedopt._objective.host_callback import HostFunctionWarning as HostFunctionWarning
from fixedopt._results.covariance import Covariance as Covariance
from fixedopt._results.hessian_covariance import hessian_covariance as hessian_covariance
from fixedopt._results.records import to_dataframe as to_dataframe
from fixedopt._results.records import to_records as to_records
from fixedopt._results.report import Report as Report
from fixedopt._results.report import report as report
from fixedopt._results.solution import Solution as Solution
from fixedopt._solvers.gauss_newton import GaussNewton as GaussNewton
from fixedopt._solvers.gradient_descent import GradientDescent as GradientDescent
from fixedopt._solvers.lbfgs import LBFGS as LBFGS
from fixedopt._solvers.levenberg_marquardt import LevenbergMarquardt as LevenbergMarquardt
from fixedopt._solvers.optax_solver import Optax as Optax

__version__ = "0.1.0"

__all__ = [
    "LBFGS",
    "Certificate",
    "Covariance",
    "CurveFit",
    "GaussNewton",
    "GradientDescent",
    "HostFunctionWarning",
    "Implicit",
    "KeepFixedState",
    "LevenbergMarquardt",
    "Optax",
    "OptimizeWarning",
    "Outcome",
    "PrecisionWarning",
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
    "compiler_options",
    "covariance",
    "curve_fit",
    "fix",
    "hessian_covariance",
    "keep_fixed",
    "least_squares",
    "mask_from",
    "minimize",
    "multistart",
    "project",
    "report",
    "schedule_free_eval_params",
    "to_dataframe",
    "to_records",
]
