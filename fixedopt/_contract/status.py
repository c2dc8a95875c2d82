"""Why a row stopped (``Status``), which test it met (``Reason``) and what one step of
a solver did (``Outcome``), each code with its message; a leaf module, importing
nothing from fixedopt, so that every layer can name the codes."""

from __future__ import annotations

import enum
from typing import Any, Self

import jax
import jax.numpy as jnp

# What to do when the cause is the precision of matrix products (fixedopt._driver.machine:
# on a TPU or GPU a solve runs its float32 products at "highest" unless the user set a
# precision; the bfloat16 passes of a TPU's default made 93% of quad n = 64's rows stop
# STALLED or MAX_STEPS, issue 61).
REDUCED_MATMULS = (
    " On a TPU or GPU under a reduced ``jax_default_matmul_precision`` (float32 products "
    "in bfloat16 or TF32 passes), noisy products are a likely cause: leave it unset "
    '(fixedopt then solves at "highest") or set "highest".'
)


class _Code(enum.IntEnum):
    """An ``int`` code that carries a message a person can read, as optimistix's
    ``RESULTS`` do: each member is written ``NAME = code, message``."""

    message: str

    # Only the members are made with a message; the default lets a type checker accept
    # the lookup ``Status(code)`` (which Enum answers without calling this).
    def __new__(cls, code: int, message: str = "") -> Self:
        member = int.__new__(cls, code)
        member._value_ = code
        member.message = message
        return member


class Status(_Code):
    """Why a row stopped: a verdict to filter on. Stored as ``int32`` in
    :attr:`Solution.status`.

    Compare with ``solution.status == fixedopt.Status.CONVERGED``; turn a code back
    into its name with ``fixedopt.Status(int(code)).name``, and into what it means with
    ``.message``. The README has the table of what each status means and what to do
    about it; the docs page "Solvers and statuses" has each reason's test.

    Example:
      >>> import fixedopt
      >>> fixedopt.Status(1).name, fixedopt.Status.MAX_STEPS.message[:72]
      ('MAX_STEPS', '``max_steps`` iterations ran without meeting a test: raise ``max_steps``')
    """

    CONVERGED = 0, "A convergence test was met; :attr:`Solution.reason` says which."
    MAX_STEPS = (
        1,
        "``max_steps`` iterations ran without meeting a test: raise ``max_steps``."
        + REDUCED_MATMULS,
    )
    NONFINITE = (
        2,
        (
            "The objective or its gradient turned NaN/Inf and no finite step was found; the "
            "last finite iterate is kept."
        ),
    )
    LINESEARCH_FAILED = (
        3,
        (
            "No acceptable step within the line search's (or the damping's) budget while the "
            "objective still changed measurably and the row was not stationary: typically a "
            "wrong or noisy gradient or a non-smooth objective." + REDUCED_MATMULS
        ),
    )
    STALLED = (
        4,
        (
            "No further progress is possible at working precision (the step no longer "
            "changes ``x`` or ``f``), but the row is not stationary to that precision: an "
            "ill-conditioned or badly scaled problem for the dtype; try float64 or rescale."
            + REDUCED_MATMULS
        ),
    )
    INFEASIBLE = (
        5,
        (
            "The row's bounds are empty or NaN on a free entry (``lower > upper``), or "
            "(traced inputs) a fixed value lies outside its bounds, or (least_squares and "
            "curve_fit) its start does; the starting point is returned unchanged."
        ),
    )
    SKIPPED = (
        6,
        (
            "The row was left out of the solve (``where=False``): not solved; its free "
            "entries are NaN."
        ),
    )


class Reason(_Code):
    """Which test a row met. Stored as ``int32`` in :attr:`Solution.reason`; each member
    says what its test is in ``.message``.

    Tolerances are relative (scale-invariant) and default to ``sqrt(eps)`` of the
    dtype; fixed and bound-active entries are excluded from every test.
    """

    NONE = 0, "Not converged."
    GTOL = (
        1,
        (
            "The gradient test: for least-squares solvers, the largest cosine between the "
            "residual and a free Jacobian column (MINPACK); otherwise ``|g| sqrt(gamma/(2|f|))`` "
            "with the last step's curvature scale ``gamma = s.y / y.y``: its square is the "
            "relative reduction a secant model predicts, an estimate of ``(f - f*) / |f|``."
        ),
    )
    FTOL = (
        2,
        (
            "Both the actual and the predicted relative reduction of the objective fell to "
            "``ftol`` (MINPACK's test)."
        ),
    )
    XTOL = (
        3,
        ("The model's step, relative to ``x`` (scaled norms for least squares), fell to ``xtol``."),
    )
    ABS_GTOL = 4, "The absolute test: the max-norm of the projected gradient fell to ``abs_gtol``."
    PRECISION = (
        5,
        (
            "No further progress is possible at working precision and the row is stationary "
            "to that precision: a test holds with tolerance ``sqrt(eps)``."
        ),
    )


RUNNING = -1  # internal: the loop goes on while a row's status is RUNNING
# internal: a lane's row is CONVERGED but waits for its verdict to be certified
# (fixedopt._driver.lanes); it takes no step meanwhile.
PENDING = -2
# internal: a row that claims CONVERGED and has left the loop for its check after it
# (fixedopt._driver.after_loop); stopped, as far as the loop is concerned.
CLAIMED = -3


def busy(status: Any) -> Any:
    """Rows that have not stopped: ``RUNNING``, or ``PENDING`` their certification
    (``status`` a JAX array in a program, or a NumPy one on the host)."""
    return (status == RUNNING) | (status == PENDING)


class Outcome(_Code):
    """What one step of a solver did: :attr:`fixedopt.Step.outcome`, a traced ``int32``.

    The driver moves the row to the step's point if the outcome is accepted
    (:func:`accepted`), and stops the row if it :func:`stops` it, with the status
    :func:`stop_status` gives (unless the row is stationary to working precision: then
    it is ``CONVERGED``, reason ``PRECISION``). Build one with ``jnp.where`` on the
    codes, or with :func:`failure` for the three ways a step can fail.

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt import Outcome
      >>> ok = jnp.array(True)
      >>> outcome = jnp.where(ok, Outcome.ACCEPT, Outcome.FAIL)
      >>> Outcome(int(outcome)).name
      'ACCEPT'
    """

    ACCEPT = 0, "Move the row to the step's point and go on."
    REJECT = 1, "Keep the row's last iterate and go on (say, the damping grew)."
    ACCEPT_AND_STOP = (
        2,
        (
            "Move the row to the step's point, then stop it: no further progress is possible "
            "at working precision (``x`` or ``f`` no longer changes); reported as STALLED."
        ),
    )
    FAIL_NONFINITE = (
        3,
        "Keep the last iterate and stop: an evaluation was NaN or infinite (NONFINITE).",
    )
    FAIL_FLAT = (
        4,
        ("Keep the last iterate and stop: no step makes progress at working precision (STALLED)."),
    )
    FAIL = (
        5,
        "Keep the last iterate and stop: no acceptable step was found (LINESEARCH_FAILED).",
    )


def _is(outcome: jax.Array, *codes: Outcome) -> jax.Array:
    """Whether ``outcome`` is one of ``codes`` (a ``()`` bool array)."""
    hits = [outcome == code for code in codes]
    result = hits[0]
    for hit in hits[1:]:
        result = result | hit
    return jnp.asarray(result)


def accepted(outcome: jax.Array) -> jax.Array:
    """Whether the row moves to the step's point: ``ACCEPT`` or ``ACCEPT_AND_STOP``."""
    return _is(outcome, Outcome.ACCEPT, Outcome.ACCEPT_AND_STOP)


def stops(outcome: jax.Array) -> jax.Array:
    """Whether the step stops the row: ``ACCEPT_AND_STOP`` or one of the failures."""
    return ~_is(outcome, Outcome.ACCEPT, Outcome.REJECT)


def failure(nonfinite: jax.Array, flat: jax.Array) -> jax.Array:
    """The outcome of a step that found no acceptable point: ``FAIL_NONFINITE`` if an
    evaluation was ``nonfinite``, else ``FAIL_FLAT`` if it was ``flat`` (no progress at
    working precision), else ``FAIL``."""
    code = jnp.where(flat, Outcome.FAIL_FLAT, Outcome.FAIL)
    return jnp.where(nonfinite, Outcome.FAIL_NONFINITE, code).astype(jnp.int32)


def stop_status(outcome: jax.Array) -> jax.Array:
    """The failure policy: the :class:`Status` a step with this outcome stops its row
    with (``RUNNING`` if it does not stop it)."""
    status = jnp.where(_is(outcome, Outcome.FAIL), Status.LINESEARCH_FAILED, RUNNING)
    stalled = _is(outcome, Outcome.FAIL_FLAT, Outcome.ACCEPT_AND_STOP)
    status = jnp.where(stalled, Status.STALLED, status)
    status = jnp.where(_is(outcome, Outcome.FAIL_NONFINITE), Status.NONFINITE, status)
    return status.astype(jnp.int32)
