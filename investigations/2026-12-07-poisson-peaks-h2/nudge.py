"""Per flagged row of verdict_peaks.py (its saved npz): the row solved alone from its
start, and from fixedopt's answer with the centre moved 1e-3 inward off its bound:
status, reason, steps and f (lower: the answer was a saddle):

    PYTHONPATH=. .venv/bin/python <this dir>/nudge.py rows.npz float64
"""

import sys
import warnings

import jax
import numpy as np

DTYPE = sys.argv[2]
jax.config.update("jax_enable_x64", DTYPE == "float64")

import jax.numpy as jnp  # noqa: E402

import fixedopt  # noqa: E402

data = np.load(sys.argv[1])
warnings.simplefilter("ignore")


def peak(x, a, mu, s, c):
    return a * jnp.exp(-0.5 * ((x - mu) / s) ** 2) + c


def fit(k, start):
    bounds = (data["lb"].astype(DTYPE), data["ub"].astype(DTYPE))
    x, y = data["x"].astype(DTYPE), data["y"][k][None].astype(DTYPE)
    popt, _, res = fixedopt.curve_fit(peak, x, y, start[None].astype(DTYPE),
                                      fixed=data["fixed"][k][None], bounds=bounds,
                                      batched=True, estimator="poisson", result=True)  # fmt: skip
    s = res.solution
    return (float(np.asarray(popt)[0, 1]), fixedopt.Reason(int(s.reason[0])).name,
            int(s.steps[0]), float(s.value[0]))  # fmt: skip


for k in range(len(data["rows"])):
    alone = fit(k, data["p0"][k])
    nudged = data["popt"][k].copy()
    nudged[1] += 1e-3 if nudged[1] <= data["lb"][1] else -1e-3
    on = fit(k, nudged) if not data["fixed"][k][1] else None
    change = f"{on[3] / alone[3] - 1:.3g}" if on else "-"
    print(f"row {data['rows'][k]}: alone {alone}; nudged {on}; f changes by {change}")
