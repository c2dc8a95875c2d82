"""fixedopt benchmarks: programs with one command line (protocol: shared/BENCHMARKS.md).

``python -m benchmarks.run --suite NAME [--quick] [--out DIR]`` writes
``<backend>-<suite>[-quick]-<date>.{json,md,png}`` to ``benchmarks/results/``. Modules:
:mod:`~benchmarks.run` (command line), :mod:`~benchmarks.suites` (solver suites:
cases and sizes), :mod:`~benchmarks.cases` (one case: time interleaved, check quality),
:mod:`~benchmarks.methods` and :mod:`~benchmarks.loops` (the methods compared),
:mod:`~benchmarks.problems` (the problem registry), :mod:`~benchmarks.timing`,
:mod:`~benchmarks.report` and :mod:`~benchmarks.plots` (markdown and PNG from the JSON);
suites of their own: :mod:`~benchmarks.micro`, :mod:`~benchmarks.scale`,
:mod:`~benchmarks.differentiation`, :mod:`~benchmarks.fusion`,
:mod:`~benchmarks.status_truth`, :mod:`~benchmarks.ase`.
"""
