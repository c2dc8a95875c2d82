"""The warnings fixedopt gives about a call that runs but may not do what was meant:
precision the user did not ask to lose, and covariances that could not be estimated.

``OptimizeWarning`` is scipy's name for the second, and code ported from scipy
filters or expects ``scipy.optimize.OptimizeWarning``. scipy is not a dependency of
fixedopt, and importing ``scipy.optimize`` costs about 0.7 s, more than a new
process's budget. So :class:`OptimizeWarning` is fixedopt's own (a ``UserWarning``),
and when ``scipy.optimize`` is already imported (the only way a filter or a
``pytest.warns`` for scipy's class can exist) the warning is raised as a subclass of
both, so that either class catches it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import jax
import numpy as np

X64_FIX = 'jax.config.update("jax_enable_x64", True)'


class OptimizeWarning(UserWarning):
    """A fit's result is not what the call could be taken to promise, as
    ``scipy.optimize.OptimizeWarning``: e.g. its covariance could not be estimated.
    Raised as a subclass of scipy's class too when ``scipy.optimize`` is imported."""


class PrecisionWarning(UserWarning):
    """A float64 input was cast to float32 because JAX's 64-bit mode is off."""


_WITH_SCIPY: dict[type[Warning], type[Warning]] = {}


def _with_scipy(scipy_class: type[Warning]) -> type[Warning]:
    """One class per scipy class, so that the warnings registry sees one category."""
    if scipy_class not in _WITH_SCIPY:
        bases = (OptimizeWarning, scipy_class)
        _WITH_SCIPY[scipy_class] = type("OptimizeWarning", bases, {"__module__": __name__})
    return _WITH_SCIPY[scipy_class]


def optimize_warning_class() -> type[Warning]:
    """:class:`OptimizeWarning`, a subclass of scipy's too if scipy is imported."""
    scipy_optimize = sys.modules.get("scipy.optimize")
    scipy_class = getattr(scipy_optimize, "OptimizeWarning", None)
    if isinstance(scipy_class, type) and issubclass(scipy_class, Warning):
        return _with_scipy(scipy_class)
    return OptimizeWarning


def caller_stacklevel() -> int:
    """``stacklevel`` for a warning raised here, pointing at the first caller outside
    fixedopt (the user's line, whichever public function they called)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("fixedopt."):
        frame, level = frame.f_back, level + 1
    return level


def warn_optimize(message: str) -> None:
    warnings.warn(message, optimize_warning_class(), stacklevel=caller_stacklevel())


def _is_float64(leaf: Any) -> bool:
    """A NumPy float64 array or scalar (a JAX array already has its dtype; a Python
    float is weakly typed and takes the computation's)."""
    return isinstance(leaf, (np.ndarray, np.generic)) and leaf.dtype == np.float64


def float64_inputs(inputs: dict[str, Any]) -> list[str]:
    """The names of ``inputs`` with a NumPy float64 leaf."""
    return [name for name, value in inputs.items() if any(map(_is_float64, jax.tree.leaves(value)))]


def warn_if_float64_dropped(inputs: dict[str, Any]) -> None:
    """One :class:`PrecisionWarning` naming every input of ``inputs`` that holds
    float64 data JAX will cast to float32 (64-bit mode off, JAX's default)."""
    if jax.config.read("jax_enable_x64"):
        return
    names = float64_inputs(inputs)
    if not names:
        return
    listed = ", ".join(f"`{name}`" for name in names)
    message = (
        f"{listed}: float64 data cast to float32, because JAX's 64-bit mode is off (its "
        "default): the solve runs in float32 and returns float32 values (fixed values "
        "come back as their float32 casts, bit for bit). To solve in float64, run "
        f"{X64_FIX} at the start of the program; to stay in float32 without this "
        "warning, pass float32 arrays."
    )
    warn_once(message, PrecisionWarning)


# (category, message, file, line) of the warnings shown under the "default" action.
_SHOWN: set[tuple[type[Warning], str, str, int]] = set()


def _action(category: type[Warning], message: str) -> str:
    """The action of the first filter that applies to ``category`` and ``message``
    (its module and line are not compared: fixedopt's own notices, one per call site)."""
    for action, text, kind, _, _ in warnings.filters:
        if issubclass(category, kind) and (text is None or text.match(message)):
            return str(action)
    return "default"


def warn_once(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` at the caller's line, shown once per line under the "default"
    action as promised: Python's own registry forgets what it showed whenever a filter
    changes (JAX's compiler enters ``warnings.catch_warnings``), so a warning from a
    loop reappeared (twice in five identical calls). Other actions ("always",
    "error", a test's ``pytest.warns``) see every call."""
    level = caller_stacklevel()
    frame = sys._getframe(level - 1)  # caller_stacklevel counts from its own caller
    key = (category, message, frame.f_code.co_filename, frame.f_lineno)
    if _action(category, message) == "default":
        if key in _SHOWN:
            return
        _SHOWN.add(key)
    warnings.warn(message, category, stacklevel=level)
