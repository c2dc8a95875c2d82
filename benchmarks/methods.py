"""The methods under comparison: ``METHODS[name](problem, settings) -> Runner``, or
:class:`Skipped` with the reason where a method cannot run here."""

import collections
import dataclasses
import functools
import importlib
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize

import fixedopt
from benchmarks.timing import compiled
from fixedopt.testing_problems import BatchedProblem

GTOL = {"float64": 1e-6, "float32": 1e-3}  # float32 gradients are not accurate to 1e-6
HISTORY = 10  # curvature pairs, as optax's and fixedopt's L-BFGS
jitted = functools.cache(jax.jit)  # one jitted function per public call
# Per-row NumPy outcome of one batched solve (``converged``: as the method reports it).
RowResults = collections.namedtuple("RowResults", ["x", "value", "steps", "converged"])


@dataclasses.dataclass(frozen=True)
class Settings:
    """Max |projected gradient| <= ``gtol`` for all; loops and jaxopt solve the first rows."""

    gtol: float = 1e-6
    max_steps: int = 5000
    loop_rows: int | None = None
    jaxopt_work: int | None = None


@dataclasses.dataclass(frozen=True)
class Runner:
    """``call()`` solves the batch once, blocked; ``collect`` its output; ``rows``: solved."""

    call: Callable[[], Any]
    collect: Callable[[Any], RowResults]
    compiles: bool
    memory: Callable[[], int | None] = lambda: None
    notes: tuple[str, ...] = ()
    rows: int | None = None


class Skipped(Exception):  # noqa: N818 (not an error: a method that cannot run here)
    """A method cannot run here; the message says why (recorded in JSON and markdown)."""


def load(module: str, install: str):
    """``module`` imported (warnings silenced), or :class:`Skipped` saying how to install it."""
    try:
        with warnings.catch_warnings(action="ignore"):  # jaxopt warns that it is unmaintained
            return importlib.import_module(module)
    except Exception as error:  # any failure to import is a reason to skip
        raise Skipped(f"{module} does not import ({type(error).__name__}); {install}") from None


def subsampled(build, rows_of: Callable[[Settings, int], int | None]):
    """``build`` on the first ``rows_of(settings, n)`` rows of the batch (None: all)."""

    def method(problem: BatchedProblem, settings: Settings) -> Runner:
        rows = min(problem.batch, max(1, rows_of(settings, problem.size) or problem.batch))
        runner = build(problem.rows(rows), settings)
        return dataclasses.replace(runner, rows=rows) if rows < problem.batch else runner

    return method


def device_inputs(problem: BatchedProblem) -> tuple:
    """``(x0, fixed, *args)`` as JAX arrays in the problem's dtype."""
    dtype = jnp.dtype(problem.dtype)
    args = tuple(jnp.asarray(a, dtype) for a in problem.args)
    return (jnp.asarray(problem.x0, dtype), jnp.asarray(problem.fixed), *args)


def as_rows(out) -> RowResults:
    """A solve's ``(x, value, steps, converged)``, or fixedopt's ``Solution``, in NumPy."""
    if hasattr(out, "converged"):  # a fixedopt Solution
        out = (out.x, out.value, out.steps, out.converged)
    x, value, steps, converged = out
    value = np.asarray(value, np.float64)
    steps = np.broadcast_to(np.asarray(steps), value.shape)
    return RowResults(np.asarray(x), value, steps, np.asarray(converged))


def compiled_runner(solve, inputs: tuple, notes=()):
    """A runner for a jitted ``solve(*inputs)``, its memory from XLA's analysis."""
    memory = lambda: compiled(solve, *inputs)[1]["peak_bytes"]
    call = lambda: jax.block_until_ready(solve(*inputs))
    return Runner(call, as_rows, compiles=True, memory=memory, notes=tuple(notes))


def loop_runner(problem: BatchedProblem, solve_row, notes=()) -> Runner:
    """Rows one at a time: ``solve_row(i) -> (x, value, steps, converged)``."""
    collect = lambda results: RowResults(*map(np.array, zip(*results)))
    call = lambda: [solve_row(i) for i in range(problem.batch)]
    return Runner(call, collect, compiles=False, notes=tuple(notes))


def row_bounds(problem: BatchedProblem, i: int):
    """Row ``i``'s ``(lower, upper)`` with ``lower == upper == x0`` on fixed entries."""
    n, fixed, x0 = problem.size, problem.fixed[i], problem.x0[i]
    lower, upper = problem.bounds or (np.full(n, -np.inf), np.full(n, np.inf))
    return np.where(fixed, x0, lower), np.where(fixed, x0, upper)


def scipy_lbfgsb(problem: BatchedProblem, settings: Settings) -> Runner:
    """scipy ``minimize(method="L-BFGS-B")``, ``lb == ub`` on fixed entries (the reference)."""
    options = {"gtol": settings.gtol, "ftol": 0.0, "maxiter": settings.max_steps,
               "maxfun": 10 * settings.max_steps}  # fmt: skip
    bounds = [row_bounds(problem, i) for i in range(problem.batch)]  # not timed

    def solve_row(i):
        lower, upper = bounds[i]
        r = scipy.optimize.minimize(problem.numpy_fun, problem.x0[i], args=problem.row_args(i),
                                    jac=True, method="L-BFGS-B", bounds=list(zip(lower, upper)),
                                    options=options)  # fmt: skip
        projected = r.x - np.clip(r.x - r.jac, lower, upper)
        gradient = np.max(np.abs(projected[~problem.fixed[i]]), initial=0.0)
        return r.x, r.fun, r.nit, bool(gradient <= settings.gtol)

    return loop_runner(problem, solve_row)


def scipy_least_squares(problem: BatchedProblem, settings: Settings) -> Runner:
    """scipy ``least_squares`` (trf) on each row's free parameters (it rejects ``lb == ub``)."""

    def solve_row(i):
        free, full, args = ~problem.fixed[i], problem.x0[i].copy(), problem.row_args(i)
        lower, upper = row_bounds(problem, i)

        def reduced(z, jacobian=False):
            full[free] = z
            if jacobian:
                return problem.numpy_jacobian(full, *args)[:, free]
            return problem.numpy_residual(full, *args)

        r = scipy.optimize.least_squares(
            reduced, problem.x0[i][free], jac=lambda z: reduced(z, True), ftol=None, xtol=None,
            bounds=(lower[free], upper[free]), gtol=settings.gtol, max_nfev=settings.max_steps,
        )  # fmt: skip
        full[free] = r.x
        return full, r.cost, r.njev, r.status == 1

    return loop_runner(problem, solve_row, notes=("steps = Jacobian evaluations",))


def lmfit_loop(problem: BatchedProblem, settings: Settings) -> Runner:
    """lmfit ``minimize(method="leastsq")`` per row, fixed parameters ``vary=False``."""
    lmfit = load("lmfit", "pip install lmfit")
    names, (lower, upper) = [f"p{j}" for j in range(problem.size)], problem.bounds

    def solve_row(i):
        params = lmfit.Parameters()
        for j, name in enumerate(names):
            vary = not problem.fixed[i, j]
            params.add(name, value=problem.x0[i, j], vary=vary, min=lower[j] if vary else -np.inf,
                       max=upper[j] if vary else np.inf)  # fmt: skip
        fcn = lambda p, *args: problem.numpy_residual(np.array([p[k].value for k in names]), *args)
        r = lmfit.minimize(fcn, params, args=problem.row_args(i), method="leastsq",
                           calc_covar=False, max_nfev=settings.max_steps * (problem.size + 1),
                           ftol=1e-10, xtol=1e-10)  # fmt: skip
        x = np.array([r.params[k].value for k in names])
        return x, 0.5 * float(np.sum(r.residual**2)), r.nfev, r.success

    notes = ("steps = residual evaluations (finite-difference Jacobian)",
             "ftol = xtol = 1e-10 (MINPACK has no gradient-norm rule)")  # fmt: skip
    return loop_runner(problem, solve_row, notes=notes)


def masked(fun):
    """``fun`` with fixed entries pinned to ``x0`` by ``where + stop_gradient``."""
    return lambda x, x0, fixed, *args: fun(jnp.where(fixed, jax.lax.stop_gradient(x0), x), *args)


def jaxopt_lbfgsb(problem: BatchedProblem, settings: Settings) -> Runner:
    """``jaxopt.LBFGSB`` under ``jit(vmap)``, ``lb == ub`` on fixed entries."""
    jaxopt = load("jaxopt", "pip install jaxopt")
    solver = jaxopt.LBFGSB(fun=problem.jax_fun, tol=settings.gtol, maxiter=settings.max_steps,
                           history_size=HISTORY, stop_if_linesearch_fails=True)  # fmt: skip
    limits = problem.bounds or (-np.inf, np.inf)

    def solve_row(x0, fixed, *args):
        bounds = tuple(jnp.where(fixed, x0, jnp.asarray(b, x0.dtype)) for b in limits)
        state = (result := solver.run(x0, bounds, *args)).state
        return result.params, state.value, state.iter_num, state.error <= settings.gtol

    return compiled_runner(jax.jit(jax.vmap(solve_row)), device_inputs(problem))


def tfp_lbfgs(problem: BatchedProblem, settings: Settings) -> Runner:
    """TFP's ``lbfgs_minimize`` on the whole batch, objective masked; no bounds."""
    if problem.bounds is not None:
        raise Skipped("TFP's lbfgs_minimize has no bounds")
    install = "pip install tfp-nightly (stable 0.25 does not import with jax 0.10)"
    tfp = load("tensorflow_probability.substrates.jax", install)
    value_and_grad = jax.vmap(jax.value_and_grad(masked(problem.jax_fun)))

    def solve(x0, fixed, *args):
        result = tfp.optimizer.lbfgs_minimize(
            lambda x: value_and_grad(x, x0, fixed, *args), initial_position=x0,
            tolerance=settings.gtol, max_iterations=settings.max_steps,
            num_correction_pairs=HISTORY,
        )  # fmt: skip
        return result.position, result.objective_value, result.num_iterations, result.converged

    note = "TFP: one iteration count for the whole batch (steps = the batch's)"
    return compiled_runner(jax.jit(solve), device_inputs(problem), notes=(note,))


def optax_lbfgs(problem: BatchedProblem, settings: Settings) -> Runner:
    """``optax.lbfgs`` per row in a ``while_loop`` under ``jit(vmap)``, objective masked."""
    if problem.bounds is not None:
        raise Skipped("the optax recipe has no bounds")
    program = optax_program(problem.jax_fun, settings.gtol, settings.max_steps)
    return compiled_runner(program, device_inputs(problem))


@functools.cache
def optax_program(objective, gtol: float, max_steps: int):
    """The optax recipe for ``objective``, jitted once per objective and stopping rule."""
    optimizer = optax.lbfgs()

    def solve_row(x0, fixed, *args):
        fun = lambda x: masked(objective)(x, x0, fixed, *args)
        value_and_grad = optax.value_and_grad_from_state(fun)
        norm = lambda state: jnp.max(jnp.where(fixed, 0.0, jnp.abs(optax.tree.get(state, "grad"))))

        def cond(carry):
            _, state, steps = carry
            return (steps == 0) | ((steps < max_steps) & (norm(state) > gtol))

        def body(carry):
            x, state, steps = carry
            value, grad = value_and_grad(x, state=state)
            updates, state = optimizer.update(grad, state, x, value=value, grad=grad, value_fn=fun)
            return jnp.where(fixed, x0, optax.apply_updates(x, updates)), state, steps + 1

        x, state, steps = jax.lax.while_loop(cond, body, (x0, optimizer.init(x0), 0))
        return x, optax.tree.get(state, "value"), steps, norm(state) <= gtol

    return jax.jit(jax.vmap(solve_row))


def optimistix_lbfgs(problem: BatchedProblem, settings: Settings) -> Runner:
    """``optimistix.LBFGS`` per row in a ``while_loop`` under ``jit(vmap)``, objective
    masked; stopped by optax's gradient test, or by optimistix's own test (steps and
    value changes) at the dtype's rounding: a row that no longer moves."""
    if problem.bounds is not None:
        raise Skipped("optimistix's minimisers have no bounds")
    load("optimistix", "pip install optimistix")
    program = optimistix_program(problem.jax_fun, settings.gtol, settings.max_steps)
    notes = ("optimistix: steps = accepted steps (a loop iteration is one evaluation, "
             "at most 10 max_steps)",)  # fmt: skip
    return compiled_runner(program, device_inputs(problem), notes=notes)


@functools.cache
def optimistix_program(objective, gtol: float, max_steps: int):
    """The optimistix recipe for ``objective``: ``solver.init`` and ``solver.step`` (one
    evaluation each: the search's trial, accepted or not) in a ``while_loop``, the state's
    arrays carried as ``optimistix.minimise`` carries them, until the max |gradient| on
    free entries at the accepted point is at most ``gtol`` or the solver's own test
    (``rtol = atol = eps``: its last accepted step changed ``x`` and the value by less
    than their rounding) ends it."""
    equinox, optx = importlib.import_module("equinox"), importlib.import_module("optimistix")
    norm = lambda fixed, state: jnp.max(jnp.where(fixed, 0.0, jnp.abs(state.f_info.grad)))

    def solve_row(x0, fixed, *args):
        eps = float(jnp.finfo(x0.dtype).eps)
        solver = optx.LBFGS(rtol=eps, atol=eps, history_length=HISTORY)
        fun = lambda x, _: (masked(objective)(x, x0, fixed, *args), None)  # (value, aux)
        start = solver.init(fun, x0, None, {}, jax.ShapeDtypeStruct((), x0.dtype), None,
                            frozenset())  # fmt: skip
        arrays, static = equinox.partition(start, equinox.is_array)
        state_of = lambda arrays: equinox.combine(arrays, static)

        def cond(carry):
            _, arrays, evaluations = carry
            state = state_of(arrays)
            going = (state.num_accepted_steps < max_steps) & (evaluations < 10 * max_steps)
            going &= jnp.invert(state.terminate) & (norm(fixed, state) > gtol)
            return (evaluations == 0) | going

        def body(carry):
            x, arrays, evaluations = carry
            x, state, _ = solver.step(fun, x, None, {}, state_of(arrays), frozenset())
            return x, equinox.filter(state, equinox.is_array), evaluations + 1

        x, arrays, _ = jax.lax.while_loop(cond, body, (x0, arrays, 0))
        state = state_of(arrays)
        converged = norm(fixed, state) <= gtol
        return jnp.where(fixed, x0, x), state.f_info.f, state.num_accepted_steps, converged

    return jax.jit(jax.vmap(solve_row))


@functools.cache
def public_call(fun, least_squares: bool, keywords: tuple):
    """The public ``least_squares`` (or ``minimize``): one function per objective and options."""
    solve = fixedopt.least_squares if least_squares else fixedopt.minimize
    return lambda x0, fixed, bounds, *args: solve(fun, x0, fixed, args=args, bounds=bounds,
                                                  **dict(keywords))  # fmt: skip


def fixedopt_call(problem: BatchedProblem, settings: Settings, least_squares=False, **options):
    """The public call on ``problem``, and its inputs ``(x0, fixed, bounds, *args)``."""
    x0, fixed, *args = device_inputs(problem)
    bounds = problem.bounds and tuple(jnp.asarray(b, x0.dtype) for b in problem.bounds)
    fun = problem.jax_residual if least_squares else problem.jax_fun
    keywords = {"abs_gtol": settings.gtol, "gtol": 0.0, "ftol": 0.0, "xtol": 0.0,
                "max_steps": settings.max_steps, "batched": True, **options}  # fmt: skip
    return public_call(fun, least_squares, tuple(keywords.items())), (x0, fixed, bounds, *args)


def fixedopt_method(**options) -> Callable[[BatchedProblem, Settings], Runner]:
    """fixedopt's public call, in the benchmark's ``jit`` (as is for ``split``)."""

    def method(problem: BatchedProblem, settings: Settings) -> Runner:
        if options.get("least_squares") and problem.jax_residual is None:
            raise Skipped("not a least-squares problem")
        call, inputs = fixedopt_call(problem, settings, **options)
        if options.get("strategy") != "split":
            return compiled_runner(jitted(call), inputs)
        note = "split: the public call (packing the concrete mask's indices is timed)"
        run = lambda: jax.block_until_ready(call(*inputs))
        return Runner(run, as_rows, compiles=True, notes=(note,))

    method.__doc__ = f"fixedopt, options {options or 'the defaults'}"
    return method


WHOLE_BATCH = 1 << 30  # lanes >= B: the whole batch in one vmap (what compact=False was)
LOOP_ROWS = lambda settings, n: settings.loop_rows
JAXOPT_ROWS = lambda settings, n: settings.jaxopt_work and settings.jaxopt_work // n
METHODS = {
    "scipy-lbfgsb-loop": subsampled(scipy_lbfgsb, LOOP_ROWS),
    "jaxopt-lbfgsb-vmap": subsampled(jaxopt_lbfgsb, JAXOPT_ROWS),
    "optax-lbfgs-vmap-mask": optax_lbfgs,
    "optimistix-lbfgs-vmap-mask": optimistix_lbfgs,
    "tfp-lbfgs-batch": tfp_lbfgs,
    "fixedopt-mask": fixedopt_method(),
    "fixedopt-mask-vmap": fixedopt_method(lanes=WHOLE_BATCH),  # no lanes: one vmap
    "fixedopt-split": fixedopt_method(strategy="split"),
    "scipy-least-squares-loop": subsampled(scipy_least_squares, LOOP_ROWS),
    "lmfit-loop": subsampled(lmfit_loop, LOOP_ROWS),
    "fixedopt-lm": fixedopt_method(least_squares=True),
}
