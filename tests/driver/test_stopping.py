"""The stopping rules' derived tolerances (``fixedopt._driver.loop.Stopping``): made by
NumPy for rules on the host, by ``jax.numpy`` for traced ones, the same bits, and each
test's ``measure <= tolerance`` the test it stands for."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt._entry.describe import stopping_rules

TOLERANCES = [0.0, -1.0, float("nan"), float("inf"), 1e-3, 1e-20, None]
MEASURES = [0.0, 1e-30, 1e-20, 1e-9, 1e-3, 0.5, float("inf"), float("nan")]


def _bits(rules):
    return [np.asarray(leaf).tobytes() for leaf in jax.tree.leaves(rules)]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["float32", "float64"])
def test_rules_on_the_host_and_traced_are_the_same_bits(dtype):
    triples = [*list(itertools.product(TOLERANCES[:-1], repeat=3))[::7], (None, None, None)]

    @jax.jit
    def traced(gtol, ftol, xtol):
        return stopping_rules((gtol, ftol, xtol, 0.0), 20, dtype)

    eps = float(jnp.finfo(dtype).eps)
    defaults = (np.sqrt(eps), eps, np.sqrt(eps))  # stopping_rules' own gtol, ftol, xtol
    for triple in triples:
        host = stopping_rules((*triple, 0.0), 20, dtype)
        given = [
            jnp.asarray(default if tol is None else tol, dtype)
            for tol, default in zip(triple, defaults)
        ]
        assert _bits(host) == _bits(traced(*given)), triple


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("loose", [False, True], ids=["strict", "loose"])
def test_a_test_is_its_measure_against_its_tolerance(dtype, loose):
    """``measure <= tolerance`` holds exactly where the test did before the tolerances
    were derived on the host: ``(tol > 0) & (measure <= tol)``, ``tol`` raised to
    ``precision`` for the loose test; a tolerance of 0 (or NaN) turns it off."""
    for tol in TOLERANCES[:-1]:
        rules = stopping_rules((tol, tol, tol, 0.0), 20, dtype)
        derived = (rules.loose if loose else rules.strict).gtol
        raised = np.maximum(np.asarray(tol, dtype), np.asarray(rules.precision)) if loose else tol
        raised = np.asarray(raised, dtype)
        for measure in np.asarray(MEASURES, dtype):
            before = bool((raised > 0) & (measure <= raised))
            assert bool(measure <= np.asarray(derived)) == before, (tol, measure)
    assert np.asarray(rules.precision_squared) == np.asarray(rules.precision) ** 2
