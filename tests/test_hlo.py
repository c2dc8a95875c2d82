"""The compiled programs: no per-row copy of a shared constant; no two LAPACK
factorizations that could run (and deadlock) side by side; no LAPACK call or dot in
the least-squares step of a small problem."""

import re

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fixedopt
from fixedopt.testing import lapack_solves

BATCH, N = 16, 24
_rng = np.random.default_rng(0)
_factor = _rng.normal(size=(N, N))
SHARED_MATRIX = jnp.asarray(_factor @ _factor.T / N + np.eye(N))  # one SPD matrix


def dense_quadratic(x, target):
    return 0.5 * x @ SHARED_MATRIX @ x - target @ x


# Least squares is left out on purpose: Gauss-Newton and Levenberg-Marquardt form a
# per-row n x n normal matrix J^T J by design.
@pytest.mark.parametrize(
    "solver",
    [fixedopt.LBFGS(), fixedopt.GradientDescent(), fixedopt.Optax(optax.adam(0.1))],
    ids=lambda solver: type(solver).__name__,
)
def test_no_per_row_copy_of_a_shared_matrix(solver):
    x0 = jnp.zeros((BATCH, N))
    fixed = jnp.asarray(_rng.random((BATCH, N)) < 0.3)
    target = jnp.asarray(_rng.normal(size=(BATCH, N)))

    def batched_solve(x0, fixed, target):
        return fixedopt.minimize(
            dense_quadratic, x0, fixed, args=(target,), batched=True, solver=solver
        ).x

    hlo = jax.jit(batched_solve).lower(x0, fixed, target).compile().as_text()
    per_row_copies = re.findall(rf"\[{BATCH},{N},{N}\]", hlo)
    assert per_row_copies == [], f"found {len(per_row_copies)} arrays of shape (B, n, n)"
    # The matrix itself is in the program, once, as an (n, n) array.
    assert re.search(rf"\[{N},{N}\]", hlo)


def test_levenberg_marquardt_factors_its_two_systems_in_one_lapack_call():
    """The damped step and the undamped step of the xtol test are factored in ONE
    batched Cholesky: two independent LAPACK calls in one loop body can deadlock
    jaxlib's CPU thread pool (each blocks in ParallelBatchMap waiting for pool threads
    the other holds; it hung a 2-core machine). One factorization, then its two
    dependent triangular solves. (Free blocks above ``Kernels.small_n`` take this path; the
    threshold is lowered so that the program stays small.)"""
    t = jnp.linspace(0.0, 1.0, 20)

    def residuals(p, y):
        return p[0] * jnp.exp(-p[1] * t) + p[2] - y

    def solve(x0, y):
        return fixedopt.least_squares(residuals, x0, jnp.zeros((8, 3), bool), args=(y,),
                                      batched=True)  # fmt: skip

    with lapack_solves():
        hlo = jax.jit(solve).lower(jnp.ones((8, 3)), jnp.ones((8, 20))).compile().as_text()
    targets = re.findall(r'custom_call_target="([^"]+)"', hlo)
    assert sum("potrf" in target for target in targets) == 1, targets


@pytest.mark.parametrize("solver", [fixedopt.LevenbergMarquardt(), fixedopt.GaussNewton()],
                         ids=lambda solver: type(solver).__name__)  # fmt: skip
def test_a_small_least_squares_step_has_no_lapack_call_and_no_dot(solver):
    """Gpufit's 2D Gaussian (25 pixels, 5 parameters): the normal matrix, the
    gradient, the model's products and both Cholesky solves are elementwise
    arithmetic, which XLA fuses; a LAPACK custom call or a batched dot per tiny
    system could not fuse (and XLA:CPU runs a batch of tiny dots ~10x slower)."""
    grid = jnp.arange(5.0)
    x, y = jnp.repeat(grid, 5), jnp.tile(grid, 5)

    def residuals(p, data):
        return p[0] * jnp.exp(-((x - p[1]) ** 2 + (y - p[2]) ** 2) / (2 * p[3] ** 2)) + p[4] - data

    def solve(x0, data):
        return fixedopt.least_squares(residuals, x0, jnp.zeros((8, 5), bool), args=(data,),
                                      batched=True, solver=solver).x  # fmt: skip

    x0, data = jnp.ones((8, 5), jnp.float32), jnp.ones((8, 25), jnp.float32)
    hlo = jax.jit(solve).lower(x0, data).compile().as_text()
    assert re.findall(r'custom_call_target="([^"]+)"', hlo) == []
    assert re.findall(r" dot\(", hlo) == []


def _operands(hlo: str) -> dict[str, list[str]]:
    """Each instruction of the program's computations and the instructions it reads."""
    graph = {}
    for line in hlo.splitlines():
        match = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = .*?[\w\-]+\((.*)", line)
        if match:
            graph[match[1]] = re.findall(r"%([\w.\-]+)", match[2])
    return graph


def _depends_on(graph: dict[str, list[str]], name: str, ancestor: str) -> bool:
    seen, stack = set(), [name]
    while stack:
        node = stack.pop()
        if node == ancestor:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(graph.get(node, []))
    return False


def test_covariance_runs_its_qr_after_its_svd():
    """``fixedopt.covariance`` calls LAPACK twice (an SVD for the rank, a QR for the
    inverse); the QR's input must depend on the SVD's output, so XLA's CPU runtime runs
    them one after the other (side by side, jaxlib 0.10's kernels deadlocked)."""
    t = jnp.linspace(0.0, 1.0, 20)

    def residuals(p, y):
        return p[0] * jnp.exp(-p[1] * t) + p[2] - y

    x = jnp.ones((8, 3))
    fixed = jnp.zeros((8, 3), bool).at[:, 2].set(True)

    def cov(x, y):
        return fixedopt.covariance(x, residuals, fixed, args=(y,), batched=True).covariance

    hlo = jax.jit(cov).lower(x, jnp.zeros((8, 20))).compile().as_text()
    calls = dict(re.findall(r"%([\w.\-]+) = .*custom_call_target=\"lapack_\w?(\w+?)_ffi\"", hlo))
    svd = [name for name, target in calls.items() if target.startswith("gesdd")]
    qr = [name for name, target in calls.items() if target.startswith("geqrf")]
    assert len(svd) == 1 and len(qr) == 1, calls
    assert _depends_on(_operands(hlo), qr[0], svd[0])


def _while_carry_sizes(jaxpr) -> list[int]:
    """The number of carried values of every ``while`` in ``jaxpr``, nested ones too."""
    sizes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while":
            sizes.append(len(eqn.outvars))
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            sizes += _while_carry_sizes(sub)
    return sizes


@pytest.mark.parametrize("lanes", [4, None], ids=["lanes", "whole-batch"])
def test_an_implicit_derivative_differentiates_no_iteration(lanes):
    """Under ``differentiate="implicit"`` (the default) the loop runs on stopped inputs:
    a forward-mode derivative adds the implicit solve after it, and no tangent goes
    round the loop (once the lanes carried their rows' data with its tangents, and
    XLA compiled a jvp of the whole loop body: 1.6x the compile time of a jacfwd)."""
    x0, fixed = jnp.zeros((8, 5)), jnp.asarray(_rng.random((8, 5)) < 0.3)
    target = jnp.asarray(_rng.normal(size=(8, 5)))

    def x_of(target, upper):
        return fixedopt.minimize(lambda x, t: jnp.sum((x - t) ** 2), x0, fixed, args=(target,),
                                 batched=True, bounds=(-1.5, upper), lanes=lanes).x  # fmt: skip

    upper = jnp.asarray(1.0)
    plain = _while_carry_sizes(jax.make_jaxpr(x_of)(target, upper).jaxpr)
    tangent = jax.make_jaxpr(lambda t, u: jax.jvp(x_of, (t, u), (t, u)))(target, upper)
    # The same loops with the same carries; the implicit solve may add a loop of its own.
    assert _while_carry_sizes(tangent.jaxpr)[: len(plain)] == plain
