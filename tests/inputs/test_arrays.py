"""Arrays from the caller's data without a program: the same arrays as ``jax.numpy``'s
(values, dtype, weak type), nothing lowered, and a fit that lowers only its solve and
its covariance."""

import contextlib
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import monitoring

import fixedopt
from fixedopt._inputs import arrays
from fixedopt._numerics import cpu_compiler


@contextlib.contextmanager
def lowered_programs():
    """The names of the programs JAX lowers inside the block, in this thread (a program
    served by the persistent cache is lowered too: its key is the lowered module; a CPU
    block's tail is lowered in fixedopt's own thread, maybe for an earlier test's solve)."""
    names: list[str] = []
    here = threading.current_thread()

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration" and (
            threading.current_thread() is here
        ):
            names.append(str(kwargs.get("fun_name", "?")))

    monitoring.register_event_duration_secs_listener(listen)
    try:
        yield names
    finally:
        monitoring.unregister_event_duration_listener(listen)


HOST_VALUES = [
    np.arange(12.0).reshape(3, 4),
    np.arange(5, dtype=np.int64),
    np.array([True, False]),
    [1.0, 2.5],
    [[1, 2], [3, 4]],
    np.float32(1.5),
    2.0,
    3,
    True,
]


@pytest.mark.parametrize("dtype", [None, jnp.float32, jnp.float64, jnp.int32])
@pytest.mark.parametrize("value", HOST_VALUES, ids=lambda v: type(v).__name__)
def test_asarray_gives_jax_numpys_array(value, dtype):
    expected = jnp.asarray(value, dtype)
    actual = arrays.asarray(value, dtype)
    assert (actual.dtype, actual.weak_type, actual.shape) == (
        expected.dtype,
        expected.weak_type,
        expected.shape,
    )
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("dtype", [None, jnp.float32])
@pytest.mark.parametrize("value", HOST_VALUES[:5], ids=lambda v: type(v).__name__)
def test_asarray_follows_jax_numpy_without_x64(value, dtype):
    """With 64-bit mode off (JAX's default) float64 and int64 data become 32-bit, as
    there (fixedopt warns of the cast itself: ``PrecisionWarning``)."""
    with jax.enable_x64(False):
        expected, actual = jnp.asarray(value, dtype), arrays.asarray(value, dtype)
        assert (actual.dtype, actual.weak_type) == (expected.dtype, expected.weak_type)
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("value", [True, 0.5, np.array([1.0, 2.0, 3.0]), jnp.arange(3.0)])
def test_broadcast_to_gives_jax_numpys_array(value):
    expected = jnp.broadcast_to(jnp.asarray(value, jnp.float64), (4, 3))
    actual = arrays.broadcast_to(value, (4, 3), jnp.float64)
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def test_host_values_lower_no_program_and_share_no_memory():
    host = np.full((3, 7, 11), 2.0)  # a shape no other test uses
    with lowered_programs() as names:
        made = [arrays.asarray(host), arrays.asarray(host, jnp.float32), arrays.asarray(1.5),
                arrays.broadcast_to(np.ones(11), (3, 7, 11), jnp.int32)]  # fmt: skip
    assert names == []
    host[...] = 0.0  # the caller's array changed afterwards: the copies did not
    assert all(float(jnp.min(array)) > 0 for array in made)


def test_a_first_curve_fit_lowers_only_its_solve_and_its_covariance():
    """Preparing the inputs once lowered a dozen one-operation programs (each compiled
    again in every process): now only the two programs of the fit itself."""
    rng = np.random.default_rng(0)
    x = np.linspace(0.0, 1.0, 23)  # shapes no other test uses
    p = rng.uniform(1.0, 2.0, (5, 3))
    y = p[:, :1] * np.exp(-p[:, 1:2] * x) + p[:, 2:]
    fixed = rng.random((5, 3)) < 0.3

    def decay(x, a, k, c):
        return a * jnp.exp(-k * x) + c

    # The one-time probes of whether this jaxlib takes fixedopt's compiler options (a
    # one-operation `jit(<lambda>)` each, once a process): the solve's and the
    # covariance's. Made here, so that the block counts the fit's own programs whether
    # or not an earlier module in this process made them.
    fixedopt.compiler_options(fixedopt.LevenbergMarquardt())
    cpu_compiler.accepted(cpu_compiler.ROW_WISE_OPTIONS)
    with lowered_programs() as names:
        popt, _ = fixedopt.curve_fit(decay, x, y, np.where(fixed, p, 1.0), fixed=fixed,
                                     batched=True)  # fmt: skip
    # The covariance: from the solver's normal equations (`_rows`, float64, n <= 8) or
    # from the Jacobian at the solution (`_row_covariances`).
    assert set(names) <= {"jit(_solve)", "jit(_rows)", "jit(_row_covariances)"}, names
    np.testing.assert_allclose(popt, p, rtol=1e-6)
