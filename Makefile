# The commands of the README: `make demo`, `make test` and `make docs`. Each creates or
# refreshes the virtual environment .venv (with python3 -m venv) and installs what it
# needs; a change to pyproject.toml triggers a reinstall.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench docs clean

demo: $(VENV)/.installed-core
	$(PY) -m fixedopt demo

# mypy reads its settings from pyproject.toml ([tool.mypy]: strict, on fixedopt/).
# The tests run in one process per core (pytest-xdist), a module to a process: most of
# their time is XLA compiling, one core each.
TEST_WORKERS ?= auto
test: $(VENV)/.installed-test
	$(PY) -m ruff check fixedopt tests benchmarks docs
	$(PY) -m mypy
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: $(VENV)/.installed-test
	$(PY) -m ruff check fixedopt tests benchmarks docs
	$(PY) -m ruff format --check fixedopt tests benchmarks docs
	$(PY) -m mypy

# The documentation site, into site/ (open site/index.html); strict: any warning fails.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

bench: $(VENV)/.installed-bench
	$(PY) -m benchmarks.run --suite cpu

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,docs]"
	touch $@

$(VENV)/.installed-docs: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,bench]"
	touch $@

clean:
	rm -rf $(VENV) site *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
