"""The persistent compilation cache a solve uses by default.

A fixedopt solve compiles for seconds, and every new Python process (a restarted
notebook kernel, a script run again) compiled it again. JAX can keep compiled programs
on disk (its persistent compilation cache) but does nothing until told where; so,
unless you have configured it yourself, the first solve of a process points it at a
folder of your own user's:

- ``$FIXEDOPT_CACHE`` if set: a folder, or ``0`` / ``off`` / ``false`` for none;
- else ``$XDG_CACHE_HOME/fixedopt/jax``, or ``~/.cache/fixedopt/jax``.

A cache you configured (``jax.config.update("jax_compilation_cache_dir", ...)`` or
``JAX_COMPILATION_CACHE_DIR``), or turned off (``jax_enable_compilation_cache``), is
left as it is. JAX keys each program by its code, the compiler's options and flags,
the backend and the versions of jax and jaxlib: a program is reused only where it would
compile to the same machine code. Where fixedopt sets the folder it also lowers
``jax_persistent_cache_min_compile_time_secs`` from JAX's 1 s to
:data:`MIN_COMPILE_SECONDS` (unless you set it): a fit's covariance program compiles in
about half a second, and compiled again in every process. The cache is trusted code:
keep the folder your own. Beside JAX's entries, a folder ``fixedopt-tails`` holds a
file for each CPU block whose tail's program was compiled ahead
(:mod:`fixedopt._driver.ahead`): that program's ``jax.export``, pickled, which a new
process runs (unpickled: code, as the cache's programs are) rather than trace the
tail again. Its name digests the block's program, the versions of jax and jaxlib, the
platform and fixedopt's own source (:func:`fixedopt._numerics.stored.digest`): the
tail's program is not in the block's, so a fixedopt whose code changed never runs a
tail exported by another. A folder ``fixedopt-programs`` holds, named alike, the exports of programs
that read nothing but their arguments (a fit's covariance from the solver's normal
equations: :mod:`fixedopt._numerics.stored`), and the solves of fits whose model
fixedopt names itself (``fixedopt.models``' built-in lineshapes:
:mod:`fixedopt._numerics.program_names`), which a new process runs untraced. A
folder ``fixedopt-probes`` holds one empty mark for each set of XLA:CPU options this
jaxlib was seen to compile (:func:`fixedopt._numerics.cpu_compiler.accepted`), so a
new process compiles no probe program.
"""

from __future__ import annotations

import functools
import os
import pathlib
from typing import Any

import jax
from jax.experimental.compilation_cache import compilation_cache

OFF = ("0", "off", "false", "no", "")
# Programs that compile in at least this long are written to fixedopt's cache (JAX's
# default, 1 s, left a curve_fit's covariance program, ~0.5 s, out).
MIN_COMPILE_SECONDS = 0.1
JAX_MIN_COMPILE_SECONDS = 1.0  # JAX's own default: a value still at it is not the user's


def default_folder() -> pathlib.Path | None:
    """The folder fixedopt gives JAX's persistent cache, or None for none
    (``$FIXEDOPT_CACHE`` set to ``0``, ``off``, ``false`` or ``no``)."""
    chosen = os.environ.get("FIXEDOPT_CACHE")
    if chosen is not None:
        return None if chosen.strip().lower() in OFF else pathlib.Path(chosen).expanduser()
    home = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(home) / "fixedopt" / "jax"


@functools.cache
def use_default_cache() -> str | None:
    """Point JAX's persistent compilation cache at :func:`default_folder` unless it is
    configured or turned off already; once per process. Returns the folder used (or
    None where fixedopt set none)."""
    config: Any = jax.config  # its options are attributes made at run time
    if config.jax_compilation_cache_dir or not config.jax_enable_compilation_cache:
        return None
    folder = default_folder()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: no cache, as before
        return None
    compilation_cache.set_cache_dir(str(folder))
    if config.jax_persistent_cache_min_compile_time_secs == JAX_MIN_COMPILE_SECONDS:
        config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    # JAX decides once per process, at its first compile, whether a cache is used: a
    # process that compiled before this solve must decide again.
    compilation_cache.reset_cache()
    return str(folder)
