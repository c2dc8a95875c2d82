"""The machine profile's matmul precision (fixedopt._driver.machine): on a TPU or GPU a
solve, and the derivatives traced from it, run their float32 products at "highest"
unless the user chose a precision; a CPU's program is left as it was. Checked on a
CPU-only machine by tracing a solve for a TPU's profile (the platform patched) and
reading the dots' precision in the lowered program."""

import re
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import machine
from fixedopt._numerics import backends
from fixedopt._results import covariance as covariance_module

B, N = 8, 6
_rng = np.random.default_rng(3)
_factor = _rng.normal(size=(N, N))
HESSIAN = jnp.asarray(_factor @ _factor.T / N + np.eye(N), jnp.float32)
T = jnp.linspace(0.0, 1.0, 12, dtype=jnp.float32)


def quartic(x, c):
    return 0.5 * x @ (HESSIAN @ x) - c @ x + 0.1 * jnp.sum(x**4)


def decay(p, y):
    return p[0] * jnp.exp(-p[1] * T) + p[2] * T @ jnp.ones((12, 12), T.dtype) / 12 - y


def inputs(n):
    x0 = jnp.asarray(_rng.uniform(-1, 1, (B, n)), jnp.float32)
    fixed = jnp.asarray(_rng.random((B, n)) < 0.3)
    return x0, fixed


def minimize_x(x0, fixed, c):
    return fixedopt.minimize(quartic, x0, fixed, args=(c,), batched=True, bounds=(-3, 3)).x


def fit_x(x0, fixed, y):
    return fixedopt.least_squares(decay, x0, fixed, args=(y,), batched=True).x


def gradient(x0, fixed, c):
    return jax.grad(lambda c: minimize_x(x0, fixed, c).sum())(c)


JAX_DEFAULT = {"none", "DEFAULT"}
CALLS = {
    "minimize": (minimize_x, N),
    "least_squares": (fit_x, 3),
    "grad through minimize": (gradient, N),
}


def dot_precisions(function, n) -> set[str]:
    """The precisions of the dots in ``function``'s lowered program (``"none"`` where a
    dot has no precision config; ``"DEFAULT"`` is the same, written out)."""
    x0, fixed = inputs(n)
    data = jnp.ones((B, N if n == N else 12), jnp.float32)
    fresh = lambda *a: function(*a)  # a new function: jit's trace cache has no entry for it
    text = jax.jit(fresh).lower(x0, fixed, data).as_text()
    dots = re.findall(r"stablehlo\.dot_general[^\n]*", text)
    assert dots, "no dot in the program: the check would be empty"
    return {m.group(1) if (m := re.search(r"precision = \[(\w+)", d)) else "none" for d in dots}


@pytest.mark.parametrize("call", CALLS)
def test_a_cpu_solve_is_traced_at_jax_default_precision(monkeypatch, call):
    monkeypatch.setattr(backends, "platform", lambda: "cpu")
    assert dot_precisions(*CALLS[call]) <= JAX_DEFAULT


@pytest.mark.parametrize("call", CALLS)
def test_a_tpu_solve_is_traced_at_float32_precision(monkeypatch, call):
    monkeypatch.setattr(backends, "platform", lambda: "tpu")
    assert dot_precisions(*CALLS[call]) == {"HIGHEST"}


def test_the_users_own_precision_is_kept_on_a_tpu(monkeypatch):
    monkeypatch.setattr(backends, "platform", lambda: "tpu")
    with jax.default_matmul_precision("default"):
        assert dot_precisions(*CALLS["minimize"]) <= JAX_DEFAULT
    with jax.default_matmul_precision("bfloat16"):
        assert dot_precisions(*CALLS["grad through minimize"]) <= JAX_DEFAULT


def test_the_policy_by_backend():
    assert machine.matmul_precision("cpu") is None
    for backend in ("tpu", "gpu", "cuda", "rocm"):
        assert machine.matmul_precision(backend) == "highest"
    with jax.default_matmul_precision("highest"):
        assert machine.matmul_precision("tpu") is None  # the user's: nothing entered


def covariance_lowered_ahead(platform: str) -> set[str]:
    """The dots' precisions of the covariance program that ``curve_fit`` and
    ``Model.fit`` lower ahead (``covariance.early_on_device``, in the profile's
    ``machine.covariance_precision``), lowered later outside that context, in another
    thread here (JAX's precision context is a thread's own)."""
    x0, _ = inputs(3)
    with machine.covariance_precision(platform):
        _, lower = covariance_module.early_on_device(
            decay, x0, False, None, (jnp.ones((B, 12), jnp.float32),), None,
            absolute_sigma=False, at_bound="free", pseudo_inverse=True,
        )  # fmt: skip
    lowered = []
    thread = threading.Thread(target=lambda: lowered.append(lower()))
    thread.start()
    thread.join()
    dots = re.findall(r"stablehlo\.dot_general[^\n]*", lowered[0].as_text())
    assert dots, "no dot in the program: the check would be empty"
    return {m.group(1) if (m := re.search(r"precision = \[(\w+)", d)) else "none" for d in dots}


def test_a_covariance_follows_the_solves_precision(monkeypatch):
    """A covariance's programs are traced at the solve's precision (on a TPU "highest":
    its LAPACK path's products at bfloat16 passes missed the CPU's by 9.1e-3 of
    ``sqrt(var_i var_j)``), also the one lowered ahead; a CPU's as
    before; the user's own precision kept. The CPU's rows in one call, as a TPU's (in
    chunks none is lowered ahead)."""
    monkeypatch.setitem(backends.BACKENDS, "cpu", backends.CPU._replace(chunked=False))
    assert covariance_lowered_ahead("tpu") == {"HIGHEST"}
    assert covariance_lowered_ahead("cpu") <= JAX_DEFAULT
    with jax.default_matmul_precision("bfloat16"):
        assert covariance_lowered_ahead("tpu") == {"DEFAULT"}  # the user's, kept


@pytest.mark.parametrize(
    "solver", [fixedopt.LBFGS(), fixedopt.LevenbergMarquardt()], ids=["LBFGS", "LM"]
)
def test_a_cpu_blocks_tail_compiles_with_the_checks_options(solver):
    """A block's tail (at most ``tail_lanes`` rows: its trips are launches) compiles with
    the check's options on the CPU, ``minimize``'s too, whose block keeps XLA's."""
    schedule = machine.schedule(solver, None, "cpu")
    tail = schedule.of_tail()
    assert tail.lanes == schedule.defaults.tail_lanes
    assert tail.compiler_options == schedule.check_options
    assert tail._replace(lanes=None, compiler_options=schedule.compiler_options) == schedule
