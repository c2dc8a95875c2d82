"""Status-truth families of issue 59: bounded fits in other units (residuals, parameters
or both times powers of ten, starts inside the box and on its bounds), costs that
underflow, and float32 bi-exponential decays of CSF-like voxels. Each row is judged in
float64, apart from the solve: accurate if its parameters are within ``100 sqrt(eps)``
of the minimizer or its cost within ``sqrt(eps)`` of the minimum (relatively; where the
minimum is 0, ``eps ** 1.5`` of the start's cost); truthful if CONVERGED exactly then."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import fixedopt

W = np.linspace(0.0, 1.0, 40)
SPECTRA = np.stack([np.exp(-(((W - 0.3) / 0.1) ** 2)), np.exp(-(((W - 0.6) / 0.15) ** 2))], 1)
RNG_A = np.random.default_rng(0).normal(size=(10, 3))
T = np.linspace(0.0, 3.0, 25)
TE = np.arange(1, 33) * 10.0  # echo times (ms): the slow T2 (1000-2500 ms) lies far beyond


def status_names(solution) -> list[str]:
    """Each row's status, with the reason of a CONVERGED one."""
    names = [fixedopt.Status(int(s)).name for s in np.atleast_1d(solution.status)]
    reasons = [fixedopt.Reason(int(r)).name for r in np.atleast_1d(solution.reason)]
    return [n if r == "NONE" else f"{n} ({r})" for n, r in zip(names, reasons)]


def unmixing(p, data):
    return jnp.asarray(SPECTRA, p.dtype) @ p - data


def box_linear(p, data):
    return jnp.asarray(RNG_A, p.dtype) @ p - data


def decay(p, data):
    return p[0] * jnp.exp(-p[1] * jnp.asarray(T, p.dtype)) + p[2] - data


# name: (residuals, truth, lower, upper, starts (inside, on a bound)); the data are the
# model at the truth (unmixing's second fraction is pushed past its bound: the minimum
# sits on it).
BOUNDED = {
    "unmixing": (unmixing, [0.3, 1.2], [0.0, 0.0], [1.0, 1.0], ([0.5, 0.5], [0.0, 1.0])),
    "box_linear": (box_linear, [1.0, -1.0, 0.5], [-0.3] * 3, [0.3] * 3,
                   ([0.0, 0.0, 0.0], [-0.3, 0.3, -0.3])),
    "decay": (decay, [2.0, 1.3, 0.5], [0.0, 0.0, 0.0], [10.0, 1.0, 10.0],
              ([1.0, 0.5, 0.0], [10.0, 1.0, 0.0])),
}  # fmt: skip
POWERS = {np.float64: (-20, -10, 0, 10, 20), np.float32: (-10, -5, 0, 5, 10)}
SOLVERS = {"LM": fixedopt.LevenbergMarquardt(), "GN": fixedopt.GaussNewton()}


def _clean(residuals, truth, n):
    """The data of exact fits: the model at ``truth`` (``residuals`` at data 0)."""
    return np.asarray(residuals(jnp.asarray(truth, jnp.float64), jnp.zeros(n)), np.float64)


def _reference(fun, start, lower, upper):
    """The float64 minimizer from ``start`` (scipy's trf, tolerances 1e-15)."""
    tight = {"xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15, "method": "trf"}
    return scipy.optimize.least_squares(fun, start, bounds=(lower, upper), **tight).x


def judge(fun, x0, x, reference, dtype) -> bool:
    """Whether ``x`` (units 1) is accurate against ``reference`` (see the module)."""
    eps = float(np.finfo(dtype).eps)
    if not np.all(np.isfinite(x)):
        return False
    cost = lambda z: 0.5 * float(np.sum(fun(z) ** 2))
    best = min(cost(reference), cost(x))
    allowed = math.sqrt(eps) * max(best, eps * max(cost(x0) - best, 0.0))
    scale = np.maximum(np.abs(reference), 1e-3 * np.max(np.abs(reference)))
    error = float(np.max(np.abs(x - reference) / scale))
    return bool(cost(x) - best <= allowed or error <= 100 * math.sqrt(eps))


def bounded_units(dtypes, problems=BOUNDED) -> list[dict]:
    """Every BOUNDED problem, start, solver and dtype, in units ``10^k`` of the
    residuals, the parameters, or both: one batched solve per problem, solver and dtype
    (the units are data)."""
    rows = []
    for name, (model, truth, lower, upper, starts) in problems.items():
        n = len(np.asarray(model(jnp.asarray(truth, jnp.float64), 0.0)))
        data = _clean(model, truth, n)
        fun = lambda z, model=model, data=data: np.asarray(model(jnp.asarray(z), data))
        references = [_reference(fun, np.asarray(s, float), lower, upper) for s in starts]
        scaled = lambda p, y, u, v, model=model: v * model(p / u, y)
        for (solver_name, solver), dtype in ((s, d) for s in SOLVERS.items() for d in dtypes):
            cases = [(i, axis, power) for i in range(len(starts))
                     for axis in ("residuals", "parameters", "both")
                     for power in POWERS[dtype]]  # fmt: skip
            x_units = np.array([10.0**k if a != "residuals" else 1.0 for _, a, k in cases])
            r_units = np.array([10.0**k if a != "parameters" else 1.0 for _, a, k in cases])
            x0 = np.array([starts[i] for i, *_ in cases]) * x_units[:, None]
            box = [np.broadcast_to(np.asarray(b, float), x0.shape) * x_units[:, None]
                   for b in (lower, upper)]  # fmt: skip
            batch = jnp.asarray(np.broadcast_to(data, (len(cases), data.size)), dtype)
            solution = fixedopt.least_squares(
                scaled, jnp.asarray(x0, dtype), False, batched=True, solver=solver,
                args_axes=(0, 0, 0),
                args=(batch, jnp.asarray(x_units, dtype), jnp.asarray(r_units, dtype)),
                bounds=tuple(jnp.asarray(b, dtype) for b in box))  # fmt: skip
            statuses = status_names(solution)
            for row, (i, axis, power) in enumerate(cases):
                x = np.asarray(solution.x[row], np.float64) / x_units[row]
                accurate = judge(fun, np.asarray(starts[i], float), x, references[i], dtype)
                rows.append({"kind": "units_bounded", "problem": name,
                             "start": ("inside", "on bound")[i], "solver": solver_name,
                             "dtype": np.dtype(dtype).name, "units_of": axis,
                             "unit": 10.0**power, "status": statuses[row],
                             "steps": int(solution.steps[row]), "accurate": accurate,
                             "truthful": accurate == bool(solution.converged[row])})  # fmt: skip
    return rows


def difference(x, t):
    return x - t


def line(t, a, b):
    return a * t + b


UNDERFLOW_UNITS = {np.float32: (1.0, 1e-20, 1e-18, 1e-22),
                   np.float64: (1.0, 1e-155, 1e-150, 1e-160)}  # fmt: skip


def underflow(dtypes, count: int = 4) -> list[dict]:
    """``x - t`` from ``[1, 1] s`` to ``t = [5, -3] s``, and a line fitted by
    ``curve_fit``, with ``s`` where the cost underflows (and 1): the first ``count``
    units of UNDERFLOW_UNITS."""
    rows = []
    for dtype in dtypes:
        for s in UNDERFLOW_UNITS[dtype][:count]:
            target = jnp.asarray(np.array([5.0, -3.0]) * s, dtype)
            start = jnp.asarray(np.array([1.0, 1.0]) * s, dtype)
            for solver_name, solver in SOLVERS.items():
                solution = fixedopt.least_squares(difference, start, False,
                                                  args=(target,), solver=solver)  # fmt: skip
                x = np.asarray(solution.x, np.float64) / s
                rows.append(_underflow_row("x - t", solver_name, dtype, s, solution,
                                           x, np.array([5.0, -3.0])))  # fmt: skip
            t = np.linspace(0.0, 1.0, 10)
            line = lambda t, a, b: a * t + b
            popt, _, _, message, _ = fixedopt.curve_fit(
                line, jnp.asarray(t, dtype), jnp.asarray((2.0 * t + 1.0) * s, dtype),
                p0=jnp.asarray([s, s], dtype), full_output=True)  # fmt: skip
            rows.append(_underflow_row("curve_fit line", "LM", dtype, s, message,
                                       np.asarray(popt, np.float64) / s,
                                       np.array([2.0, 1.0])))  # fmt: skip
    return rows


def _underflow_row(problem, solver, dtype, s, solution, x, truth) -> dict:
    if isinstance(solution, str):  # curve_fit's message: "STATUS (REASON): ..."
        status = solution.split(":")[0]
        converged = status.startswith("CONVERGED")
    else:
        status, converged = status_names(solution)[0], bool(solution.converged)
    eps = float(np.finfo(dtype).eps)
    accurate = bool(np.max(np.abs(x - truth) / np.abs(truth)) <= 100 * math.sqrt(eps))
    return {"kind": "underflow", "problem": problem, "solver": solver,
            "dtype": np.dtype(dtype).name, "unit": s, "status": status, "accurate": accurate,
            "truthful": accurate == converged}  # fmt: skip


def biexponential_data(rows: int, seed: int = 1):
    """CSF-like voxels: ``S0 (f e^(-t/T2f) + (1 - f) e^(-t/T2s))`` with Rician noise;
    starts, bounds and data (float64)."""
    rng = np.random.default_rng(seed)
    s0, frac = rng.uniform(500, 3000, rows), rng.uniform(0.02, 0.3, rows)
    t2f, t2s, snr = (
        rng.uniform(8, 25, rows),
        rng.uniform(1000, 2500, rows),
        rng.uniform(10, 100, rows),
    )
    fast, slow = np.exp(-TE / t2f[:, None]), np.exp(-TE / t2s[:, None])
    clean = s0[:, None] * (frac[:, None] * fast + (1 - frac[:, None]) * slow)
    sigma = (s0 / snr)[:, None]
    noise = sigma * rng.normal(size=clean.shape), sigma * rng.normal(size=clean.shape)
    data = np.abs(clean + noise[0] + 1j * noise[1])
    lower, upper = np.array([0.0, 0.0, 1.0, 100.0]), np.array([np.inf, 1.0, 100.0, 3000.0])
    starts = np.stack(
        [data[:, 0], np.full(rows, 0.5), np.full(rows, 20.0), np.full(rows, 500.0)], 1
    )
    return starts, (lower, upper), data


def biexponential(p, data):
    te = jnp.asarray(TE, p.dtype)
    return p[0] * (p[1] * jnp.exp(-te / p[2]) + (1 - p[1]) * jnp.exp(-te / p[3])) - data


def biexponential_family(dtypes, rows: int = 256) -> list[dict]:
    """Per dtype, the voxels' statuses, judged from the returned point polished by scipy's
    trf in float64."""
    starts, (lower, upper), data = biexponential_data(rows)
    out = []
    for dtype in dtypes:
        solution = fixedopt.least_squares(
            biexponential, jnp.asarray(starts, dtype), False, args=(jnp.asarray(data, dtype),),
            batched=True, args_axes=(0,),
            bounds=(jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)))  # fmt: skip
        statuses = status_names(solution)
        for i in range(rows):
            fun = lambda z, i=i: np.asarray(biexponential(jnp.asarray(z), data[i]))
            x = np.asarray(solution.x[i], np.float64)
            reference = _reference(fun, np.clip(x, lower, upper), lower, upper)
            accurate = judge(fun, starts[i], x, reference, dtype)
            out.append({"kind": "biexponential", "dtype": np.dtype(dtype).name, "row": i,
                        "status": statuses[i], "steps": int(solution.steps[i]),
                        "accurate": accurate,
                        "truthful": accurate == bool(solution.converged[i])})  # fmt: skip
    return out


def family_summary(rows: list[dict]) -> list[dict]:
    """Per family and dtype: rows, truthful, false CONVERGED, accurate not CONVERGED."""
    out = []
    for kind, dtype in dict.fromkeys((r["kind"], r["dtype"]) for r in rows):
        mine = [r for r in rows if (r["kind"], r["dtype"]) == (kind, dtype)]
        out.append({"kind": "family_summary", "family": kind, "dtype": dtype, "rows": len(mine),
                    "truthful": sum(r["truthful"] for r in mine),
                    "false_converged": sum(r["status"].startswith("CONVERGED")
                                           and not r["accurate"] for r in mine),
                    "accurate_not_converged": sum(r["accurate"] and not r["truthful"]
                                                  for r in mine)})  # fmt: skip
    return out


def invariance(rows: list[dict]) -> list[dict]:
    """Per bounded problem, start, solver, dtype and axis of units: the verdicts seen
    across the units (one: invariant)."""
    out = []
    keys = dict.fromkeys((r["problem"], r["start"], r["solver"], r["dtype"], r["units_of"])
                         for r in rows if r["kind"] == "units_bounded")  # fmt: skip
    for key in keys:
        mine = [r for r in rows if r["kind"] == "units_bounded"
                and (r["problem"], r["start"], r["solver"], r["dtype"],
                     r["units_of"]) == key]  # fmt: skip
        verdicts = sorted({r["truthful"] and r["status"].startswith("CONVERGED") for r in mine})
        out.append({"kind": "units_invariance", "problem": key[0], "start": key[1],
                    "solver": key[2], "dtype": key[3], "units_of": key[4],
                    "statuses": sorted({r["status"].split(" ")[0] for r in mine}),
                    "invariant": len(verdicts) == 1})  # fmt: skip
    return out


def run(dtypes, quick: bool = False) -> list[dict]:
    """Every family, its summary and the units' invariance (quick: the decay alone, two
    units of underflow, 4 voxels)."""
    jax.config.update("jax_enable_x64", True)
    problems = {"decay": BOUNDED["decay"]} if quick else BOUNDED
    rows = [*bounded_units(dtypes, problems), *underflow(dtypes, 2 if quick else 4)]
    jax.clear_caches()  # each family's programs dropped: a whole suite ran out of memory maps
    rows += biexponential_family(dtypes, 4 if quick else 256)
    return family_summary(rows) + invariance(rows) + rows
