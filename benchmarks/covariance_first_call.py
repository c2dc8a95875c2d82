"""A new model's first ``curve_fit`` (float64, 300 decay curves, then a second new model
in the same process): the covariance's part of it, process CPU time, with the solver's
``J^T J`` (A) or the Jacobian evaluated again (B). Run:
``python -m benchmarks.covariance_first_call A`` (then ``B``), each in a fresh process."""

import sys
import time
import warnings

import jax
import jax.numpy as jnp

import benchmarks.covariance_share as share
from fixedopt._results import solver_covariance


def main() -> None:
    solver_covariance.ENABLED = sys.argv[1] == "A"
    solver_covariance.fit_covariance = share._timed_covariance
    case = share.decay_case(300)
    for name in ("first", "second"):
        source = (f"lambda t, a1, tau1, a2, tau2, c: a1 * jnp.exp(-t / tau1)"
                  f" + a2 * jnp.exp(-t / tau2) + c  # {name}")  # fmt: skip
        case["f"] = eval(source, {"jnp": jnp})  # a model of its own
        share._SPENT.clear()
        start = time.process_time()
        jax.block_until_ready(share.ours(case, jnp.float64)())
        total = time.process_time() - start
        spent = share._SPENT[0]
        print(f"{sys.argv[1]} {name} model: curve_fit {total:.2f} s, covariance {spent:.3f} s")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()
