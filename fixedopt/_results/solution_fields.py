"""The fields of a :class:`fixedopt.Solution`, without its methods: the modules that read
a solve (covariances, records, the report) name this type, so that ``Solution``, whose
``summary`` calls the report, stands above them all."""

from __future__ import annotations

from typing import NamedTuple

import jax

from fixedopt._inputs.validate import Bounds, PyTree


class SolutionFields(NamedTuple):
    """What a solve returns, field by field: see :class:`fixedopt.Solution`."""

    x: PyTree
    value: jax.Array
    grad_norm: jax.Array
    steps: jax.Array
    converged: jax.Array
    status: jax.Array
    reason: jax.Array
    fixed: PyTree
    bounds: Bounds | None
    at_bound: PyTree
    normal: jax.Array | None = None
