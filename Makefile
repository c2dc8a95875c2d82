# The two commands of the README: `make demo` and `make test`. Each creates or
# refreshes the virtual environment .venv (with python3 -m venv) and installs what it
# needs; a change to pyproject.toml triggers a reinstall.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench clean

demo: $(VENV)/.installed-core
	$(PY) -m fixedopt demo

test: $(VENV)/.installed-test
	$(PY) -m ruff check fixedopt tests benchmarks
	$(PY) -m pytest

lint: $(VENV)/.installed-test
	$(PY) -m ruff check fixedopt tests benchmarks
	$(PY) -m ruff format --check fixedopt tests benchmarks

bench: $(VENV)/.installed-bench
	$(PY) -m benchmarks.run --suite cpu

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,bench]"
	touch $@

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .hypothesis
