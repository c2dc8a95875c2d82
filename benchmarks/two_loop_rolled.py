"""L-BFGS's two-loop recursion as two ``fori_loop``s (now) against unrolled (before):
compile time (lower + compile) and wall time of whole batched ``minimize`` solves with
the default ``LBFGS()``, compiled once each, interleaved (A B A B ...), median of 7;
mean steps per row. The unrolled recursion is the one fixedopt ran until this change,
kept here as the ablation.

    python -m benchmarks.two_loop_rolled   # writes benchmarks/results/cpu-two-loop-rolled-<date>.md
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import jax
import jax.numpy as jnp

import fixedopt
from benchmarks.certify_cost import measure, write
from fixedopt._solvers import lbfgs

CASES = (("quad", 8, 100_000), ("quad", 16, 10_000), ("quad", 64, 1024), ("quad", 512, 256),
         ("spectra", 10, 1024))  # fmt: skip


def unrolled_two_loop(
    grad, s_history, y_history, rho, newest, gamma, read=lbfgs.plain_read_slot, write=None
):
    """The recursion unrolled over the memory's pairs (fixedopt before this change)."""
    memory = s_history.shape[0]
    newest = jnp.asarray(newest)
    period = jnp.asarray(memory, newest.dtype)
    newest_first = [jax.lax.rem(newest + (memory - j), period) for j in range(memory)]
    pairs = [(read(s_history, i), read(y_history, i), read(rho, i)) for i in newest_first]
    q, alphas = grad, []
    for s, y, rho_i in pairs:
        alpha = rho_i * jnp.dot(s, q)
        q = q - alpha * y
        alphas.append(alpha)
    r = gamma * q
    for (s, y, rho_i), alpha in zip(reversed(pairs), reversed(alphas)):
        r = r + (alpha - rho_i * jnp.dot(y, r)) * s
    return r


@dataclasses.dataclass(frozen=True)
class Unrolled(fixedopt.LBFGS):
    """The default L-BFGS, a class of its own so that minimize compiles it apart."""


@contextlib.contextmanager
def unrolled() -> Iterator[None]:
    rolled, lbfgs.two_loop = lbfgs.two_loop, unrolled_two_loop
    try:
        yield
    finally:
        lbfgs.two_loop = rolled


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    solvers = {"rolled": fixedopt.LBFGS(), "unrolled": Unrolled()}
    rows = [measure(*case, solvers=solvers, contexts={"unrolled": unrolled}) for case in CASES]
    write("cpu-two-loop-rolled", __doc__, rows)


if __name__ == "__main__":
    main()
