"""A program compiled ahead, in a thread, while the caller's own program compiles and runs.

A CPU block's tail (:mod:`fixedopt._driver.batching`) is solved by a program of its own,
``tail_lanes`` rows wide. Compiled when a batch first has a tail, it sat inside the
user's first call whenever the first batch of real data had a slow row (1.2 s of a
5.7 s first call of the spectra fit, issue 62). So the first time a block program is
called for a model and shapes, the tail's program is traced, lowered and compiled in a
thread (:func:`start`), once the block's program is traced and lowered: its XLA compile
(which releases the interpreter) and its run go on meanwhile, so the tail's program is
ready, or nearly, when a tail needs it (:func:`wait`). It is the same program as before
(the same ``jit``, plan, schedule and argument types): the call then finds it in
``jit``'s caches, its results bit for bit those of a program compiled in the caller's
thread. A model that never has a tail has compiled it for nothing, on another core.
The thread runs niced (Linux), below the caller's work. What it buys needs an idle
core: on a 2-core machine at load 12 the first call of ``benchmarks.first_call``'s
``spectra_slow`` (B = 200) took 1.08x the time of the same tree with
``fixedopt.testing.no_compiles_ahead`` (6.62-6.95 s against 6.15-6.38 s, 3 pairs in
turn): the two compiles shared the busy cores.

Not again in a new process once done (a model compiled before): where JAX's persistent
cache is a folder, a tail compiled ahead leaves a mark there named by its block's
lowered program, the versions of jax and jaxlib, the platform and a digest of
fixedopt's source (the tail's program is not in the block's: a changed fixedopt never
runs an older one's tail), so a process whose block is marked compiles nothing ahead
(the tail's trace and lowering had cost 0.35-0.43 s of process CPU in every new
process of the spectra, whose cached call takes 1.5-1.7 s, under load). Nor is the
tail traced again when one comes (issue 62: a cached call traces once): the tail is
compiled ahead as ``jax.export`` makes it (one function of the flat inputs: the same
StableHLO, so the same bits, as the ``jit`` call's program),
the mark holds that export (pickled), and a new process runs it (:func:`call`): its
lowering embeds the stored module (0.03 s against 0.3-0.4 s of trace and lowering, the
spectra) and XLA's program comes from the persistent cache. A mark that cannot be read
(an older one, empty), or whose program the cache has dropped, costs only the time:
the tail is traced, or compiled, in the call that has one, as without the thread. A
mark is code that the process runs, as the cache's programs are: keep the folder your
own (:mod:`fixedopt._driver.cache`).

A second thread compiles, from a ``curve_fit`` call's start, its covariance program
from the solver's normal equations (:func:`soon`), lowered by the caller first: that
program reads nothing of the model, its types are known before the solve, and while
the solve is traced (Python, one core) the other core would wait.

The thread sees the caller's JAX settings only where they are passed to it: 64-bit
mode, the matmul precision and the default device are (the settings a solve's trace
reads); under any other setting of the caller's own the thread's program may differ,
and the tail's call then compiles its own, as before: time lost, never a result.
"""

from __future__ import annotations

import collections
import contextlib
import os
import pathlib
import pickle
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax

from fixedopt._numerics import stored


# One thread: the compiles ahead queue behind each other rather than crowd the caller's.
# Its thread is joined at the interpreter's exit (not a daemon: XLA is not stopped mid-way).
def _yield_to_the_caller() -> None:
    """The thread's own compile work at a lower priority than the caller's (Linux sets
    a thread's niceness; elsewhere nothing)."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


_POOL = ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="fixedopt-ahead", initializer=_yield_to_the_caller
)
# soon()'s own thread: its compile, started at a call's start, never keeps a block's
# tail waiting in the queue above (the tail is needed first, when the block has run).
_SOON = ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="fixedopt-ahead-soon", initializer=_yield_to_the_caller
)
# The programs started, newest last: a key once started is not compiled again (jit's
# caches hold it); the oldest forgotten past this many.
_MOST = 256
_started: collections.OrderedDict[Any, Future[None]] = collections.OrderedDict()
_lock = threading.Lock()
# Off (fixedopt.testing.no_compiles_ahead): the call that first has a tail compiles it.
enabled = [True]
# The programs compiled ahead as exports (by key): jit functions of the flat inputs;
# and the marks of the keys whose thread has run (None: no cache folder).
_runners: dict[Any, Any] = {}
_marks: dict[Any, pathlib.Path | None] = {}
# The compiler options of a jit function given to start(export=True) (register()).
_options: dict[Any, dict[str, Any] | None] = {}
# The subfolder of the persistent cache holding the tails' marks.
TAILS = "fixedopt-tails"


def register(compiled: Callable[..., Any], options: dict[str, Any] | None) -> None:
    """The XLA options that ``compiled`` (a ``jax.jit`` function) compiles with: its
    export is compiled with the same (:func:`start`'s ``export``)."""
    _options[compiled] = options


def start(
    before: Callable[[], Any], compiled: Callable[..., Any], *args: Any, export: bool = False
) -> None:
    """Trace, lower and compile ``compiled(*args)`` (a ``jax.jit`` function whose first
    arguments are static) in the thread, unless started before for the same argument
    types; nothing is run. ``before()`` is called first, here, when the thread starts:
    the caller's own program traced and lowered (``jit(f).lower(...)``, which ``jit``'s
    caches keep for the call), so that the thread's trace, which holds the interpreter,
    runs while XLA compiles the caller's program, not while it is traced; the lowered
    program it returns names the mark of the module's rule. ``export``: compiled as
    ``jax.export`` makes it and run by :func:`call` (``compiled`` registered, the last
    argument its traced inputs), its export kept in the mark."""
    key = _key(compiled, args)
    done = _claim(key)  # done: when the thread has compiled
    if done is None:
        return
    try:
        lowered = before()
        future = _POOL.submit(_compile, key, compiled, args, _settings(), lowered, export)
    except BaseException:
        done.set_result(None)  # nothing to wait for: the call compiles its own
        raise
    future.add_done_callback(lambda _: done.set_result(None))


def soon(key: Any, lower: Callable[[], Any]) -> None:
    """``lower()`` here (a program traced and lowered: the interpreter's work, done
    in the caller's thread, whose trace would otherwise wait for the interpreter),
    then its XLA compile (which releases the interpreter) in a thread of its own;
    once per ``key`` (a key started before is not lowered again): a program that
    reads nothing of the model, compiled from the call's start while its solve is
    traced, when one core would otherwise wait (``curve_fit``'s covariance from the
    solver's normal equations, :mod:`fixedopt._entry.curve_fit`). What fails is left
    to the call, which then does it itself. :func:`wait_for` it before that call."""
    done = _claim(key)
    if done is None:
        return
    try:
        future = _SOON.submit(_work, lower().compile)
    except Exception:
        done.set_result(None)  # the call lowers it again, and raises there
        return
    except BaseException:
        done.set_result(None)
        raise
    future.add_done_callback(lambda _: done.set_result(None))


def _claim(key: Any) -> Future[None] | None:
    """A future for ``key``'s compile ahead, now known as started (None where the thread
    is off or ``key`` was started before); the oldest keys forgotten past :data:`_MOST`."""
    if not enabled[0]:
        return None
    done = Future[None]()
    with _lock:
        if key in _started:
            return None
        _started[key] = done
        while len(_started) > _MOST:
            _started.popitem(last=False)
    return done


def wait_for(key: Any) -> None:
    """Wait for :func:`soon`'s ``work`` of ``key``, if one was started."""
    with _lock:
        future = _started.get(key)
    if future is not None:
        future.result()


def ready(key: Any) -> bool:
    """Whether :func:`soon`'s work of ``key`` was started and has ended (compiled, or
    failed: the call then compiles it itself)."""
    with _lock:
        future = _started.get(key)
    return future is not None and future.done()


def wait(compiled: Callable[..., Any], *args: Any) -> None:
    """Wait for ``compiled(*args)``'s compile ahead, if one was started: the call then
    finds it compiled, rather than compile it a second time meanwhile. A compile that
    failed in the thread is left to the call (it raises there, as it would have)."""
    with _lock:
        future = _started.get(_key(compiled, args))
    if future is not None:
        future.result()  # its result None, also where the thread's compile failed


def settle() -> None:
    """Wait for every compile ahead started so far (a benchmark's timed calls after a
    first one, say, then run on a machine that compiles nothing else)."""
    with _lock:
        futures = list(_started.values())
    for future in futures:
        future.result()


def call(compiled: Callable[..., Any], *args: Any, like: Any) -> Any:
    """``compiled(*args)``, once its compile ahead (:func:`start`) is done: through its
    export where one was made here or is held by its block's mark, else as ``jit``
    compiles it. ``like``: a pytree of the structure of its result (the block's)."""
    key = _key(compiled, args)
    with _lock:
        future = _started.get(key)
    if future is None:  # not compiled ahead (turned off): compiled by jit, as before
        return compiled(*args)
    future.result()
    leaves = jax.tree.leaves(args[-1])
    runner = _runner(key, compiled, leaves)
    if runner is None:
        return compiled(*args)
    return jax.tree.unflatten(jax.tree.structure(like), runner(*leaves))


def compiled_programs() -> int:
    """Programs compiled for the exports of :func:`call` (``_cache_size``: jit's own,
    private count)."""
    with _lock:
        runners = list(_runners.values())
    return sum(runner._cache_size() for runner in runners)


def forget() -> None:
    """Drop the exports made or read here (``fixedopt.testing``: every compiled solve
    dropped); a key started before is then compiled by its call."""
    with _lock:
        _runners.clear()
        _marks.clear()


def _runner(key: Any, compiled: Any, leaves: list[Any]) -> Any:
    """The export of ``key``'s program as a ``jit`` function: made here, or read from
    its block's mark (a new process); None where there is none, or it cannot be read,
    or it takes other arguments than ``leaves``."""
    with _lock:
        runner, mark = _runners.get(key), _marks.get(key)
    if runner is not None or mark is None:
        return runner
    try:
        exported = pickle.loads(mark.read_bytes())
    except Exception:  # an empty (older) or unreadable mark
        exported = None
    if exported is None or not stored.takes(exported, leaves):  # traced as before
        with _lock:
            _marks[key] = None
        return None
    runner = _export_runner(compiled, exported)
    with _lock:
        _runners[key] = runner
    return runner


def _export_runner(compiled: Any, exported: Any) -> Any:
    """``exported`` as a ``jit`` function, with ``compiled``'s XLA options (named
    ``tail`` in JAX's logs and in ``benchmarks.first_call``'s tables)."""
    return stored.export_runner(exported, "tail", _options.get(compiled))


def _exported(compiled: Any, args: tuple[Any, ...]) -> Any:
    """``compiled(*args)`` exported as one function of the last argument's leaves."""
    static, inputs = args[:-1], args[-1]
    leaves, tree = jax.tree.flatten(inputs)
    traced = compiled.__wrapped__

    def tail_exported(*leaves: Any) -> list[Any]:
        return jax.tree.leaves(traced(*static, jax.tree.unflatten(tree, leaves)))

    return jax.export.export(jax.jit(tail_exported), platforms=stored.call_platforms())(*leaves)


def _compile(
    key: Any,
    compiled: Any,
    args: tuple[Any, ...],
    settings: tuple[Any, ...],
    beside: Any,
    export: bool,
) -> None:
    mark = _mark(beside)
    with _lock:
        _marks[key] = mark if export else None
    if mark is not None and mark.exists():
        return  # compiled ahead in an earlier process: in the persistent cache
    exported = None
    with _as_the_caller(settings):
        if export:
            with contextlib.suppress(Exception):  # a host callback, say: not exported
                exported = _exported(compiled, args)
        if exported is None:
            compiled.lower(*args).compile()
        else:
            runner = _export_runner(compiled, exported)
            runner.lower(*jax.tree.leaves(args[-1])).compile()
            with _lock:
                _runners[key] = runner
    if mark is not None:
        _write_mark(mark, exported)


def _work(compile_it: Callable[[], Any]) -> None:
    """:func:`soon`'s compile; what it raises is dropped (the call compiles again, and
    raises there if it must)."""
    with contextlib.suppress(Exception):
        compile_it()


@contextlib.contextmanager
def _as_the_caller(settings: tuple[Any, ...]) -> Iterator[None]:
    """The caller's ``settings`` (:func:`_settings`) in this thread."""
    x64, precision, device = settings
    with contextlib.ExitStack() as stack:
        stack.enter_context(jax.enable_x64(x64))
        if precision is not None:
            stack.enter_context(jax.default_matmul_precision(precision))
        if device is not None:
            stack.enter_context(jax.default_device(device))
        yield


def _write_mark(mark: pathlib.Path, exported: Any) -> None:
    """The mark: the export pickled (empty where none was made), written whole."""
    data = b"" if exported is None else pickle.dumps(stored.portable(exported))
    stored.write_whole(mark, lambda: data)


def _mark(beside: Any) -> pathlib.Path | None:
    """The mark of a tail compiled ahead beside the program ``beside`` (a
    ``jax.stages.Lowered``) in JAX's persistent cache folder, named by its text
    (:func:`fixedopt._numerics.stored.cache_file`: the tail's code is not beside's,
    fixedopt's source is in the name); None where the cache is off, not a local
    folder, or ``beside`` not a lowered program, or fixedopt's source cannot be read."""
    if not hasattr(beside, "as_text"):
        return None
    return stored.cache_file(TAILS, beside.as_text())


def _settings() -> tuple[Any, ...]:
    """The caller's settings that a solve's trace reads (this thread's values)."""
    config: Any = jax.config  # their attributes are unannotated in jax
    return (
        bool(config.jax_enable_x64),
        config.jax_default_matmul_precision,
        config.jax_default_device,
    )


def _key(compiled: Any, args: tuple[Any, ...]) -> Any:
    """The program's identity: the function, static arguments, argument types, settings."""
    leaves, tree = jax.tree.flatten(args[-1])
    return (compiled, *args[:-1], tree, tuple(jax.typeof(leaf) for leaf in leaves), _settings())
