"""A digest of every output leaf of ``benchmarks.first_call``'s cases (smaller
batches), float64 but the spot: ``python hash_cases.py`` with ``PYTHONPATH`` the tree."""

import hashlib

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
from benchmarks import first_call_cases as fc  # noqa: E402

SIZES = {"spectra_slow": 300, "models": 300, "spot": 20000, "quad64": 2048}
for case, batch in SIZES.items():
    out = fc.BUILDERS[case](batch)["call"]()
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(out):
        try:
            digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
        except Exception:
            digest.update(repr(leaf).encode())
    print(case, digest.hexdigest()[:16], flush=True)
