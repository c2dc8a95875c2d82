"""Programs named before their trace: a function of its arguments alone, run in a new
process from its ``jax.export`` beside JAX's persistent cache, not traced again.

JAX's persistent cache spares a new process XLA's compile, not the trace and lowering
that make its key: a cached call of ``curve_fit`` still traced its covariance (0.12 /
0.03 s of trace / lowering in every new process of the spectra, issue 62 item 4). A
program that reads nothing but its arguments (no user function: the covariance from the
solver's normal equations, one program for every model of ``n`` parameters) is named
by what the call knows before any trace: the function, its static arguments, its
arguments' structure, shapes and dtypes, the JAX settings a trace reads, the versions of
jax and jaxlib, the backend and fixedopt's source (:func:`library_digest`). It is
exported once (``jax.export``: the StableHLO ``jit`` lowers, so the same program and
bits), pickled under ``fixedopt-programs`` in the cache folder, and run through a
``jit`` of the export: its lowering embeds the stored module, XLA's program comes from
the persistent cache. Without a local cache folder, or for a function the export
refuses, it is ``jax.jit``'s call as before. A program with a model in it is stored
alike where its static arguments name themselves (``named``:
:mod:`fixedopt._numerics.program_names`, a fit of ``fixedopt.models``' built-in
lineshapes: its solve's trace and lowering, 0.5 + 0.12 s of a cached 1.2 s call, issue
62); an argument without a name (a user's function) is ``jit``'s call. A stored export
is code that the process runs, as the cache's programs are: keep the folder your own
(:mod:`fixedopt._driver.cache`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pathlib
import pickle
import threading
from collections.abc import Callable
from typing import Any

import jax
import jaxlib.version

from fixedopt._numerics import backends, kernels, program_names

FOLDER = "fixedopt-programs"


@functools.cache
def library_digest() -> str | None:
    """A digest of fixedopt's source: every ``.py`` file of the package (its path and
    bytes), once per process (about 3 ms, 119 files). Part of every name of a file
    kept beside the cache (:func:`digest`: an export here, a tail's mark,
    :mod:`fixedopt._driver.ahead`, a probe's, :mod:`fixedopt._numerics.cpu_compiler`):
    a program JAX's own key does not name is then never one that another fixedopt
    exported. None where the package has no source files to read (a zip, compiled
    files only): then nothing is stored."""
    root = pathlib.Path(__file__).resolve().parent.parent
    sources = sorted(root.rglob("*.py"))
    if not sources:
        return None
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.relative_to(root).as_posix().encode() + b"\0")
        digest.update(source.read_bytes() + b"\0")
    return digest.hexdigest()


class StoredJit:
    """``jax.jit(function, static_argnums=..., compiler_options=options)`` for a
    ``function`` of its arguments alone (no closure over a model), whose static
    arguments have a ``repr`` that names them (NamedTuples of numbers and flags), run
    through its export where the persistent cache is a local folder."""

    def __init__(
        self,
        function: Callable[..., Any],
        static_argnums: tuple[int, ...],
        options: dict[str, Any],
        named: bool = False,
    ) -> None:
        self.function, self.static_argnums, self.options = function, static_argnums, options
        self.jitted = jax.jit(function, static_argnums=static_argnums, compiler_options=options)
        self.__wrapped__ = function  # as jit's: the traced function (ahead's tail export)
        # named: the static arguments named by program_names.name_of (None: jit's call),
        # else by their repr
        self.named = named
        self._runners: dict[str, tuple[Any, Any]] = {}
        self._names: dict[Any, str | None] = {}
        self._lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        found, leaves = self._found(args)
        if found is None:
            return self.jitted(*args)
        runner, out_tree = found
        return jax.tree.unflatten(out_tree, runner(*leaves))

    def lower(self, *args: Any) -> Any:
        """The program that a call with ``args`` runs, traced and lowered (a
        ``jax.stages.Lowered``, its export made or read); its ``compile()`` is then
        the call's own (``jit``'s caches keep both)."""
        found, leaves = self._found(args)
        if found is None:
            return self.jitted.lower(*args)
        return found[0].lower(*leaves)

    def _found(self, args: tuple[Any, ...]) -> tuple[tuple[Any, Any] | None, list[Any]]:
        """The runner of ``args``' program and its output structure (None: ``jit``'s
        own call, as before), and ``args``' dynamic leaves."""
        static = tuple(args[i] for i in self.static_argnums)
        dynamic = [a for i, a in enumerate(args) if i not in self.static_argnums]
        leaves, tree = jax.tree.flatten(dynamic)
        name = self._name(static, tree, leaves)
        if name is None:
            return None, leaves
        with self._lock:
            found = self._runners.get(name)
        if found is None:
            found = self._read(name, leaves) or self._export(name, static, tree, leaves)
            if found is None:  # not exported (a host callback, say): as before
                return None, leaves
            with self._lock:
                self._runners[name] = found
        return found, leaves

    def _cache_size(self) -> int:
        """Programs compiled: ``jit``'s own (private) counts, of the exports' too."""
        with self._lock:
            runners = [runner for runner, _ in self._runners.values()]
        own: int = self.jitted._cache_size()  # type: ignore[attr-defined]
        return own + sum(int(runner._cache_size()) for runner in runners)

    def clear_cache(self) -> None:
        """Drop every compiled program and export read or made here."""
        self.jitted.clear_cache()  # type: ignore[attr-defined]
        with self._lock:
            self._runners.clear()

    def _name(self, static: tuple[Any, ...], tree: Any, leaves: list[Any]) -> str | None:
        """The program's file name (:func:`digest`), or None where nothing is stored."""
        if cache_subfolder(FOLDER) is None:
            return None
        config: Any = jax.config  # its options are attributes made at run time
        types = tuple((a.shape, a.dtype, a.weak_type) for a in map(jax.typeof, leaves))
        settings = (config.jax_enable_x64, config.jax_default_matmul_precision,
                    config.jax_numpy_dtype_promotion, config.jax_default_device,
                    kernels.current(), jax.default_backend())  # fmt: skip
        known = (static, tree, types, settings)  # a call's name, made once per process
        if known in self._names:
            return self._names[known]
        described = program_names.name_of(static) if self.named else static
        code = (self.function.__module__, self.function.__qualname__)
        text = repr((code, sorted(self.options.items()), (described, tree, types, settings)))
        name = None if described is None else digest(text)
        self._names[known] = name
        return name

    def _read(self, name: str, leaves: list[Any]) -> tuple[Any, Any] | None:
        """The stored export of ``name`` as a runner, or None (none, unreadable, or of
        other arguments: then made again)."""
        folder = cache_subfolder(FOLDER)
        try:
            exported, out_tree = pickle.loads((folder / name).read_bytes())  # type: ignore[operator]
        except Exception:  # no folder or file, or not one of ours: exported again
            return None
        if not takes(exported, leaves):
            return None
        return self._runner(exported), out_tree

    def _export(
        self, name: str, static: tuple[Any, ...], tree: Any, leaves: list[Any]
    ) -> tuple[Any, Any] | None:
        """``function`` exported as one function of the flat arguments, stored, as a
        runner; None where JAX does not export it."""
        out_trees: list[Any] = []

        def flat(*leaves: Any) -> list[Any]:
            dynamic = jax.tree.unflatten(tree, leaves)
            given, rest = iter(static), iter(dynamic)
            args = [next(given) if i in self.static_argnums else next(rest)
                    for i in range(len(static) + len(dynamic))]  # fmt: skip
            out, out_tree = jax.tree.flatten(self.function(*args))
            out_trees.append(out_tree)
            return list(out)

        flat.__name__ = self.function.__name__
        try:
            exported = jax.export.export(jax.jit(flat), platforms=call_platforms())(*leaves)
        except Exception:  # a host callback, say: not exported
            return None
        folder = cache_subfolder(FOLDER)
        if folder is not None:
            write_whole(folder / name, lambda: pickle.dumps((portable(exported), out_trees[-1])))
        return self._runner(exported), out_trees[-1]

    def _runner(self, exported: Any) -> Any:
        """``exported`` as a ``jit`` function with the options, named as the function."""
        return export_runner(exported, self.function.__name__, self.options)


def cache_subfolder(name: str) -> pathlib.Path | None:
    """The folder ``name`` in JAX's persistent cache folder, for exports named with
    :func:`library_digest`; None where the cache is off or not a local folder, or
    fixedopt's source cannot be read."""
    config: Any = jax.config
    folder = config.jax_compilation_cache_dir
    if not (folder and config.jax_enable_compilation_cache) or "://" in str(folder):
        return None
    return None if library_digest() is None else pathlib.Path(folder) / name


def digest(text: str) -> str | None:
    """The name of a file kept beside the cache for ``text`` (what it is of: a
    program's or an option's description): a digest of ``text`` with all that makes
    another fixedopt's or machine's file another's, the versions of jax and jaxlib,
    the platform a call runs on here and its version, and fixedopt's source
    (:func:`library_digest`). None where the source cannot be read: nothing stored."""
    library = library_digest()
    if library is None:
        return None
    client = jax.devices(backends.platform())[0].client  # which programs compile for
    given = (jax.__version__, jaxlib.version.__version__, client.platform,
             client.platform_version, library)  # fmt: skip
    return hashlib.sha256(f"{given!r}\n{text}".encode()).hexdigest()


def cache_file(subfolder: str, text: str) -> pathlib.Path | None:
    """The file for ``text`` (:func:`digest`) in the cache's ``subfolder``: a mark or
    an export one process writes and a later one reads (the same fixedopt, jax, jaxlib
    and platform); None where there is no local cache folder or no source to read."""
    folder = cache_subfolder(subfolder)
    name = None if folder is None else digest(text)
    return None if folder is None or name is None else folder / name


def call_platforms() -> tuple[str]:
    """The platform an export is made for: where a call runs here
    (``jax.default_device``'s where one is set, a CPU beside a TPU say; else the
    default backend's), not ``jax.export``'s default, the default backend, whose export
    the CPU refuses to run."""
    return (backends.platform(),)


def takes(exported: Any, leaves: list[Any]) -> bool:
    """Whether ``exported`` takes arguments of the shapes and dtypes of ``leaves``."""
    given = [(jax.typeof(leaf).shape, jax.typeof(leaf).dtype) for leaf in leaves]
    return [(aval.shape, aval.dtype) for aval in exported.in_avals] == given


def portable(exported: Any) -> Any:
    """``exported`` without its derivative rule (a closure: not pickled, not needed)."""
    return dataclasses.replace(exported, _get_vjp=None)


def export_runner(exported: Any, name: str, options: dict[str, Any] | None) -> Any:
    """``exported`` as a ``jit`` function with XLA ``options``, ``name`` in JAX's logs."""

    def run(*leaves: Any) -> Any:
        return exported.call(*leaves)

    run.__name__ = name
    return jax.jit(run, compiler_options=options) if options else jax.jit(run)


def write_whole(path: pathlib.Path, data: Callable[[], bytes]) -> None:
    """The bytes ``data()`` into ``path``, written whole (or not at all: a file another
    process reads is never partial; an export that does not pickle is not stored)."""
    with contextlib.suppress(OSError, pickle.PicklingError, TypeError, AttributeError):
        content = data()
        path.parent.mkdir(exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_native_id()}")
        partial.write_bytes(content)
        os.replace(partial, path)
