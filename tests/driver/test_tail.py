"""The tail: when a CPU block's queue has ended and its last rows (at most
``TAIL_LANES``) have run alone for ``TAIL_PATIENCE`` trips, the block stops and they are
solved again through ``TAIL_LANES`` lanes (``fixedopt._driver.batching``), a program
compiled in a thread while a model's first block compiles (``fixedopt._driver.ahead``).
What holds: the other rows keep their bits; a row solved again agrees to rounding with
the same row solved alone, takes its own steps (``max_steps`` holds); fixed entries
keep their bits; nothing else compiles; the call that first has a tail traces no tail
program in its own thread, and its rows are those of a tail program compiled there."""

import contextlib
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Status
from fixedopt._driver import engine
from fixedopt._numerics.backends import CPU
from fixedopt.testing import compiled_solves, no_compiles_ahead, wait_for_compiles_ahead
from tests.helpers import (
    assert_rows_identical,
    bits,
    persistent_cache,
    quadratic,
    quadratic_rows,
)

TAIL_LANES, TAIL_PATIENCE = CPU.tail_lanes, CPU.tail_patience
pytestmark = pytest.mark.compiles_ahead  # the tail as a user's call has it (conftest.py)

SLOW = 199  # the last row of the queue: it runs alone once the others have stopped


def valley(x):
    """Rosenbrock's valley 100 times steeper: L-BFGS needs about 30 steps from -3."""
    return jnp.sum(1e4 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def rows(slow: bool, seed: int = 1):
    """200 rows of :func:`tests.helpers.quadratic` (5-12 steps each), the last one
    :func:`valley` from -3 (``slow``) with one entry fixed at 1."""
    x0, fixed, (curvature, center) = quadratic_rows(200, 8, seed)
    weight, x0, fixed = np.zeros(200), np.asarray(x0).copy(), np.asarray(fixed).copy()
    if slow:
        weight[SLOW], x0[SLOW], fixed[SLOW] = 1.0, -3.0, False
        x0[SLOW, 3], fixed[SLOW, 3] = 1.0, True
    return x0, fixed, (curvature, center, jnp.asarray(weight))


def walled_valley(x, curvature, center, weight, walled):
    """The quadratic of a row of :func:`rows`, or (``weight``) the valley, NaN beyond
    ``x[-1] > 0.9`` where ``walled`` (the valley's floor is at ``x[-1] = 1``)."""
    nan = jnp.where(walled * x[-1] > 0.9, jnp.nan, 0.0)
    return (1 - weight) * quadratic(x, curvature, center) + weight * (valley(x) + nan)


def solve_walled(x0, fixed, args, batched=True, **options):
    """A solve of :func:`walled_valley`: its programs compile in this module's first
    test, and the next runs them again."""
    return fixedopt.minimize(walled_valley, x0, fixed, args=args, batched=batched, **options)


def unwalled(rows):
    x0, fixed, args = rows
    return x0, fixed, (*args, jnp.zeros(200))


def test_a_slow_last_row_finishes_in_the_tail():
    before = compiled_solves()
    clean = solve_walled(*unwalled(rows(slow=False)))
    assert compiled_solves() == before + 1
    x0, fixed, args = unwalled(rows(slow=True))
    tailed = solve_walled(x0, fixed, args)
    assert compiled_solves() == before + 2, "the tail's program: called now"
    assert int(tailed.steps[SLOW]) > 2 * int(np.max(clean.steps)), "not a straggler"
    # Solved again: the slow row, and perhaps one more (still running when the block
    # stopped); the rest keep their bits.
    changed = np.any(bits(tailed.x)[:SLOW] != bits(clean.x)[:SLOW], axis=1)
    again = np.flatnonzero(changed)
    assert len(again) <= TAIL_LANES - 1
    others = np.setdiff1d(np.arange(SLOW), again)
    reference = jax.tree.map(lambda leaf: np.asarray(leaf)[others], clean)
    assert_rows_identical(tailed, reference, others, err_msg="a row beside the tail")
    np.testing.assert_allclose(np.asarray(tailed.x)[again], np.asarray(clean.x)[again],
                               rtol=1e-10, atol=1e-12)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(tailed.status)[again], np.asarray(clean.status)[again])

    alone = solve_walled(x0[SLOW], fixed[SLOW], tuple(a[SLOW] for a in args), batched=False)
    assert int(tailed.status[SLOW]) == int(alone.status) == Status.CONVERGED
    np.testing.assert_allclose(tailed.x[SLOW], alone.x, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(bits(tailed.x)[fixed], bits(x0)[fixed])

    _, fixed_again, args_again = unwalled(rows(slow=True, seed=2))  # new data and masks
    before = compiled_solves()
    limited = solve_walled(x0, fixed_again, args_again, max_steps=25)
    assert compiled_solves() == before, "new data or max_steps compiled a program"
    assert int(limited.status[SLOW]) == Status.MAX_STEPS
    assert int(limited.steps[SLOW]) == 25
    np.testing.assert_array_equal(bits(limited.x)[fixed_again], bits(x0)[fixed_again])


def test_a_row_failing_beside_a_slow_one_in_the_tail_fails_alone():
    """Two slow rows reach the tail together, one of them (``SLOW - 1``) into a NaN wall
    on its way to the valley's floor: each ends with the status and point it gets alone,
    the other rows keep their bits, and fixed entries theirs. The programs (the block's,
    the tail's, a row alone's) of :func:`test_a_slow_last_row_finishes_in_the_tail`."""
    wall = SLOW - 1
    clean = solve_walled(*unwalled(rows(slow=False)))  # no straggler: no tail
    x0, fixed, (curvature, center, weight) = rows(slow=True)
    weight = weight.at[wall].set(1.0)
    x0[wall], fixed[wall] = x0[SLOW], fixed[SLOW]
    args = (curvature, center, weight, jnp.zeros(200).at[wall].set(1.0))
    tailed = solve_walled(x0, fixed, args)
    steps = np.asarray(tailed.steps)
    assert min(steps[wall], steps[SLOW]) > 2 * np.max(np.delete(steps, [wall, SLOW]))
    for row in (wall, SLOW):
        own = tuple(a[row] for a in args)
        alone = solve_walled(x0[row], fixed[row], own, batched=False)
        assert int(tailed.status[row]) == int(alone.status), row
        np.testing.assert_allclose(tailed.x[row], alone.x, rtol=1e-6, atol=1e-8)
    assert int(tailed.status[wall]) != Status.CONVERGED, "no wall was met"
    assert int(tailed.status[SLOW]) == Status.CONVERGED
    assert bool(jnp.all(jnp.isfinite(tailed.x))), "the wall's NaN reached a point"
    # The other rows keep their bits, but those solved again beside the two in the tail.
    changed = np.any(bits(tailed.x) != bits(clean.x), axis=1)
    assert np.sum(np.delete(changed, [wall, SLOW])) <= TAIL_LANES - 2
    np.testing.assert_array_equal(bits(tailed.x)[fixed], bits(x0)[fixed])


X = np.linspace(0.0, 30.0, 301)
PEAKS = np.array([40.0, 11.0, 1.2, 25.0, 18.0, 1.6, 0.05, 2.0])


def two_gaussians(x, a1, c1, w1, a2, c2, w2, slope, offset):
    """Two Gaussian peaks (areas ``a``, centres ``c``, widths ``w``) on a line."""
    peak = lambda a, c, w: a * jnp.exp(-0.5 * ((x - c) / w) ** 2) / (w * np.sqrt(2 * np.pi))
    return peak(a1, c1, w1) + peak(a2, c2, w2) + slope * x + offset


def spectra(far: bool):
    """200 noisy spectra of :func:`two_gaussians` (7-36 steps each), the last one
    started with both peaks narrow at the right edge (``far``: about 70 steps)."""
    rng = np.random.default_rng(0)
    truth = PEAKS * rng.uniform(0.9, 1.1, (200, 8))
    y = np.asarray(jax.vmap(lambda p: two_gaussians(X, *p))(jnp.asarray(truth)))
    y = y + rng.normal(0.0, 0.2, y.shape)
    p0, fixed = truth * rng.uniform(0.9, 1.1, truth.shape), rng.random((200, 8)) < 0.25
    if far:
        p0[SLOW], fixed[SLOW] = PEAKS, False
        p0[SLOW, [1, 2, 4, 5]] = (29.0, 0.1, 29.5, 0.1)
    return y, p0, fixed


def test_a_slow_last_fit_finishes_in_the_tail_with_its_covariance():
    """The same through ``curve_fit`` (Levenberg-Marquardt): the slow fit's parameters
    and covariance agree with the same fit alone; the others keep their bits."""

    def model(x, *p):  # new here: its programs compile here
        return two_gaussians(x, *p)

    def fit(y, p0, fixed, batched=True):
        return fixedopt.curve_fit(model, X, y, p0, fixed=fixed, batched=batched, result=True)

    clean = fit(*spectra(far=False))
    before = compiled_solves()
    y, p0, fixed = spectra(far=True)
    tailed = fit(y, p0, fixed)
    assert compiled_solves() == before + 1, "the tail's program: called now"
    steps = np.asarray(tailed[2].solution.steps)
    assert steps[SLOW] > np.max(steps[:SLOW]) + TAIL_PATIENCE, "not a straggler"

    changed = np.any(bits(tailed[0])[:SLOW] != bits(clean[0])[:SLOW], axis=1)
    assert np.sum(changed) <= TAIL_LANES - 1
    others = np.flatnonzero(~changed)
    np.testing.assert_array_equal(bits(tailed[0])[others], bits(clean[0])[others])
    np.testing.assert_array_equal(bits(tailed[1])[others], bits(clean[1])[others])

    alone = fit(y[SLOW], p0[SLOW], fixed[SLOW], batched=False)
    assert int(tailed[2].solution.status[SLOW]) == int(alone[2].solution.status)
    np.testing.assert_allclose(tailed[0][SLOW], alone[0], rtol=1e-6)
    np.testing.assert_allclose(tailed[1][SLOW], alone[1], rtol=1e-4, atol=1e-12)


@contextlib.contextmanager
def traced_here(ahead=False):
    """The names of the functions JAX traces for a program in this thread meanwhile
    (``ahead``: in fixedopt's thread that compiles ahead)."""
    names, here = [], threading.current_thread()

    def listen(event, seconds, **kwargs):
        thread = threading.current_thread()
        mine = thread.name.startswith("fixedopt-ahead") if ahead else thread is here
        if event.endswith("jaxpr_trace_duration") and mine:
            names.append(str(kwargs.get("fun_name")))

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield names
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def tail_traces(traced):
    """``traced`` but the check of CONVERGED claims after the loop
    (``fixedopt._driver.after_loop``), which the same thread compiles ahead for
    L-BFGS's first batch by design: nearly every row claims, so its program is needed
    whether a tail comes or not."""
    return [name for name in traced if name != "_check_rows"]


def test_the_first_tail_is_traced_once_as_its_export(tmp_path):
    """The first batch of a model has a slow row: the call traces one solve in its own
    thread (the block's), the tail's program compiled as its export (here in the call's
    thread when the tail comes: fixedopt's thread compiles ``minimize``'s check
    meanwhile, ``fixedopt._driver.after_loop``; a least-squares solve's tail compiles in
    that thread from the block's lowering); the rows equal, bit for bit, those of the
    tail's program compiled in the caller's thread (no compile ahead, the solves' caches
    cleared). A new process (here: every in-memory program and compile ahead forgotten)
    finds the tail marked in the persistent cache: its thread traces nothing (it had
    traced and lowered the tail in every new process), and a tail that comes is not
    traced either (issue 62: the call traces one solve, the tail runs the export its
    mark holds), its rows bit for bit; a mark that cannot be read costs the tail's
    trace, as before, not its bits. A persistent cache of its own: the suite's may hold
    the tail and its mark from an earlier run."""
    from fixedopt._driver import ahead

    def objective(x, curvature, center, weight):  # new here: its programs compile here
        return (1 - weight) * quadratic(x, curvature, center) + weight * valley(x)

    def solve(slow=True):
        x0, fixed, args = rows(slow=slow)
        return fixedopt.minimize(objective, x0, fixed, args=args, batched=True)

    with persistent_cache(tmp_path):
        with traced_here() as traced, traced_here(ahead=True) as thread:
            tailed = solve()
        assert traced.count("_solve") == 1, traced
        # minimize's check compiles in the thread, the tail held: run here when needed
        assert traced.count("tail_exported") == 1 and tail_traces(thread) == [], thread
        for slow in (False, True):
            wait_for_compiles_ahead()  # a new process:
            engine.clear_compiled()
            jax.clear_caches()
            ahead._started.clear()
            with traced_here(ahead=True) as traced, traced_here() as here:
                again = solve(slow)
                wait_for_compiles_ahead()
            assert tail_traces(traced) == [], traced
            assert here.count("_solve") == 1, here  # the block's: the tail is not traced
        assert_rows_identical(again, tailed)
        marks = list((tmp_path / "fixedopt-tails").iterdir())
        assert len(marks) == 1 and marks[0].stat().st_size > 0, marks
        marks[0].write_bytes(b"")  # an older fixedopt's mark (empty), or unreadable:
        wait_for_compiles_ahead()
        engine.clear_compiled()
        jax.clear_caches()
        ahead._started.clear()
        with traced_here() as here:
            unread = solve()
        assert here.count("_solve") == 2, here  # the tail traced in the call, as before
        assert_rows_identical(unread, tailed)
    assert int(tailed.status[SLOW]) == Status.CONVERGED

    engine.clear_compiled()
    jax.clear_caches()
    with no_compiles_ahead(), traced_here() as traced:
        here = solve()
    assert traced.count("_solve") == 2, traced  # the block's, then the tail's
    assert_rows_identical(here, tailed)


@contextlib.contextmanager
def trace_starts():
    """``(name, ahead, start)`` of each function JAX traces meanwhile: its name, whether
    fixedopt's thread traced it, when its trace began (``time.perf_counter``)."""
    found = []

    def listen(event, seconds, **kwargs):
        if event.endswith("jaxpr_trace_duration"):
            ahead = threading.current_thread().name.startswith("fixedopt-ahead")
            found.append((str(kwargs.get("fun_name")), ahead, time.perf_counter() - seconds))

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield found
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def test_a_checked_call_without_a_tail_compiles_its_tail_after_its_passes(tmp_path, monkeypatch):
    """``minimize``'s first call compiles its check after the loop in fixedopt's thread;
    its tail's program, which a batch without a slow row does not need, waits for the
    call's passes to end (``fixedopt._driver.ahead.held``: it had shared the call's two
    cores, issue 62), then compiles in the thread and leaves its mark: a new process
    whose first batch has a slow row runs the mark's export, traces no tail, and its
    rows are those of the tail compiled in the call (no compile ahead)."""
    from fixedopt._driver import ahead

    def objective(x, curvature, center, weight):  # new here: its programs compile here
        return (1 - weight) * quadratic(x, curvature, center) + weight * valley(x)

    def solve(slow):
        x0, fixed, args = rows(slow=slow)
        return fixedopt.minimize(objective, x0, fixed, args=args, batched=True)

    ended, held = [], ahead.held

    @contextlib.contextmanager
    def timed_held():
        with held():
            yield
            ended.append(time.perf_counter())  # before the held block's end submits

    monkeypatch.setattr(ahead, "held", timed_held)
    with persistent_cache(tmp_path):
        with trace_starts() as starts:
            solve(slow=False)
            wait_for_compiles_ahead()
        tails = [(thread, start) for name, thread, start in starts if name == "tail_exported"]
        assert len(ended) == 1 and len(tails) == 1, starts
        assert tails[0][0], "the tail compiled in the caller's thread"
        assert tails[0][1] > ended[0], "the tail's trace began during the call's passes"
        marks = list((tmp_path / "fixedopt-tails").iterdir())
        assert len(marks) == 1 and marks[0].stat().st_size > 0, marks
        engine.clear_compiled()  # a new process:
        jax.clear_caches()
        ahead._started.clear()
        with traced_here() as here, traced_here(ahead=True) as thread:
            tailed = solve(slow=True)
            wait_for_compiles_ahead()
        assert here.count("_solve") == 1 and "tail_exported" not in here + thread, here
    engine.clear_compiled()
    jax.clear_caches()
    with no_compiles_ahead():
        reference = solve(slow=True)
    assert_rows_identical(tailed, reference)
    assert int(tailed.status[SLOW]) == Status.CONVERGED


def test_nothing_compiles_ahead_where_no_row_runs_long_enough_for_a_tail():
    """``max_steps`` below ``TAIL_PATIENCE`` (Gpufit's protocol: 10): no row can run
    alone that long, so no tail's program is compiled for nothing."""

    def objective(x, curvature, center, weight):  # new here: its programs compile here
        return (1 - weight) * quadratic(x, curvature, center) + weight * valley(x)

    x0, fixed, args = rows(slow=True)
    with traced_here(ahead=True) as traced:
        limited = fixedopt.minimize(
            objective, x0, fixed, args=args, batched=True, max_steps=TAIL_PATIENCE - 1
        )
        wait_for_compiles_ahead()
    assert tail_traces(traced) == [], traced
    assert int(limited.status[SLOW]) == Status.MAX_STEPS
