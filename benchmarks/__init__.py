"""fixedopt benchmarks: a program, not a test suite (the protocol: shared/BENCHMARKS.md).

Run ``python -m benchmarks.run --suite {solvers,cpu,gpu,micro,auto} [--quick]``; results
(JSON, markdown, PNG) go to ``benchmarks/results/<backend>-<suite>[-quick]-<date>.*``.
The modules, top to bottom:

* :mod:`benchmarks.run` — the command line; :mod:`benchmarks.suites` — what each suite
  runs (problems × sizes × methods, micro-benchmark sizes);
* :mod:`benchmarks.cases` — one case: compile, time interleaved, check quality;
* :mod:`benchmarks.methods` — the methods by name, implemented in
  :mod:`benchmarks.loops` (scipy, lmfit: per-row NumPy loops),
  :mod:`benchmarks.anchors` (jaxopt, TFP) and :mod:`benchmarks.jax_methods` (the optax
  recipe, fixedopt), on the interface of :mod:`benchmarks.base`;
* :mod:`benchmarks.problems`, :mod:`benchmarks.spectra` — the problems: a JAX per-row
  objective, a NumPy objective + gradient, starts and a heterogeneous fixed mask;
* :mod:`benchmarks.micro`, :mod:`benchmarks.strategies` — micro-benchmarks (mask
  overhead, ``keep_fixed``, split vs mask, compilations);
* :mod:`benchmarks.quality` — per-row checks against the reference, in NumPy;
* :mod:`benchmarks.timing` — interleaved timing, compile monitor, environment;
* :mod:`benchmarks.report`, :mod:`benchmarks.tables`, :mod:`benchmarks.micro_tables`,
  :mod:`benchmarks.plots` — markdown and PNG from the JSON records alone.

``benchmarks.scale`` and ``benchmarks.differentiation`` are separate programs.
"""
