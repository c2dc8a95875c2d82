"""``ModelResult.params``: lmfit's vocabulary after a fit, for a batch. Each
parameter's ``value``, ``stderr``, ``vary``, ``init_value`` is an array with one
entry per fit, ``correl`` a dict of such arrays; ``expr``, ``min``, ``max`` are as
given (one for every fit, or one per fit)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class FittedParameter:
    """One parameter after a batch of fits (lmfit's ``Parameter`` after ``fit``).

    Attributes:
      name: the parameter's name.
      value: ``(B,)``, its best value in each fit.
      stderr: ``(B,)``, its standard error (0 for a fixed parameter; NaN for a fit
        that failed).
      correl: ``{other: (B,)}``, its correlation with every other parameter (NaN
        where either has no variance: fixed, or a failed fit).
      vary: ``(B,)``, whether it was fitted (varied) in each fit.
      init_value: ``(B,)``, its start.
      expr, min, max: as given (a tie, its bounds).
    """

    name: str
    value: np.ndarray
    stderr: np.ndarray
    correl: dict[str, np.ndarray]
    vary: np.ndarray
    init_value: np.ndarray
    expr: Any
    min: Any
    max: Any


class FittedParameters(dict[str, FittedParameter]):
    """``{name: FittedParameter}`` after a batch of fits (lmfit's ``result.params``).

    Example:
      >>> import numpy as np
      >>> from fixedopt.models import GaussianModel
      >>> x = np.linspace(-3.0, 3.0, 61)
      >>> y = np.stack([2.0 * np.exp(-((x - c) ** 2) / 2) for c in (0.3, -0.5)])
      >>> model = GaussianModel()
      >>> result = model.fit(y, model.make_params(amplitude=5.0, center=0.0, sigma=1.0), x=x)
      >>> print(result.params["center"].value.round(6))
      [ 0.3 -0.5]
      >>> sorted(result.params.valuesdict())[:2]
      ['amplitude', 'center']
    """

    def valuesdict(self) -> dict[str, np.ndarray]:
        """``{name: (B,)}``, the best values (lmfit's name)."""
        return {name: p.value for name, p in self.items()}


def fitted_parameters(result: Any) -> FittedParameters:
    """The :class:`FittedParameters` of a ``ModelResult``."""
    values, stderr, index = result.best_values, result.stderr, result.index
    rows = result.values.shape[0]
    out = FittedParameters()
    for name in result.names:
        given = result.init_params.get(name)
        correl = {other: result.correlation(name, other) for other in index if other != name}
        vary = np.array([name in varying for varying in result.varying], bool)
        start = result.init_values.get(name, np.full(rows, np.nan))
        out[name] = FittedParameter(
            name=name, value=values[name], stderr=stderr[name], correl=correl, vary=vary,
            init_value=np.broadcast_to(np.asarray(start), (rows,)),
            expr=getattr(given, "expr", None), min=getattr(given, "min", -np.inf),
            max=getattr(given, "max", np.inf),
        )  # fmt: skip
    return out


def covar(result: Any) -> np.ndarray:
    """``(B, v, v)``: the covariance of the varied parameters (lmfit's ``covar``,
    in the order of ``var_names``), where every fit varies the same ones."""
    names = var_names(result)
    take = [result.index[name] for name in names]
    return np.asarray(result.covariance[:, take][:, :, take])


def var_names(result: Any) -> list[str]:
    """The varied parameters (lmfit's ``var_names``), the same in every fit."""
    first = list(result.varying[0]) if result.varying else []
    if any(list(v) != first for v in result.varying):
        raise ValueError(
            "the fits vary different parameters (per-fit `vary` or `expr`), so there is no "
            "one `covar`: read `covariance` ((B, n, n), every parameter of `names`, 0 for "
            "a fixed one) or `params[name].correl`"
        )
    return first
