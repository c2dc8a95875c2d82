# The commands of the README: `make demo`, `make test` and `make docs`. Each creates or
# refreshes the virtual environment .venv (with python3 -m venv) and installs what it
# needs; a change to pyproject.toml triggers a reinstall.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-device lint bench docs clean device-wheels

demo: $(VENV)/.installed-core
	$(PY) -m fixedopt demo

# mypy reads its settings from pyproject.toml ([tool.mypy]: strict, on fixedopt/).
# The tests run in one process per core (pytest-xdist), a module to a process: most of
# their time is XLA compiling, one core each. Where it goes: make test
# TEST_ARGS=--cost-report=cost.jsonl (conftest.py: CPU seconds and compiled programs of
# each module, a JSON line each).
TEST_WORKERS ?= auto
TEST_ARGS ?=
test: $(VENV)/.installed-test
	$(PY) -m ruff check fixedopt tests benchmarks docs
	$(PY) -m mypy
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(TEST_ARGS)

# On a TPU or GPU machine (JAX, pytest and hypothesis installed there; fixedopt from this
# checkout): the float32 slice of tests/test_device.py, in one process (a chip admits one
# program at a time), a few minutes. On a CPU-only machine it is skipped unless
# FIXEDOPT_DEVICE_SLICE=1.
test-device:
	PYTHONPATH=$(CURDIR):$${PYTHONPATH:-} $(PYTHON) -m pytest \
		tests/test_device.py tests/driver/test_machine.py

lint: $(VENV)/.installed-test
	$(PY) -m ruff check fixedopt tests benchmarks docs
	$(PY) -m ruff format --check fixedopt tests benchmarks docs
	$(PY) -m mypy

# The documentation site, into site/ (open site/index.html); strict: any warning fails.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

bench: $(VENV)/.installed-bench
	$(PY) -m benchmarks.run --suite cpu

# The comparison packages a lent GPU machine lacks, as cp312 manylinux wheels in .whl/
# (ignored by git), for benchmarks/device.sh: the versions of this machine's bench extra.
# For a TPU machine's Python: make device-wheels DEVICE_PYTHON=3.11.
DEVICE_PYTHON ?= 3.12
DEVICE_WHEELS := jaxopt==0.8.5 tfp-nightly==0.26.0.dev20261027 dm-tree==0.1.10 gast==0.7.0 \
	decorator==5.3.1 lmfit==1.3.4 asteval==1.0.10 uncertainties==3.2.3 dill==0.4.1 \
	optimistix==0.1.0 equinox==0.13.8 lineax==0.1.1 jaxtyping==0.3.11 wadler_lindig==0.1.8 \
	typing_extensions==4.16.0
# The checkout's exclude file (a worktree's .git is a file: its exclude is the main one's).
EXCLUDE = $(shell git rev-parse --git-path info/exclude)
device-wheels:
	grep -qx '/.whl/' $(EXCLUDE) || echo /.whl/ >> $(EXCLUDE)
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version $(DEVICE_PYTHON) \
		--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d .whl $(DEVICE_WHEELS)

# The venv's own pip (Python's bundled one, 23.2 with Python 3.11) installs everything
# here: upgrading it first cost a look-up, ~10 s on a fresh clone, for nothing they need.
$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-core: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

# --no-compile: pip byte-compiles every module it installs (~10,700 files), most of which
# the tests never import; Python compiles those they do on first import (measured on a
# fresh clone, under load: the install 67.8 against 37.3 CPU s; then collecting the
# tests 7.0 s more, importing the docs' and notebooks' packages 5.5 s more).
$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --no-compile -e ".[test,docs]"
	touch $@

$(VENV)/.installed-docs: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,bench]"
	touch $@

clean:
	rm -rf $(VENV) site *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
