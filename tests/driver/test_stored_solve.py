"""A fit of fixedopt.models' built-in lineshapes names its solve before the trace
(fixedopt._numerics.program_names): a new process runs the stored export untraced,
its results bit for bit jit's; a user's function is traced as before."""

import jax
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import engine
from fixedopt._numerics import cpu_compiler, stored
from fixedopt.models import GaussianModel, LinearModel

OPTIONS = dict(cpu_compiler.CPU_OPTIONS)
X = np.linspace(-3.0, 3.0, 40)


@pytest.fixture
def traces(monkeypatch):
    """The traces of the solve (``engine._solve_traced``), counted."""
    found = []
    traced = engine._solve_traced

    def counted(*args):
        found.append(1)
        return traced(*args)

    monkeypatch.setattr(engine, "_solve_traced", counted)
    return found


def _new_process(monkeypatch, folder):
    """The engine's tuned solve as a new process has it: nothing made or read yet."""
    fresh = stored.StoredJit(engine._solve, (0, 1), OPTIONS, named=True)
    monkeypatch.setattr(engine, "_compiled_for_cpu", fresh)
    where = (lambda name: None) if folder is None else (lambda name: folder / name)
    monkeypatch.setattr(stored, "cache_subfolder", where)


def _fit():
    rng = np.random.default_rng(3)
    model = GaussianModel(prefix="g_") + LinearModel()
    params = model.make_params(g_amplitude=2.0, g_center=0.1, g_sigma=0.8, slope=0.1)
    params["slope"].set(vary=[True, False, True, True, False])
    truth = 2.5 * np.exp(-((X[None] - rng.normal(0, 0.2, (5, 1))) ** 2) / 1.5) + 0.2 * X[None]
    data = truth + rng.normal(0.0, 0.05, truth.shape)
    found = model.fit(data, params, x=X)
    return [np.asarray(a).tobytes() for a in jax.tree.leaves(found.best_values)]


@pytest.mark.skipif(not cpu_compiler.accepted(), reason="the CPU's tuned solve")
def test_a_models_fit_in_a_new_process_runs_its_stored_solve_untraced(
    monkeypatch, tmp_path, traces
):
    _new_process(monkeypatch, None)  # no cache folder: jit's program, as before
    reference = _fit()
    assert len(traces) == 1
    _new_process(monkeypatch, tmp_path)
    assert _fit() == reference and len(traces) == 2  # traced once more, exported
    assert len(list((tmp_path / stored.FOLDER).iterdir())) == 1
    _new_process(monkeypatch, tmp_path)
    assert _fit() == reference and len(traces) == 2, "the stored solve was traced again"


def test_a_users_function_is_traced_as_before(monkeypatch, tmp_path, traces):
    _new_process(monkeypatch, tmp_path)
    x0, fixed = np.ones((3, 2)), np.zeros((3, 2), bool)
    residual = lambda p: p - 2.0
    for _ in range(2):
        fixedopt.least_squares(residual, x0, fixed, batched=True)
    assert len(traces) == 1 and not (tmp_path / stored.FOLDER).exists()
