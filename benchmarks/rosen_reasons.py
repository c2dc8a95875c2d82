"""A one-off check (docs/decisions.md, "The peers on a TPU with 64-bit mode off"): why
fixedopt's rows at rosen n = 64, float32, report CONVERGED where the float64 check finds
22% of them beyond the tolerance. fixedopt-mask and optax's L-BFGS as ``tpu_peers`` runs
them (64-bit mode off), on the CPU: each row's reason, and the max-norm of the projected
gradient at the returned ``x`` in float32 and float64.

    python -m benchmarks.rosen_reasons   # B = 1,024, ~1 min on a CPU
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.cases import Case, evaluate
from benchmarks.methods import GTOL, METHODS, Settings, as_rows, fixedopt_call, jitted
from benchmarks.tpu_peers import float32_only


def float32_gradient(problem, x: np.ndarray) -> np.ndarray:
    """The max |gradient| over free entries of each row, by ``jax.grad`` in float32."""
    args = [jnp.asarray(a) for a in problem.args]
    grad = jax.vmap(jax.grad(problem.jax_fun))(jnp.asarray(x), *args)
    return np.max(np.where(problem.fixed, 0.0, np.abs(np.asarray(grad))), axis=-1)


def main(batch: int = 1024, n: int = 64) -> None:
    """Print both methods' rows within ``abs_gtol``, and fixedopt's reasons."""
    settings = Settings(GTOL["float32"], 5000)
    with float32_only():
        problem = Case(("rosen",), batch, n, (), "float32").make("rosen")
        call, inputs = fixedopt_call(problem, settings)
        solution = jitted(call)(*inputs)
        optax = METHODS["optax-lbfgs-vmap-mask"](problem, settings)
        for name, rows in (("fixedopt-mask", as_rows(solution)),
                           ("optax", optax.collect(optax.call()))):  # fmt: skip
            g64 = evaluate(problem, rows)[1]
            g32 = float32_gradient(problem, np.asarray(rows.x))
            print(
                f"{name}: within {settings.gtol}: float64 {np.mean(g64 <= settings.gtol):.4f}, "
                f"float32 {np.mean(g32 <= settings.gtol):.4f}; max {np.max(g64):.3g}"
            )
    reasons = np.asarray(solution.reason)
    beyond = float32_gradient(problem, np.asarray(solution.x)) > settings.gtol
    for reason in np.unique(reasons):
        rows = reasons == reason
        print(
            f"fixedopt reason {reason}: {rows.sum()} rows, {np.sum(rows & beyond)} beyond "
            f"abs_gtol, status {np.unique(np.asarray(solution.status)[rows])}"
        )


if __name__ == "__main__":
    main()
