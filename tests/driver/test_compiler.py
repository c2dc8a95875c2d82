"""The XLA options of fixedopt's compiled solves: least squares on the CPU, at the top
level only.

A least-squares solve called on its own is compiled with
``fixedopt.compiler_options(solver)``; one called inside a transformation (``jit``,
``vmap``, ``grad``, ``scan``) must run without them (``jax.jit`` refuses options on a
nested program) and give the same answer to rounding. ``minimize``'s solvers keep
XLA's defaults (they run slower with the options), and so does a jaxlib that does not
know the options.
"""

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import compiler, engine
from fixedopt._numerics import backends, cpu_compiler, trace_state

ON_CPU = jax.default_backend() == "cpu"
# The options exist in jaxlib 0.10; jaxlib 0.11 refuses them (no elemental emitter to
# choose), and a solve there compiles with XLA's defaults (the last tests below).
TAKES_OPTIONS = ON_CPU and cpu_compiler.accepted()
NO_OPTIONS = "the options are the CPU's, and this jaxlib must take them"
X0 = jnp.zeros((4, 3))
FIXED = jnp.eye(4, 3, dtype=bool)
LM = fixedopt.LevenbergMarquardt()


def residuals(x, target):
    return jnp.concatenate([x - target, 0.3 * jnp.exp(0.5 * x)])


def solve(target):
    return fixedopt.least_squares(residuals, X0, FIXED, args=(target,), batched=True).x


def programs() -> tuple[int, int]:
    """(with the options, without): programs compiled so far."""
    return engine._compiled_for_cpu._cache_size(), engine._compiled._cache_size()


@pytest.fixture
def fresh():
    engine.clear_compiled()
    yield
    engine.clear_compiled()


@pytest.mark.skipif(not TAKES_OPTIONS, reason=NO_OPTIONS)
def test_a_solve_called_on_its_own_compiles_with_the_cpu_options(fresh):
    target = jnp.ones((4, 3))
    alone = solve(target)
    assert programs() == (1, 0)
    assert fixedopt.compiler_options(LM) == cpu_compiler.CPU_OPTIONS
    assert fixedopt.compiler_options(fixedopt.GaussNewton()) == cpu_compiler.CPU_OPTIONS
    np.testing.assert_array_equal(alone[FIXED], 0.0)


# Whether each jaxlib series seen takes the options: 0.10.2 here, 0.11.2 in a Python 3.12
# venv (the H200's image); other series are not known.
TAKES_BY_SERIES = {(0, 10): True, (0, 11): False}
SERIES = tuple(int(part) for part in jaxlib.__version__.split(".")[:2])


@pytest.mark.skipif(not ON_CPU or SERIES not in TAKES_BY_SERIES, reason="a CPU, a known jaxlib")
def test_the_jaxlib_that_has_the_options_takes_them():
    """So that the tests of the options skip only where the jaxlib has none to take."""
    assert cpu_compiler.accepted() == TAKES_BY_SERIES[SERIES], jaxlib.__version__


def test_minimize_keeps_xlas_defaults(fresh):
    fun = lambda x, t: jnp.sum((x - t) ** 2)
    fixedopt.minimize(fun, X0, FIXED, args=(jnp.ones((4, 3)),), batched=True)
    assert programs() == (0, 1)
    for solver in (fixedopt.LBFGS(), fixedopt.GradientDescent()):
        assert fixedopt.compiler_options(solver) == {}


@pytest.mark.skipif(not TAKES_OPTIONS, reason=NO_OPTIONS)
@pytest.mark.parametrize("around", ["jit", "vmap", "grad", "scan"])
def test_a_solve_inside_a_transformation_compiles_without_them(fresh, around):
    target = jnp.ones((4, 3))
    alone = solve(target)
    seen = []

    def watched(t):
        seen.append(compiler.takes_options(LM, "cpu"))
        return solve(t)

    if around == "jit":
        inside = jax.jit(watched)(target)
    elif around == "vmap":
        inside = jax.vmap(watched)(target[None])[0]
    elif around == "grad":
        gradient, inside = jax.grad(lambda t: (jnp.sum(watched(t)), solve(t)), has_aux=True)(target)
        assert np.all(np.isfinite(gradient)) and np.all(np.asarray(gradient)[FIXED] == 0.0)
    else:
        inside = jax.lax.scan(lambda c, t: (c, watched(t)), 0.0, target[None])[1][0]
    assert seen and not any(seen)
    assert programs()[0] == 1  # the solve alone's program only
    np.testing.assert_allclose(inside, alone, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(inside)[FIXED], 0.0)


@pytest.mark.skipif(not TAKES_OPTIONS, reason=NO_OPTIONS)
def test_a_jit_of_ones_own_takes_the_options_and_compiles(fresh):
    fast = jax.jit(solve, compiler_options=fixedopt.compiler_options(LM))
    np.testing.assert_allclose(fast(jnp.ones((4, 3))), solve(jnp.ones((4, 3))), rtol=1e-6)


def test_other_backends_keep_xlas_defaults():
    for backend in ("gpu", "cuda", "rocm", "tpu"):
        assert fixedopt.compiler_options(LM, backend) == {}
        assert not compiler.takes_options(LM, backend)


def test_the_default_backend_is_where_a_call_runs(monkeypatch):
    """Without ``backend``, the options are those of the platform a call runs on
    (``jax.default_device``'s where one is set: a TPU's host may run a fit on its CPU)."""
    monkeypatch.setattr(backends, "platform", lambda: "tpu")
    assert fixedopt.compiler_options(LM) == {}
    monkeypatch.setattr(backends, "platform", lambda: "cpu")
    assert fixedopt.compiler_options(LM) == fixedopt.compiler_options(LM, "cpu")


def test_a_jaxlib_that_refuses_the_options_gets_the_defaults(monkeypatch, fresh):
    monkeypatch.setattr(cpu_compiler, "CPU_OPTIONS", {"xla_cpu_no_such_option": True})
    assert fixedopt.compiler_options(LM, "cpu") == {}
    assert not compiler.takes_options(LM, "cpu")
    solve(jnp.ones((4, 3)))
    assert programs() == (0, 1)


@pytest.mark.skipif(not TAKES_OPTIONS, reason=NO_OPTIONS)
def test_the_top_level_is_known_when_first_asked_inside_a_jit(monkeypatch):
    """As when fixedopt is imported inside a ``jit``: the state of the top level is
    still the top level's, so a solve there is not given options jit would refuse."""
    monkeypatch.setattr(trace_state, "_top_level_state", trace_state._top_level_state.__wrapped__)
    inside = jax.jit(lambda t: (seen.append(compiler.takes_options(LM, "cpu")), solve(t))[1])
    seen: list[bool] = []
    inside(jnp.ones((4, 3)))
    assert seen == [False] and compiler.takes_options(LM, "cpu")


@pytest.mark.skipif(not TAKES_OPTIONS, reason=NO_OPTIONS)
def test_new_masks_and_fixed_values_reuse_the_program_with_options(fresh):
    rng = np.random.default_rng(3)
    target = jnp.asarray(rng.normal(size=(4, 3)))
    for k in range(3):
        fixed = jnp.asarray(rng.random((4, 3)) < 0.5)
        values = jnp.asarray(rng.normal(size=(4, 3)))
        x = fixedopt.least_squares(
            residuals, X0, fixed, fixed_values=values, args=(target,), batched=True
        ).x
        assert programs() == (1, 0), k
        bits = lambda a: np.asarray(a).view(np.uint64 if a.dtype.itemsize == 8 else np.uint32)
        np.testing.assert_array_equal(bits(x)[np.asarray(fixed)], bits(values)[np.asarray(fixed)])


def test_compiler_options_names_a_wrong_solver():
    with pytest.raises(TypeError, match="`solver` must be a fixedopt solver"):
        fixedopt.compiler_options("LevenbergMarquardt")


@pytest.mark.skipif(not TAKES_OPTIONS, reason=NO_OPTIONS)
def test_a_covariance_called_on_its_own_compiles_with_the_cpu_options():
    """A fit's covariance too (0.6x the compile, as fast); inside a ``jit`` of one's
    own it compiles with the caller's options, and agrees to rounding."""
    from fixedopt._results import covariance as module

    target = jnp.full((4, 3), 0.5)
    residual = lambda x, target: residuals(x, target) * 1.5  # a new function: new programs
    solution = fixedopt.least_squares(residual, X0, FIXED, args=(target,), batched=True)
    counts = lambda: (module._compiled.tuned._cache_size(), module._compiled.plain._cache_size())
    before = counts()
    alone = fixedopt.covariance(solution, residual, args=(target,)).covariance
    assert counts() == (before[0] + 1, before[1])
    nested = jax.jit(lambda s: fixedopt.covariance(s, residual, args=(target,)).covariance)
    inside = nested(solution)  # traced into the caller's program (options there: an error)
    assert counts() == (before[0] + 1, before[1])
    np.testing.assert_allclose(alone, inside, rtol=1e-12, atol=1e-15)
