"""The solve's Schedule (fixedopt._driver.machine): every machine decision in one object,
per-backend numbers in one module (fixedopt._numerics.backends), and a solver contract
that mentions no scheduling."""

import dataclasses
import pathlib
import re

import jax
import jax.numpy as jnp
import pytest

import fixedopt
from fixedopt._driver import after_loop, engine, machine
from fixedopt._numerics import backends, cpu_compiler, kernels, reduce
from fixedopt._solvers import small_linalg

LM, LBFGS = fixedopt.LevenbergMarquardt(), fixedopt.LBFGS()


def test_a_cpu_schedule_takes_the_cpus_tricks():
    schedule = machine.schedule(LM, None, "cpu")
    assert schedule.defaults is backends.CPU and schedule.layout == machine.ROWS_MAJOR
    assert schedule.precision is None  # a CPU's float32 products are float32
    assert schedule.defaults.kernels.summed_n and schedule.folds(1, 64)
    assert not schedule.folds(1024, 64)
    assert dict(schedule.compiler_options) == fixedopt.compiler_options(LM)
    assert dict(schedule.compiler_options) == (
        cpu_compiler.CPU_OPTIONS if cpu_compiler.accepted() else {}
    )
    assert machine.schedule(LBFGS, None, "cpu").compiler_options == ()  # XLA's defaults
    assert schedule.defaults.rows_on_host  # a batch padded and cut in NumPy (buckets.py)


@pytest.mark.parametrize("backend", ["tpu", "gpu", "cuda", "rocm", "some-new-chip"])
def test_an_accelerators_schedule_takes_none_of_them(backend):
    schedule = machine.schedule(LM, None, backend)
    # A TPU's profile differs from a GPU's in its lanes' carry (rows last) and its
    # covariance (the elementwise QR on the chip, compiled beside the solve) alone.
    tuned = schedule.defaults._replace(minor_rows=False, device_qr_covariance=False,
                                       covariance_ahead=False)  # fmt: skip
    assert tuned == backends.GPU and not schedule.defaults.blocks
    assert schedule.defaults.minor_rows == (backend == "tpu")
    assert schedule.defaults.device_qr_covariance == (backend == "tpu")
    assert schedule.defaults.covariance_ahead == (backend == "tpu")
    assert not backends.CPU.covariance_ahead  # the CPU compiles it in the call
    assert not backends.CPU.minor_rows
    reduced = backend in backends.REDUCED_FLOAT32_MATMULS
    assert schedule.precision == ("highest" if reduced else None)
    assert not schedule.defaults.kernels.summed_n and not schedule.folds(1, 64)
    assert schedule.compiler_options == ()
    assert schedule.width(10**7, 100) == 1 << 16


@pytest.mark.parametrize("backend", ["cpu", "gpu", "tpu", "some-new-chip"])
def test_the_checks_compiler_options_are_the_profiles(backend):
    """The check of CONVERGED claims after the loop compiles with the profile's options
    for it, whatever the solver: on a CPU XLA:CPU's elemental emitter, XLA's defaults
    elsewhere; the same program as when ``after_loop`` chose it by ``plan.backend ==
    "cpu"`` and ``cpu_compiler.accepted()`` (its rule before it moved here)."""
    before = backend == "cpu" and cpu_compiler.accepted()
    for solver in (LM, LBFGS, fixedopt.GradientDescent()):
        schedule = machine.schedule(solver, None, backend)
        assert dict(schedule.check_options) == (cpu_compiler.CPU_OPTIONS if before else {})
        chosen = after_loop._check_program(schedule)
        assert chosen is (after_loop._check_tuned if before else after_loop._check_plain)
    assert after_loop._check_tuned is after_loop._check_jits.tuned  # CPU_OPTIONS' jit


def test_the_covariance_asks_the_profile_where_it_runs(monkeypatch):
    """Whether a covariance takes the device's QR is the profile's
    (``Backend.device_qr_covariance``), read at the call for the platform it runs on;
    the covariance's modules hold no machine state and name no backend."""
    assert machine.covariance_on_device("tpu") and not machine.covariance_on_device("gpu")
    assert machine.covariance_on_device() == (backends.platform() == "tpu")
    monkeypatch.setitem(backends.BACKENDS, backends.platform(),
                        backends.CPU._replace(device_qr_covariance=True))  # fmt: skip
    assert machine.covariance_on_device()
    root = pathlib.Path(fixedopt.__file__).parent
    named = r"\b(backend|platform\(\))\s*(==|!=|in)\s|\"(tpu|gpu)\"|DEVICE_QR"
    for path in [*(root / "_results").glob("*.py"), root / "_driver" / "after_loop.py"]:
        assert not re.findall(named, path.read_text()), path.name


def test_the_refill_weighs_one_evaluation_against_a_step():
    """The refill starts a row with one evaluation: a quarter of L-BFGS's step (its
    line search's trials, ``evaluations_per_step`` 4), one step of the others."""
    assert machine.schedule(LBFGS, None, "cpu").refill_cost == 0.25
    assert machine.schedule(LM, None, "cpu").refill_cost == 1.0
    assert machine.schedule(fixedopt.GradientDescent(), None, "cpu").refill_cost == 1.0


def test_the_lanes_asked_for_are_kept_within_the_batch():
    schedule = machine.schedule(LM, 24, "cpu")
    assert schedule.width(100, 10**9) == 24 and schedule.width(10, 1) == 10
    assert machine.schedule(LM, None, "cpu").width(10**6, 1) == backends.CPU.most_lanes


def test_a_schedule_is_static_and_one_per_solve(monkeypatch):
    """Hashable (a jit's static argument), made once per call, in engine.run."""
    made = []
    real = machine.schedule
    monkeypatch.setattr(machine, "schedule", lambda *a, **k: made.append(a) or real(*a, **k))
    hash(real(LM, None, "cpu"))
    x0, fixed = jnp.zeros((20, 3)), jnp.zeros((20, 3), bool)
    fixedopt.minimize(lambda x: jnp.sum((x - 1.0) ** 2), x0, fixed, batched=True)
    assert len(made) == 1 and made[0][2] == jax.default_backend()
    assert engine.compiled_programs() >= 1


def test_the_solver_contract_mentions_no_scheduling():
    """A solver's author writes mathematics: the contract has no scheduling hook (a
    refill's cost, rows started by the step, a schedule; issue 60)."""
    root = pathlib.Path(fixedopt.__file__).parent
    contract = (root / "_contract" / "solver.py").read_text()
    words = r"\b(refill_cost|starts_in_step|context\.starting|[Ss]chedul\w*|block_rows)\b"
    code = "\n".join(line for line in contract.splitlines()
                     if "fixedopt._driver.machine" not in line)  # fmt: skip
    assert re.findall(words, code) == []
    fields = {f.name for f in dataclasses.fields(fixedopt.LBFGS)}
    assert not {"refill_cost", "starts_in_step"} & (fields | set(vars(fixedopt.Solver)))
    assert fixedopt.StepContext._fields == ("active", "iteration")


def test_the_kernels_thresholds_live_in_the_machine_profile():
    """The numbers that choose XLA:CPU's kernels (where reductions fold, where the small
    solves and the normal sums take their elementwise paths) are the profile's, given to
    the trace (``fixedopt._numerics.kernels``); the modules they shape hold none."""
    for module in (reduce, small_linalg):
        constants = [name for name, value in vars(module).items()
                     if name.isupper() and isinstance(value, int)]  # fmt: skip
        assert constants == [], module.__name__
    assert all(backends.CPU.kernels) and backends.CPU.ynn_entries  # every CPU kernel on
    gpu = backends.GPU.kernels
    assert not (gpu.fold or gpu.roll_above or gpu.summed_n) and gpu.small_n
    assert kernels.current() == kernels.PLAIN  # outside a solve: none
