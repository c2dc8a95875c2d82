"""fixedopt.models: lmfit's models and named parameters, for a batch of fits.

The public surface of ``fixedopt/_models/``; every name is defined in a private module
and re-exported here.
"""

from fixedopt._models import lineshapes as lineshapes
from fixedopt._models.builtin import BiExponentialModel as BiExponentialModel
from fixedopt._models.builtin import ConstantModel as ConstantModel
from fixedopt._models.builtin import ExponentialModel as ExponentialModel
from fixedopt._models.builtin import LinearModel as LinearModel
from fixedopt._models.builtin import PolynomialModel as PolynomialModel
from fixedopt._models.builtin import PowerLawModel as PowerLawModel
from fixedopt._models.builtin import QuadraticModel as ParabolicModel  # lmfit's alias
from fixedopt._models.builtin import QuadraticModel as QuadraticModel
from fixedopt._models.builtin import RectangleModel as RectangleModel
from fixedopt._models.builtin import StepModel as StepModel
from fixedopt._models.expression_model import ExpressionModel as ExpressionModel
from fixedopt._models.expressions import Expression as Expression
from fixedopt._models.expressions import parse as parse_expression
from fixedopt._models.faddeeva import wofz as wofz
from fixedopt._models.fit import fit as fit
from fixedopt._models.maps import fit_xarray as fit_xarray
from fixedopt._models.model import CompositeModel as CompositeModel
from fixedopt._models.model import Model as Model
from fixedopt._models.more_peaks import BreitWignerModel as BreitWignerModel
from fixedopt._models.more_peaks import (
    DampedHarmonicOscillatorModel as DampedHarmonicOscillatorModel,
)
from fixedopt._models.more_peaks import DoniachModel as DoniachModel
from fixedopt._models.more_peaks import ExponentialGaussianModel as ExponentialGaussianModel
from fixedopt._models.more_peaks import LognormalModel as LognormalModel
from fixedopt._models.more_peaks import MoffatModel as MoffatModel
from fixedopt._models.more_peaks import Pearson4Model as Pearson4Model
from fixedopt._models.more_peaks import SineModel as SineModel
from fixedopt._models.more_peaks import SkewedVoigtModel as SkewedVoigtModel
from fixedopt._models.more_peaks import SplitLorentzianModel as SplitLorentzianModel
from fixedopt._models.more_peaks import StudentsTModel as StudentsTModel
from fixedopt._models.more_peaks import ThermalDistributionModel as ThermalDistributionModel
from fixedopt._models.parameters import Parameter as Parameter
from fixedopt._models.parameters import Parameters as Parameters
from fixedopt._models.peaks import DampedOscillatorModel as DampedOscillatorModel
from fixedopt._models.peaks import Gaussian2dModel as Gaussian2dModel
from fixedopt._models.peaks import GaussianModel as GaussianModel
from fixedopt._models.peaks import LorentzianModel as LorentzianModel
from fixedopt._models.peaks import Pearson7Model as Pearson7Model
from fixedopt._models.peaks import PseudoVoigtModel as PseudoVoigtModel
from fixedopt._models.peaks import SkewedGaussianModel as SkewedGaussianModel
from fixedopt._models.peaks import VoigtModel as VoigtModel
from fixedopt._models.result import ModelResult as ModelResult
from fixedopt._models.spline import SplineModel as SplineModel

__all__ = [
    "BiExponentialModel",
    "BreitWignerModel",
    "CompositeModel",
    "ConstantModel",
    "DampedHarmonicOscillatorModel",
    "DampedOscillatorModel",
    "DoniachModel",
    "ExponentialGaussianModel",
    "ExponentialModel",
    "Expression",
    "ExpressionModel",
    "Gaussian2dModel",
    "GaussianModel",
    "LinearModel",
    "LognormalModel",
    "LorentzianModel",
    "Model",
    "ModelResult",
    "MoffatModel",
    "ParabolicModel",
    "Parameter",
    "Parameters",
    "Pearson4Model",
    "Pearson7Model",
    "PolynomialModel",
    "PowerLawModel",
    "PseudoVoigtModel",
    "QuadraticModel",
    "RectangleModel",
    "SineModel",
    "SkewedGaussianModel",
    "SkewedVoigtModel",
    "SplineModel",
    "SplitLorentzianModel",
    "StepModel",
    "StudentsTModel",
    "ThermalDistributionModel",
    "VoigtModel",
    "fit",
    "fit_xarray",
    "lineshapes",
    "parse_expression",
    "wofz",
]
