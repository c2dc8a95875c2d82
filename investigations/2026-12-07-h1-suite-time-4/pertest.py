"""Each test's CPU seconds (its subprocesses' included) and compiled XLA programs (a
persistent-cache hit not counted), written to ``$PERTEST_OUT`` longest first."""

import os
import resource
import time

import jax
import pytest

COMPILE = "/jax/core/compile/backend_compile_duration"
HIT = "/jax/compilation_cache/cache_hits"
_programs = [0]
_rows = []


def _compiled(event, *_, **__):
    _programs[0] += event == COMPILE


def _loaded(event, *_, **__):
    _programs[0] -= event == HIT


jax.monitoring.register_event_duration_secs_listener(_compiled)
jax.monitoring.register_event_listener(_loaded)


def _cpu():
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, programs = _cpu(), _programs[0]
    yield
    _rows.append((round(_cpu() - cpu, 2), _programs[0] - programs, item.nodeid))


def pytest_sessionfinish(session):
    with open(os.environ.get("PERTEST_OUT", "pertest.txt"), "w") as out:
        for row in sorted(_rows, reverse=True):
            out.write(f"{row[0]:6.2f} {row[1]:4d} {row[2]}\n")
