"""fixedopt's tests. The folders mirror the package's (``tests/driver/`` tests
``fixedopt/_driver/``, ...); this level holds the repository's own checks (layout,
docs, README, notebooks, benchmarks, compiled programs) and the modules every test may
import: ``helpers`` (shared solvers, problems, references; the status-truth problems
live in ``fixedopt.testing_problems``, which the benchmarks read too). Each
folder is a package, so that a test module is named by its path
(``tests.driver.test_lanes``) and two of the same basename cannot collide."""
