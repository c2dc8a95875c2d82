"""One case's first call in this (fresh) process, per program and stage, by process CPU
(nothing compiled ahead, so one program compiles at a time): ``python
investigations/2026-12-06-first-call-h4b/breakdown.py CASE [ROLE]`` with
``FIXEDOPT_CACHE`` a new folder (ROLE ``new``: nothing compiled ahead) or the folder
that a run of ROLE ``user`` (compiles ahead, as a user's call) left (``again``). Each trace's CPU counts the host work since the previous stage ended
(runs included); ``run`` is what follows the last stage. Prints one JSON line."""

import collections
import contextlib
import functools
import json
import re
import sys
import threading
import time

import jax

jax.config.update("jax_enable_x64", True)

from benchmarks import first_call_cases  # noqa: E402
from benchmarks.first_call import BATCHES  # noqa: E402
from fixedopt.testing import no_compiles_ahead  # noqa: E402

EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/core/compile/backend_compile_duration": "xla"}  # fmt: skip
MODEL_TRACES = collections.Counter()


def counted(function, name):
    @functools.wraps(function)  # its signature kept: fixedopt.models reads it
    def wrapper(*args, **kwargs):
        if any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((args, kwargs))):
            MODEL_TRACES[name] += 1
        return function(*args, **kwargs)

    return wrapper


def main() -> None:
    case, role = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "new")
    first_call_cases.spectrum = counted(first_call_cases.spectrum, "spectrum")
    first_call_cases.pvoigt = counted(first_call_cases.pvoigt, "pvoigt")
    from fixedopt._models import lineshapes, peaks

    peaks.PseudoVoigtModel.func = staticmethod(counted(lineshapes.pvoigt, "PseudoVoigtModel"))
    rows = []
    last = [time.process_time(), time.perf_counter()]

    def listen(event, seconds, **kwargs):
        if event not in EVENTS:
            return
        now = [time.process_time(), time.perf_counter()]
        name = re.sub(r"^jit\((.*)\)$", r"\1", str(kwargs.get("fun_name", "?")))
        rows.append((name, EVENTS[event], now[0] - last[0], seconds,
                     threading.current_thread().name))  # fmt: skip
        last[:] = now

    calls = first_call_cases.BUILDERS[case](BATCHES[case][0])
    MODEL_TRACES.clear()
    jax.monitoring.register_event_duration_secs_listener(listen)
    start = [time.process_time(), time.perf_counter()]
    last[:] = start
    with no_compiles_ahead() if role == "new" else contextlib.nullcontext():
        jax.block_until_ready(calls["call"]())
    end = [time.process_time(), time.perf_counter()]
    jax.monitoring.unregister_event_duration_listener(listen)
    print(json.dumps({"case": case, "role": role, "cpu": end[0] - start[0],
                      "wall": end[1] - start[1], "tail_cpu": end[0] - last[0],
                      "rows": rows, "model_traces": dict(MODEL_TRACES)}))  # fmt: skip


if __name__ == "__main__":
    main()
