"""fixedopt benchmarks (protocol: shared/BENCHMARKS.md), one command line for every suite:
``python -m benchmarks.run --suite NAME [--quick] [--out DIR]`` (:mod:`benchmarks.run`)."""
