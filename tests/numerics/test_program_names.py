"""Names of static arguments before a trace (fixedopt._numerics.program_names): two
programs that could differ never share a name; what fixedopt cannot name (a user's
function, a closure, a subclass of the user's) has none."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._driver.plan import Plan
from fixedopt._models.fit import _Residual
from fixedopt._models.layout import layout
from fixedopt._numerics.program_names import defined_here, name_of
from fixedopt._objective.call_note import UserFunction
from fixedopt._solvers.levenberg_marquardt import LevenbergMarquardt
from fixedopt.models import (
    ExpressionModel,
    GaussianModel,
    LinearModel,
    LorentzianModel,
    Model,
    PolynomialModel,
    PseudoVoigtModel,
    StepModel,
    lineshapes,
)


def _spectra():
    return PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()


def test_models_that_compute_alike_share_a_name_and_no_others_do():
    named = {
        "spectra": _spectra(),
        "swapped": PseudoVoigtModel(prefix="p2_") + PseudoVoigtModel(prefix="p1_") + LinearModel(),
        "gaussian": GaussianModel(),
        "lorentzian": LorentzianModel(),
        "prefixed": GaussianModel(prefix="g_"),
        "sum": GaussianModel() + LinearModel(),
        "product": GaussianModel() * LinearModel(),
        "erf step": StepModel(form="erf"),
        "linear step": StepModel(form="linear"),
        "plain function": Model(lineshapes.gaussian),
    }
    names = {key: name_of(model) for key, model in named.items()}
    assert None not in names.values(), names
    assert len(set(names.values())) == len(names), names
    assert name_of(_spectra()) == names["spectra"]  # a model made again: the same name


def _pvoigt(x, amplitude=1.0, center=0.0, sigma=1.0, fraction=0.5):
    return lineshapes.pvoigt(x, amplitude, center, sigma, fraction)


_pvoigt.__module__ = "fixedopt._models.lineshapes"  # a user's function posing as fixedopt's
_pvoigt.__qualname__ = "pvoigt"


class OwnGaussian(GaussianModel):
    def curve(self, values, independent):
        return 2.0 * super().curve(values, independent)


def test_what_fixedopt_cannot_name_has_no_name():
    assert name_of(Model(_pvoigt)) is None  # not the function found under that name
    assert name_of(Model(lambda x, a=1.0: a * x)) is None
    assert name_of(OwnGaussian()) is None and name_of(OwnGaussian() + LinearModel()) is None
    assert name_of(PolynomialModel(2)) is None  # its curve is made in a function
    assert name_of(ExpressionModel("a * exp(-b * x)")) is None
    assert name_of(np.float64(1.0)) is None and name_of(jnp.sin) is None
    assert name_of((1, len)) is None
    assert not defined_here(_pvoigt) and defined_here(lineshapes.pvoigt)


def test_names_read_what_equality_reads_in_a_fixed_order():
    """A set's order (a hash seed's) is not in its name; a field equality skips (a
    note: the batch size of UserFunction) is not either; every other field is."""
    assert name_of(frozenset({"b", "a", "c"})) == name_of(frozenset({"c", "a", "b"}))
    assert name_of(frozenset({"a"})) != name_of(("a",))
    assert name_of((1, 1.0, True, "1", None)) == "tuple(1, 1.0, True, '1', None)"
    model = _spectra()
    params = model.make_params()
    residual = _Residual(model, layout(params, 4), ("x",), False, False)
    one = UserFunction(residual, "residual_fun", rows=4)
    other = dataclasses.replace(one, rows=4000)
    assert one == other and name_of(one) == name_of(other) is not None
    plan = Plan(one, LevenbergMarquardt(), True, None, (False, True))
    assert name_of(plan) == name_of(plan._replace(fun=other)) is not None
    changed = [plan._replace(solver=LevenbergMarquardt(initial_damping=1e-2)),
               plan._replace(batched_args=(True, True)), plan._replace(normal=True),
               plan._replace(fun=UserFunction(dataclasses.replace(residual, weighted=True),
                                              "residual_fun"))]  # fmt: skip
    assert len({name_of(p) for p in [plan, *changed]}) == 5
    params["p1_fwhm"].set(expr="3.0*p1_sigma")
    tied = _Residual(model, layout(params, 4), ("x",), False, False)
    assert name_of(tied) != name_of(residual)
    assert name_of(plan._replace(fun=UserFunction(_pvoigt, "residual_fun"))) is None


def test_another_fixedopt_or_jax_names_another_program(monkeypatch, tmp_path):
    """The stored solve's name holds fixedopt's source and JAX's versions: an export
    made by another fixedopt or JAX is never run (no compile here: names only)."""
    from fixedopt._driver import engine, machine
    from fixedopt._numerics import stored

    monkeypatch.setattr(stored, "cache_subfolder", lambda name: tmp_path / name)
    model = _spectra()
    residual = _Residual(model, layout(model.make_params(), 4), ("x",), False, False)
    plan = Plan(UserFunction(residual, "residual_fun"), LevenbergMarquardt(), True, None,
                (False, True))  # fmt: skip
    static = (plan, machine.schedule(plan.solver, plan.lanes, plan.backend))
    leaves = [np.zeros((4, 10))]
    tree = jax.tree.structure(leaves)

    def name():
        return stored.StoredJit(engine._solve, (0, 1), {}, named=True)._name(static, tree, leaves)

    first = name()
    assert first is not None and name() == first
    with monkeypatch.context() as patched:
        patched.setattr(stored, "library_digest", lambda: "another fixedopt")
        assert name() not in (None, first)
    with monkeypatch.context() as patched:
        patched.setattr(jax, "__version__", "0.0.0")
        assert name() not in (None, first)
    unnamed = (plan._replace(fun=UserFunction(_pvoigt, "residual_fun")), static[1])
    assert (
        stored.StoredJit(engine._solve, (0, 1), {}, named=True)._name(unnamed, tree, leaves) is None
    )
