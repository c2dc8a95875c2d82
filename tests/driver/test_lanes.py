"""Lanes: a batch runs through a fixed number of lanes that refill as rows stop.

What holds (``fixedopt._driver.lanes``): one compiled loop at any batch size; a row's result
depends only on its own data (bit for bit, whoever its neighbours are, for the same
number of lanes); another number of lanes agrees to rounding; runs are deterministic.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Status
from fixedopt._contract.status import PENDING, RUNNING
from fixedopt._driver.lane_checks import certify_due
from fixedopt._driver.machine import default_width
from fixedopt._numerics.backends import BACKENDS, CPU
from fixedopt.testing import compiled_solves
from tests.helpers import assert_rows_identical, bits, quadratic, quadratic_rows


def batch_with_stragglers(batch=200, n=16, seed=1):
    rng = np.random.default_rng(seed)
    curvature = rng.uniform(1.0, 100.0, (batch, n))
    curvature[:3] *= 1e3  # three badly conditioned rows need many more steps
    x0 = jnp.zeros((batch, n))
    fixed = jnp.asarray(rng.random((batch, n)) < 0.3)
    args = (jnp.asarray(curvature), jnp.asarray(rng.normal(size=(batch, n))))
    return x0, fixed, args


def solve(x0, fixed, args, **options):
    return fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, **options)


def test_default_width():
    """On a CPU, rows that fill half of a core's L2 cache, at least 64; on an
    accelerator, 65536; at most an eighth of the batch but at least 8 rows (at most the
    batch)."""
    assert default_width(10**6, CPU.cache_bytes // 100, "cpu") == 100
    assert default_width(10**6, 1, "cpu") == 4096
    assert default_width(10**6, 10**9, "cpu") == 64  # rows too big for the cache: 64
    assert default_width(256, 10**9, "cpu") == 32  # an eighth of the batch
    assert default_width(10**7, 100, "gpu") == 65536
    assert default_width(1024, 100, "gpu") == 128
    assert default_width(20, 100, "tpu") == 8
    assert default_width(5, 100, "cpu") == 5
    assert default_width(0, 100, "cpu") == 0


def scan_polynomial(p, t):
    """``polyval(p, t)`` by Horner's rule in a ``scan``: a model with a loop."""
    return jax.lax.scan(lambda value, c: (value * t + c, None), jnp.zeros_like(t), p)[0]


@pytest.mark.parametrize(
    ("n", "model", "counted"),
    [(8, jnp.polyval, True), (5, jnp.polyval, False), (5, scan_polynomial, True),
     (5, jax.jit(scan_polynomial), True)],
    ids=["8-columns", "5-columns", "5-columns-scan", "5-columns-jitted-scan"],
)  # fmt: skip
def test_a_least_squares_rows_width_counts_its_jacobian_where_it_sits_in_memory(
    monkeypatch, n, model, counted
):
    """A least-squares step holds each row's residuals and Jacobian (here 300 x n) in
    memory, and they count in the bytes that set the width, unless it sums them as they
    are made (at most 7 columns) from a model without a loop."""
    from fixedopt._driver import machine

    seen = []
    monkeypatch.setattr(machine, "default_width",
                        lambda batch, row_bytes, backend: seen.append(row_bytes) or 8)  # fmt: skip
    t = jnp.linspace(0.0, 1.0, 300)
    residual = lambda p, y: model(p, t) - y
    data = jnp.zeros((40, 300))
    # The width is chosen as the solve is traced: traced here, not compiled nor run.
    jax.eval_shape(lambda x0: fixedopt.least_squares(residual, x0, jnp.zeros((40, n), bool),
                                                     args=(data,), batched=True).x,
                   jnp.ones((40, n)))  # fmt: skip
    jacobian_bytes = 300 * (n + 1) * jnp.zeros(()).dtype.itemsize
    assert seen and (seen[-1] > jacobian_bytes) == counted


@pytest.mark.parametrize(
    ("pending", "running", "due"),
    [(0, 5, False), (3, 5, False), (4, 5, True), (6, 0, True), (1, 0, True), (0, 0, False)],
)
def test_lanes_certify_when_the_slots_fill_or_nothing_else_runs(pending, running, due):
    """4 slots among 16 lanes: fewer waiting lanes wait on while others run (a trip's
    check costs all its slots), and a waiting lane is never left once none runs."""
    stopped = 16 - pending - running
    status = jnp.array([PENDING] * pending + [RUNNING] * running + [Status.CONVERGED] * stopped)
    assert bool(certify_due(status.astype(jnp.int32), 4)) == due


@pytest.mark.parametrize(
    ("solver", "lanes"),
    [(fixedopt.LBFGS(), 1), (fixedopt.LBFGS(), 7), (fixedopt.GradientDescent(), 64)],
    ids=["LBFGS-1", "LBFGS-7", "GradientDescent-64"],
)  # fmt: skip
def test_lanes_agree_with_the_whole_batch_at_once(solver, lanes):
    """Same statuses, x to rounding: ``lanes=200`` runs the whole batch as one vmap,
    other machine code. L-BFGS through lanes of each kind (a row alone, 7 lanes
    refilled many times); gradient descent, another step in the same lanes, through
    64 (each width a program: more widths, for either solver, would add compiles, not
    a guarantee: rows of 16 entries are reduced alike through 7 lanes and 64,
    ``fixedopt._numerics.reduce``).
    The last-bit differences shift the step at which a row crosses its tolerance: by a
    few steps, more where the tests creep toward the tolerance over many steps:
    gradient descent (seen: 87 against 82), and L-BFGS's ill-conditioned stragglers,
    which since L-BFGS has no xtol test stop only on the gradient or reduction tests
    (seen: 48 against 58)."""
    x0, fixed, args = batch_with_stragglers()
    whole = solve(x0, fixed, args, solver=solver, lanes=200)
    laned = solve(x0, fixed, args, solver=solver, lanes=lanes)
    assert int(jnp.max(whole.steps)) > float(jnp.median(whole.steps)) + 10  # stragglers
    np.testing.assert_array_equal(laned.status, whole.status)
    np.testing.assert_allclose(laned.steps, whole.steps, rtol=0.2, atol=3)
    # A row that stops a few steps earlier or later stops elsewhere within its
    # tolerance: after L-BFGS's superlinear last steps that is at rounding level,
    # gradient descent's linear rate leaves ~1e-6 (seen: 3.6e-7).
    close = 1e-9 if isinstance(solver, fixedopt.LBFGS) else 2e-6
    np.testing.assert_allclose(laned.x, whole.x, rtol=close, atol=close)
    np.testing.assert_array_equal(bits(laned.x)[np.asarray(fixed)], bits(x0)[np.asarray(fixed)])


def test_a_row_gets_the_same_bits_whoever_its_neighbours_are():
    """Permute the batch, or solve a subset: with the same number of lanes each row
    gets bit-identical results (the lane it runs in and when it starts differ). These
    rows have n = 16: L-BFGS searches by Hager-Zhang here only by name (its default up
    to n = 10; the other searches and solvers: the next test). The subset, 76 of the 96
    rows, runs in the whole batch's bucket of 128 rows (its program)."""
    x0, fixed, args = batch_with_stragglers(batch=96)
    solver = fixedopt.LBFGS(linesearch="hager-zhang")

    def run(rows):
        picked = (x0[rows], fixed[rows], tuple(a[rows] for a in args))
        return solve(*picked, solver=solver, lanes=8)

    everything = run(np.arange(96))
    before = compiled_solves()
    permutation = np.random.default_rng(0).permutation(96)
    permuted = run(permutation)
    assert_rows_identical(everything, permuted, permutation, err_msg="permuted")
    subset = np.delete(np.arange(96), np.arange(0, 96, 5))
    assert_rows_identical(everything, run(subset), subset, err_msg="subset")
    assert compiled_solves() == before  # the subset's bucket is the batch's


@pytest.mark.parametrize(
    ("solver", "lanes", "other_bucket"),
    [(fixedopt.LBFGS(), 64, True), (fixedopt.LBFGS(), 16, False),
     (fixedopt.LevenbergMarquardt(), 64, False), (fixedopt.LevenbergMarquardt(), 16, False)],
    ids=["LBFGS-64", "LBFGS-16", "LevenbergMarquardt-64", "LevenbergMarquardt-16"],
)  # fmt: skip
def test_a_row_gets_the_same_bits_at_n_64(solver, lanes, other_bucket):
    """As above for rows of n = 64, L-BFGS (backtracking) and Levenberg-Marquardt.
    Through 64 lanes XLA:CPU runs the lanes' reductions as YNNPACK kernels (45 of them
    here; none through 8 lanes), as on the default widths of the benchmarks' problems;
    through 16 lanes fixedopt folds each reduction along a row to 32 entries first
    (``fixedopt._numerics.reduce``: 16 x 64 entries are too few for YNN). The subset
    keeps the lanes full; it runs in the batch's bucket of 256 rows (its program) but
    once, where its 80 rows run in a bucket of 128, another program (as
    ``tests/solvers/test_start.py``'s first rows do, for Levenberg-Marquardt)."""
    x0, fixed, args = batch_with_stragglers(batch=160, n=64)
    call = fixedopt.least_squares if solver.needs_residuals else fixedopt.minimize
    fun = (lambda x, c, t: jnp.sqrt(c) * (x - t)) if solver.needs_residuals else quadratic

    def run(rows):
        picked = (x0[rows], fixed[rows], tuple(a[rows] for a in args))
        return call(fun, *picked[:2], args=picked[2], batched=True, solver=solver, lanes=lanes)

    everything = run(np.arange(160))
    before = compiled_solves()
    permutation = np.random.default_rng(1).permutation(160)
    assert_rows_identical(everything, run(permutation), permutation, err_msg="permuted")
    every_sixth = np.arange(0, 160, 6)
    subset = np.arange(0, 160, 2) if other_bucket else np.delete(np.arange(160), every_sixth)
    assert_rows_identical(everything, run(subset), subset, err_msg="subset")
    assert compiled_solves() == before + other_bucket


def tridiagonal_form(x, diagonal, off, b):
    """``0.5 x @ (A @ x) - b @ x`` with ``A`` given by its diagonals (the benchmarks'
    ``quad``): over rows of 8, 16 at a time, XLA:CPU rounds the last two rows' values
    differently from the others (plain ``jax.vmap`` shows it, without fixedopt)."""
    zero = jnp.zeros(1, x.dtype)
    product = diagonal * x + jnp.concatenate([off * x[1:], zero])
    product = product + jnp.concatenate([zero, off * x[:-1]])
    return 0.5 * jnp.dot(x, product) - jnp.dot(b, x)


@pytest.mark.parametrize(("dtype", "close"), [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_rows_agree_to_rounding_where_xla_rounds_rows_by_position(dtype, close):
    """Where XLA's batched code for the objective rounds rows by their position, a row's
    result agrees to rounding whoever its neighbours are: same statuses, steps within
    one, x to rounding (seen: 40 of 256 rows differ, by 3e-16 in float64; 64 rows by
    4e-7 in float32); fixed entries keep their bits (what ``fixedopt._driver.lanes``
    says holds, for objectives XLA does not compile alike for every row)."""
    rng = np.random.default_rng(0)
    batch, n = 256, 8
    diagonal = rng.uniform(1.0, 10.0, (batch, n))
    args = (diagonal, rng.uniform(-0.5, 0.5, (batch, n - 1)), rng.normal(size=(batch, n)))
    args = tuple(a.astype(dtype) for a in args)
    x0, fixed = np.zeros((batch, n), dtype), rng.random((batch, n)) < 0.2

    def run(rows):
        return fixedopt.minimize(tridiagonal_form, x0[rows], fixed[rows], batched=True,
                                 args=tuple(a[rows] for a in args), lanes=16)  # fmt: skip

    everything = run(np.arange(batch))
    permutation = np.random.default_rng(1).permutation(batch)
    permuted = run(permutation)
    assert permuted.x.dtype == dtype
    np.testing.assert_array_equal(permuted.status, np.asarray(everything.status)[permutation])
    np.testing.assert_allclose(permuted.steps, np.asarray(everything.steps)[permutation], atol=1)
    np.testing.assert_allclose(permuted.x, np.asarray(everything.x)[permutation], rtol=close,
                               atol=close)  # fmt: skip
    np.testing.assert_array_equal(bits(permuted.x)[fixed[permutation]],
                                  bits(x0[permutation])[fixed[permutation]])  # fmt: skip


def test_runs_are_deterministic():
    """200 rows through 7 lanes, refilled many times (the program of
    ``test_lanes_agree_with_the_whole_batch_at_once``: run again, not compiled again)."""
    x0, fixed, args = batch_with_stragglers()
    first = solve(x0, fixed, args, solver=fixedopt.LBFGS(), lanes=7)
    assert_rows_identical(first, solve(x0, fixed, args, solver=fixedopt.LBFGS(), lanes=7))


@pytest.mark.parametrize("lanes", [7, 200], ids=["refilled", "whole-batch"])
def test_rows_carried_on_the_minor_axis_get_the_same_bits(monkeypatch, lanes):
    """A TPU's lanes carry their arrays rows last (``Backend.minor_rows``): the same
    arithmetic, only the carry's layout moves, so a CPU forced to carry them so gives
    the bits it gives rows first, through refilled lanes (taken, put, selected) and
    the whole batch at once. Rows first: the programs of
    ``test_lanes_agree_with_the_whole_batch_at_once``, run again, not compiled again."""
    x0, fixed, args = batch_with_stragglers()
    rows_first = solve(x0, fixed, args, solver=fixedopt.LBFGS(), lanes=lanes)
    monkeypatch.setitem(BACKENDS, "cpu", CPU._replace(minor_rows=True))
    rows_last = solve(x0, fixed, args, solver=fixedopt.LBFGS(), lanes=lanes)
    assert_rows_identical(rows_last, rows_first)
    assert np.all(np.asarray(rows_first.status) == Status.CONVERGED)


def loop_trips(capsys, solution) -> int:
    """The lanes' trips of a solve run with ``progress=1`` (from its report lines)."""
    jax.block_until_ready(solution)
    jax.effects_barrier()
    lines = capsys.readouterr().out.splitlines()
    return max(int(line.split()[2].rstrip(":")) for line in lines
               if line.startswith("fixedopt: step"))  # fmt: skip


def test_a_slow_row_costs_its_own_steps(capsys):
    """The stragglers' steps overlap with the other rows': the loop runs about the
    rows' steps shared among the lanes (plus idle lanes waiting for a refill, ~20%
    here), plus a tail of at most the slowest row's steps, where the lanes run out of
    rows; a whole-batch vmap would run all rows for the slowest row's steps."""
    x0, fixed, args = batch_with_stragglers(batch=400)
    solution = solve(x0, fixed, args, lanes=50, solver=fixedopt.GradientDescent(), progress=1)
    trips = loop_trips(capsys, solution)
    steps = np.asarray(solution.steps)
    assert steps.max() > 4 * np.median(steps)  # the stragglers
    assert np.all(np.asarray(solution.status) == Status.CONVERGED)
    shared = steps.sum() / 50
    assert trips <= 1.3 * shared + steps.max(), (trips, steps.max(), shared)  # seen: 556
    assert trips * 50 < 0.5 * steps.max() * 400  # lane-steps against a whole-batch vmap


def test_a_solver_whose_step_costs_more_than_a_refill_refills_sooner(capsys, monkeypatch):
    """L-BFGS's step counts 4 evaluations (``evaluations_per_step``: a line search's
    trials) against a refill's one: its lanes refill with fewer of them idle
    (``Schedule.refill_cost`` 0.25), so the same rows take fewer trips than at 1 (a
    refill as dear as a step); same bits (this objective compiles alike for every row)."""
    x0, fixed, args = quadratic_rows(size=512, n=8)
    cheap = solve(x0, fixed, args, lanes=64, progress=1)
    cheap_trips = loop_trips(capsys, cheap)
    monkeypatch.setattr(fixedopt.LBFGS, "evaluations_per_step", 1.0)
    jax.clear_caches()  # the rule is read at trace time
    dear = solve(x0, fixed, args, lanes=64, progress=1)
    dear_trips = loop_trips(capsys, dear)
    jax.clear_caches()  # no program with the patched rule outlives the test
    assert cheap_trips < 0.95 * dear_trips, (cheap_trips, dear_trips)  # seen: 72 against 80
    assert_rows_identical(cheap, dear)


def equations(jaxpr):
    """Every equation of ``jaxpr``, outer ones first, then those of its sub-jaxprs."""
    for equation in jaxpr.eqns:
        yield equation
        for param in equation.params.values():
            inner = getattr(param, "jaxpr", param)
            if hasattr(inner, "eqns"):
                yield from equations(inner)


def while_loops(batch: int, **options) -> int:
    """The ``while`` loops in the program of a batched solve (traced, not compiled)."""
    x0, fixed = jnp.zeros((batch, 4)), jnp.zeros((batch, 4), bool)
    center = jnp.ones((batch, 4))

    def solve(x0):
        return fixedopt.minimize(quadratic, x0, fixed, args=(1.0, center), batched=True,
                                 **options).x  # fmt: skip

    return str(jax.make_jaxpr(solve)(x0)).count("while[")


@pytest.mark.parametrize("batch", [1, 100, 5000])
def test_one_loop_at_any_batch_size(batch):
    """As many loops as one problem's solve: its own and the line search's."""
    x0 = jnp.zeros(4)
    one = jax.make_jaxpr(lambda x0: fixedopt.minimize(quadratic, x0, False, args=(1.0, x0)).x)
    assert while_loops(batch) == while_loops(batch, lanes=3) == str(one(x0)).count("while[")


def test_loop_memory_is_that_of_the_lanes():
    """The loop carries per-lane state of ``lanes`` rows and the results of ``B``."""
    x0, fixed = jnp.zeros((4096, 4)), jnp.zeros((4096, 4), bool)
    jaxpr = jax.make_jaxpr(lambda x0: solve(x0, fixed, (1.0, jnp.ones((4096, 4))), lanes=32).x)(x0)
    (loop,) = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "while"][:1]
    # A lanes axis (of 32) or a rows axis (of 4096) in every array: first, or second
    # in the lanes' packed scalars, (leaves, lanes).
    rows = {next(d for d in v.aval.shape if d in (32, 4096)) for v in loop.outvars if v.aval.ndim}
    assert rows == {32, 4096}, [v.aval.shape for v in loop.outvars]
    large = [v.aval for v in loop.outvars if 4096 in v.aval.shape]
    # The results (x, grad, value, ...) only: no solver state of B rows.
    assert sum(np.prod(a.shape) for a in large) <= 4096 * (3 * 4 + 10)


@pytest.mark.parametrize("lanes", [16, 1 << 30])
def test_a_batch_that_fits_its_lanes_is_started_once_and_never_refilled(lanes):
    """With ``lanes >= B`` every row has a lane from the start: no refill (a cond), no
    gather of the rows, no scatter of the results; one loop as for one problem. The
    one cond is L-BFGS's certification of the rows that converge (conjugate gradients on
    their Hessians, a ``scan``: ``fixedopt._driver.lane_checks.certify_some``)."""
    x0, fixed = jnp.zeros((16, 4)), jnp.zeros((16, 4), bool)
    args = (1.0, jnp.ones((16, 4)))
    jaxpr = jax.make_jaxpr(lambda x0: solve(x0, fixed, args, lanes=lanes).x)(x0)
    found = {e.primitive.name for e in equations(jaxpr.jaxpr)}
    assert "while" in found and not found & {"gather", "scatter"}, found
    conds = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "cond"]
    assert len(conds) == 1 and "scan" in str(conds[0].params["branches"]), conds
    assert while_loops(16, lanes=lanes) == while_loops(100)


@pytest.mark.parametrize("size", [0, 1, 3])
def test_tiny_and_empty_batches(size):
    x0, fixed, args = batch_with_stragglers(batch=max(size, 1))
    x0, fixed, args = x0[:size], fixed[:size], tuple(a[:size] for a in args)
    solution = solve(x0, fixed, args, lanes=2)
    assert solution.x.shape == x0.shape
    assert bool(jnp.all(solution.converged))


def test_lanes_is_validated():
    x0, fixed, args = batch_with_stragglers(batch=4)
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="`lanes` must be None or an int >= 1"):
            solve(x0, fixed, args, lanes=bad)
    assert bool(jnp.all(solve(x0, fixed, args, lanes=np.int64(2)).converged))
