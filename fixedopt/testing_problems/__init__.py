"""Test problems with known answers, for tests and benchmarks of solvers built on fixedopt.

- :data:`LEAST_SQUARES`: the least-squares problems of Moré, Garbow and Hillstrom (1981),
  with their standard starts and known local minimizers; :func:`relative_error`.
- :data:`MINIMIZE`: the status-truth cases of ``minimize``: those problems and more,
  each with two starts, and :func:`judge`, an independent verdict on a returned point.
- Two small batched fits whose parameters carry the data's units (:func:`decay_batch`,
  :func:`hyperbola_batch`), with MINPACK's fits of them (:func:`reference_fits`).
- :data:`BATCHED`: the batched problems of the benchmark suites (:class:`BatchedProblem`:
  ``quad``, ``dquad``, ``rosen``, ``straggler``, ``spectra``), each row its own mask.
- :data:`FIT_MODELS`: the small fits of the ``tiny`` suite (:class:`Fits`): Gpufit's 2D
  Gaussian spot and a fluorescence decay.

fixedopt's tests and the benchmark suites (``python -m benchmarks.run``) read these
definitions, so that the two check the same problems. The references and ``quad``'s
matrices call scipy (not a dependency of fixedopt), imported where they are used.

Example:
  >>> import jax.numpy as jnp
  >>> import fixedopt
  >>> from fixedopt.testing_problems import LEAST_SQUARES, relative_error
  >>> problem = LEAST_SQUARES["rosenbrock"]
  >>> x0 = jnp.asarray(problem.start)
  >>> sol = fixedopt.least_squares(problem.residuals, x0, jnp.zeros(2, bool))
  >>> (x_star, f_star), = problem.minima
  >>> relative_error(sol.x, x_star) < 1e-3
  True
"""

from fixedopt.testing_problems._batched import BATCHED as BATCHED
from fixedopt.testing_problems._batched import FIXED_FRACTION as FIXED_FRACTION
from fixedopt.testing_problems._batched import BatchedProblem as BatchedProblem
from fixedopt.testing_problems._batched import dquad as dquad
from fixedopt.testing_problems._batched import quad as quad
from fixedopt.testing_problems._batched import quad_jax as quad_jax
from fixedopt.testing_problems._batched import rosen as rosen
from fixedopt.testing_problems._batched import spectra as spectra
from fixedopt.testing_problems._batched import straggler as straggler
from fixedopt.testing_problems._known import LEAST_SQUARES as LEAST_SQUARES
from fixedopt.testing_problems._known import MINIMIZE as MINIMIZE
from fixedopt.testing_problems._known import SCALES as SCALES
from fixedopt.testing_problems._known import Batch as Batch
from fixedopt.testing_problems._known import LeastSquaresProblem as LeastSquaresProblem
from fixedopt.testing_problems._known import MinimizeProblem as MinimizeProblem
from fixedopt.testing_problems._known import decay as decay
from fixedopt.testing_problems._known import decay_batch as decay_batch
from fixedopt.testing_problems._known import half_sum_of_squares as half_sum_of_squares
from fixedopt.testing_problems._known import hyperbola as hyperbola
from fixedopt.testing_problems._known import hyperbola_batch as hyperbola_batch
from fixedopt.testing_problems._known import judge as judge
from fixedopt.testing_problems._known import objective as objective
from fixedopt.testing_problems._known import parameter_error as parameter_error
from fixedopt.testing_problems._known import reference_fits as reference_fits
from fixedopt.testing_problems._known import relative_error as relative_error
from fixedopt.testing_problems._small_fits import DECAY_BINS as DECAY_BINS
from fixedopt.testing_problems._small_fits import FIT_MODELS as FIT_MODELS
from fixedopt.testing_problems._small_fits import FIT_PARAMETERS as FIT_PARAMETERS
from fixedopt.testing_problems._small_fits import SPOT_GRID as SPOT_GRID
from fixedopt.testing_problems._small_fits import Fits as Fits
from fixedopt.testing_problems._small_fits import decay_fits as decay_fits
from fixedopt.testing_problems._small_fits import decay_model as decay_model
from fixedopt.testing_problems._small_fits import gaussian_fits as gaussian_fits
from fixedopt.testing_problems._small_fits import gaussian_model as gaussian_model

__all__ = [
    "BATCHED",
    "DECAY_BINS",
    "FIT_MODELS",
    "FIT_PARAMETERS",
    "FIXED_FRACTION",
    "LEAST_SQUARES",
    "MINIMIZE",
    "SCALES",
    "SPOT_GRID",
    "Batch",
    "BatchedProblem",
    "Fits",
    "LeastSquaresProblem",
    "MinimizeProblem",
    "decay",
    "decay_batch",
    "decay_fits",
    "decay_model",
    "dquad",
    "gaussian_fits",
    "gaussian_model",
    "half_sum_of_squares",
    "hyperbola",
    "hyperbola_batch",
    "judge",
    "objective",
    "parameter_error",
    "quad",
    "quad_jax",
    "reference_fits",
    "relative_error",
    "rosen",
    "spectra",
    "straggler",
]
