"""Strict settings for the whole suite (tests and doctests): float64 available, no
implicit rank promotion."""

import json
import os
import pathlib
import resource
import time

# One BLAS thread in each test process, before NumPy or SciPy loads OpenBLAS (as
# benchmarks/run.py does): the references' per-row SciPy loops call LAPACK on tiny
# matrices, where OpenBLAS's thread pool, on two cores shared by two workers, cost
# ~4.6 ms of CPU an evaluation of scipy's L-BFGS-B, not ~0.1 ms (docs/decisions.md,
# "The suite's BLAS threads"). A user's setting stays; subprocesses inherit it.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import jax  # noqa: E402
import pytest  # noqa: E402

# fixedopt's persistent compilation cache (on by default, fixedopt/_driver/cache.py) in
# a folder of this checkout, one per test process: not the user's, so a run starts from
# what its own earlier runs compiled; and not shared between pytest-xdist's processes
# (JAX writes an entry in place: a process could read another's half-written file).
# The workers inherit the main process's environment: the flag tells them that its
# folder was chosen here (each then takes its own), not by whoever ran the tests.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
_cache = pathlib.Path(__file__).resolve().parent / ".pytest_cache" / f"jax-{_worker}"
if "FIXEDOPT_CACHE" not in os.environ or os.environ.get("FIXEDOPT_TEST_CACHE") == "1":
    os.environ["FIXEDOPT_CACHE"], os.environ["FIXEDOPT_TEST_CACHE"] = str(_cache), "1"
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

from fixedopt._driver import engine as _engine  # noqa: E402  (after the settings above)
from fixedopt.testing import no_compiles_ahead  # noqa: E402

TESTS = pathlib.Path(__file__).resolve().parent / "tests"


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module. The suite compiles
    thousands of programs, and a module alone adds up to ~15,000 memory mappings
    (measured); kept alive across the suite they approach the per-process limit
    (vm.max_map_count, 65530 here). Without this, XLA's compiler segfaulted late in
    the suite (twice, at the same test); with it the suite runs through."""
    yield
    jax.clear_caches()


@pytest.fixture(autouse=True)
def _no_compiles_ahead(request):
    """A test's CPU block compiles its tail's program in the call that first has a tail
    (``fixedopt.testing.no_compiles_ahead``), not ahead in fixedopt's thread at every
    first call of a model, where it is compiled for nothing unless a tail comes: on CI's
    two busy cores that thread has no idle core to use, and nearly every batched test
    compiled two solves for one. The results are the same, bit for bit
    (``tests/driver/test_tail.py``, which keeps the default, as do the doctests and tests
    marked ``compiles_ahead``)."""
    if request.node.get_closest_marker("compiles_ahead") or not request.node.path.is_relative_to(
        TESTS
    ):
        yield
        return
    with no_compiles_ahead():
        yield


@pytest.fixture(autouse=True)
def _fewer_optimizations(request):
    """A test marked ``fewer_optimizations`` compiles its programs without XLA's
    expensive backend (LLVM) optimizations (``jax_disable_most_optimizations``): its
    modules' programs run for milliseconds and compile for seconds, and the module takes
    about half the CPU time (tests/objective/test_losses.py: 29.9 s against 14.7 s,
    measured). Only for guarantees that no backend optimization changes: fixed entries'
    bits (a select), and references (scipy's, closed forms) within tolerances far above
    rounding. Not for rows that must round alike in different programs, statuses at
    rounding's edge, or the compiled code itself (lanes, buckets, tails, HLO). A test
    marked ``optimized`` in a module marked so keeps the optimizations (one at rounding's
    edge among references)."""
    marked = request.node.get_closest_marker("fewer_optimizations") and not (
        request.node.get_closest_marker("optimized")
    )
    if not (marked or _unoptimized_doctest(request)):
        if _unoptimized[0]:  # the flag is no part of jit's key: drop what it compiled
            jax.clear_caches()
            _engine.clear_compiled()
            _unoptimized[0] = False
        yield
        return
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    _unoptimized[0] = True
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


def _unoptimized_doctest(request) -> bool:
    """The docstrings' examples of ``fixedopt/`` run as if marked ``fewer_optimizations``:
    they print values to a few digits, statuses of well-posed problems, fixed entries'
    bits and compile counts; not those of the modules about compiled code and reductions
    (:data:`OPTIMIZED_DOCTESTS`)."""
    path = request.node.path
    return path.is_relative_to(TESTS.parent / "fixedopt") and path.name not in OPTIMIZED_DOCTESTS


OPTIMIZED_DOCTESTS = ("compiler.py", "machine.py", "reduce.py", "kernels.py", "testing.py")


# Whether the last test ran with fewer optimizations. JAX reuses a jitted function's
# program whatever the flag was when it compiled (seen: an unmarked test of
# test_users_conditions, whose fit must reproduce its data exactly, ran the program a
# marked test had compiled, and failed); so the first unmarked test after a marked one
# drops the compiled programs, and an unmarked test runs only optimized ones.
_unoptimized = [False]


# `make test` runs the modules on two processes, a module at a time to whichever is free
# (pytest-xdist's --dist loadfile, in the order collected: --no-loadscope-reorder). The
# longest modules go first and the doctests, ~30 short modules, last, so that neither
# process idles at the end behind a long module (greedy scheduling, longest first). Every
# module of 34 CPU s or more, by the cost report of CI's run of e581bef (one process's
# CPU seconds; 2,412 in all) less the cuts measured since (docs/decisions.md, "The
# suite's time"): the benchmark smoke ~110, test_lanes ~95, the notebooks ~95 (their
# smoke sizes), test_statuses ~90, then 58 down to 34; the rest are shorter.
LONGEST_FIRST = (
    "tests/test_benchmarks.py",
    "tests/driver/test_lanes.py",
    "tests/test_notebooks.py",
    "tests/driver/test_statuses.py",
    "tests/entry/test_solver_guarantees.py",
    "tests/driver/test_tail.py",
    "tests/derivatives/test_differentiate_all.py",
    "tests/solvers/test_stationary_start.py",
    "tests/objective/test_vectorized.py",
    "tests/fixing/test_keep_fixed.py",
    "tests/solvers/test_certify.py",
    "tests/solvers/test_solver_exactness.py",
    "tests/objective/test_poisson.py",
    "tests/entry/test_curve_fit_scipy_as_written.py",
    "tests/models/test_users_conditions.py",
    "tests/test_docs.py",
    "tests/entry/test_curve_fit_scipy.py",
    "tests/solvers/test_wolfe.py",
    "tests/results/test_covariance.py",
    "tests/derivatives/test_implicit.py",
    "tests/entry/test_minimize_reference.py",
    "tests/entry/test_multistart.py",
    "tests/entry/test_curve_fit_scipy_batched.py",
    "tests/entry/test_curve_fit.py",
)


def pytest_collection_modifyitems(items):
    """The modules of :data:`LONGEST_FIRST` first, in its order; then the other test
    modules as collected; the doctests of ``fixedopt/`` last."""
    rank = {path: place for place, path in enumerate(LONGEST_FIRST)}

    def place(item):
        path = item.nodeid.split("::")[0]
        return rank.get(path, len(rank) + path.startswith("fixedopt/"))

    items.sort(key=place)  # stable: a module's tests keep their order


# `--cost-report PATH`: where the suite's time goes, measured in each test process. A
# line a test module, appended to PATH: the process's CPU seconds in its tests (those of
# its subprocesses included: notebooks, benchmarks) and the XLA programs it compiled
# (JAX's compile events; a persistent-cache hit compiles nothing), and the wall seconds
# JAX reported for its stages: tracing, lowering to MLIR, XLA's compile. CPU seconds, not
# wall: on a shared machine they still add up; summed over the modules and halved they
# estimate `make test`'s two workers on an idle 2-core machine.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
STAGE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    COMPILE_EVENT: "xla_s",
}
_costs: dict[str, dict[str, float]] = {}
_compiles = [0]
_stages = dict.fromkeys(STAGE_EVENTS.values(), 0.0)


def pytest_addoption(parser):
    parser.addoption("--cost-report", metavar="PATH", default=None,
                     help="append each test module's CPU seconds and compiled XLA "
                          "programs to PATH, a JSON line a module")  # fmt: skip


def _compiled(event, duration, *_, **__):
    _compiles[0] += event == COMPILE_EVENT
    if event in STAGE_EVENTS:
        _stages[STAGE_EVENTS[event]] += duration


def _loaded(event, *_, **__):  # a persistent-cache hit fires the compile event too
    _compiles[0] -= event == CACHE_HIT_EVENT


def pytest_configure(config):
    if config.getoption("--cost-report"):
        jax.monitoring.register_event_duration_secs_listener(_compiled)
        jax.monitoring.register_event_listener(_loaded)


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not item.config.getoption("--cost-report"):
        yield
        return
    cpu, programs, stages = _cpu_seconds(), _compiles[0], dict(_stages)
    yield
    cost = _costs.setdefault(
        item.nodeid.split("::")[0], {"cpu_s": 0.0, "programs": 0, **dict.fromkeys(stages, 0.0)}
    )
    cost["cpu_s"] += _cpu_seconds() - cpu
    cost["programs"] += _compiles[0] - programs
    for stage, seconds in stages.items():
        cost[stage] += _stages[stage] - seconds


def pytest_sessionfinish(session):
    path = session.config.getoption("--cost-report")
    if path and _costs:
        with open(path, "a") as report:
            for module, cost in _costs.items():
                line = {"module": module, "programs": int(cost.pop("programs"))}
                line |= {key: round(seconds, 2) for key, seconds in cost.items()}
                report.write(json.dumps(line) + "\n")
