"""Every row's status, reason, steps, answer and cost of the peak audit's case (the data
of verdict_peaks.py beside this file, same seed), saved to compare two trees row by row:

    PYTHONPATH=<tree> .venv/bin/python statuses.py float64 OUT.npz
"""

import pathlib
import runpy
import sys
import warnings

import numpy as np

DTYPE, OUT = sys.argv[1], sys.argv[2]
sys.argv = [sys.argv[0], DTYPE, "300"]  # verdict_peaks reads its dtype from argv
audit = runpy.run_path(str(pathlib.Path(__file__).with_name("verdict_peaks.py")), run_name="lib")
audit["poisson_case"]("decay", 300)  # the peak's data follow the decay's
f, x, y, p0, fixed, (lb, ub) = audit["poisson_case"]("peak", 300)
import fixedopt  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _, _, res = fixedopt.curve_fit(f, x.astype(DTYPE), y.astype(DTYPE), p0.astype(DTYPE),
                                   fixed=fixed, bounds=(lb, ub), batched=True, result=True,
                                   estimator="poisson")  # fmt: skip
s = res.solution
np.savez(OUT, status=np.asarray(s.status), reason=np.asarray(s.reason),
         steps=np.asarray(s.steps), popt=np.asarray(res.popt, float),
         value=np.asarray(s.value, float), fixed=fixed)  # fmt: skip
