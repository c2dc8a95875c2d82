"""Why a row stopped (``Status``) and which test it met (``Reason``), each code with its
message; a leaf module, importing nothing from fixedopt, so that every layer can name
the codes."""

from __future__ import annotations

import enum
from typing import Self


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
    about it.

    Example:
      >>> import fixedopt
      >>> fixedopt.Status(1).name, fixedopt.Status.MAX_STEPS.message
      ('MAX_STEPS', '``max_steps`` iterations ran without meeting a test: raise ``max_steps``.')
    """

    CONVERGED = 0, "A convergence test was met; :attr:`Solution.reason` says which."
    MAX_STEPS = 1, "``max_steps`` iterations ran without meeting a test: raise ``max_steps``."
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
            "wrong or noisy gradient or a non-smooth objective."
        ),
    )
    STALLED = (
        4,
        (
            "No further progress is possible at working precision (the step no longer "
            "changes ``x`` or ``f``), but the row is not stationary to that precision: an "
            "ill-conditioned or badly scaled problem for the dtype; try float64 or rescale."
        ),
    )
    INFEASIBLE = (
        5,
        (
            "The row's bounds are empty or NaN on a free entry (``lower > upper``); the "
            "starting point is returned unchanged."
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
