"""fixedopt._objective.host_callback: a function JAX cannot trace, called on the host
through ``jax.pure_callback``: batches in one host call (shared operands not copied
per problem), nested ``vmap``, a trial that leaves no state on the function, the last
call's answer reused, derivatives by finite differences against JAX's exact ones."""

import jax
import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose, assert_array_equal

from fixedopt._objective import host_callback
from fixedopt._objective.host_callback import HostCall, tracing_error

X = np.linspace(0.0, 2.0, 7)


def curve(x, p):
    return p[0] * np.exp(-p[1] * x)


def exact(x, p):
    return p[0] * jnp.exp(-p[1] * x)


def test_a_batch_is_one_host_call_with_the_shared_operand_not_repeated(monkeypatch):
    seen = []
    each = host_callback._each

    def counted(one, leaves, core, p, shape, dtype):
        seen.append((np.shape(leaves[0]), np.shape(p)))
        return each(one, leaves, core, p, shape, dtype)

    monkeypatch.setattr(host_callback, "_each", counted)
    call = HostCall(curve)
    ps = jnp.array([[1.0, 0.5], [2.0, 1.5], [3.0, -0.2]])
    out = jax.jit(jax.vmap(call, in_axes=(None, 0)))(X, ps)
    assert_allclose(out, jax.vmap(exact, in_axes=(None, 0))(X, ps), rtol=1e-15)
    assert seen == [((1, 7), (3, 2))]  # one call; x shared: a leading axis of 1


def test_nested_vmap_and_per_problem_x():
    call = HostCall(curve)
    ps = jnp.arange(12.0).reshape(2, 3, 2) / 10
    xs = jnp.stack([X, 2 * X])
    inner = jax.vmap(call, in_axes=(None, 0))
    out = jax.vmap(inner, in_axes=(0, 0))(xs, ps)
    expected = jax.vmap(jax.vmap(exact, in_axes=(None, 0)), in_axes=(0, 0))(xs, ps)
    assert_allclose(out, expected, rtol=1e-15)


def test_the_jacobian_is_scipys_two_point_difference():
    p = jnp.array([1.5, 0.7])
    got = jax.jacfwd(lambda p: HostCall(curve)(X, p))(p)
    assert_allclose(got, jax.jacfwd(lambda p: exact(X, p))(p), rtol=2e-7, atol=1e-8)
    central = jax.jacrev(lambda p: HostCall(curve, scheme="3-point")(X, p))(p)
    assert_allclose(central, jax.jacfwd(lambda p: exact(X, p))(p), rtol=1e-9, atol=1e-11)


def test_a_repeated_call_is_answered_from_the_last():
    calls = []

    def counted(x, p):
        calls.append(np.array(p))
        return curve(x, p)

    call = HostCall(counted)
    p = jnp.array([1.0, 2.0])
    first = call(X, p)
    again = call(X, p)
    assert_array_equal(first, again)
    assert len(calls) == 2  # the probe of the output's shape, and the first evaluation
    assert not np.array_equal(calls[0], calls[1])  # the probe at ones, then p


def test_a_trial_leaves_no_state_on_the_function():
    def keeps(x, p):
        assert keeps.last is None or bool(keeps.last[0] != p[0])
        keeps.last = p
        return x * p[0]

    keeps.last = None
    error = tracing_error([(keeps, (X, np.ones(1)))], [keeps])
    assert isinstance(error, jax.errors.TracerBoolConversionError)
    assert keeps.last is None
    assert tracing_error([(exact, (X, np.ones(2)))], [exact]) is None
