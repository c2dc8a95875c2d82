"""fixedopt benchmarks (protocol: shared/BENCHMARKS.md), run by one command line:
``python -m benchmarks.run --suite NAME [--quick] [--out DIR]`` (:mod:`benchmarks.run`).
Solver suites are plans (:mod:`~benchmarks.suites`) of cases (:mod:`~benchmarks.cases`)
of methods (:mod:`~benchmarks.methods`) on problems (:mod:`~benchmarks.problems`);
:mod:`~benchmarks.timing` times, :mod:`~benchmarks.report` and :mod:`~benchmarks.plots`
draw from the JSON records; the other suites have a module each.
"""
