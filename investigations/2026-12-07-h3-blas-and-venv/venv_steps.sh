#!/bin/bash
# The Makefile's venv steps on a fresh copy of HEAD, timed (wall, user, sys): the venv,
# the test install (pass extra pip flags, e.g. --no-compile, as $2), then what the
# tests import first (collection, the docs' and notebooks' packages) and mypy.
# Usage, from the checkout's root: bash venv_steps.sh DIR [PIP_FLAGS]
set -u
dir=$1; flags=${2:-}
rm -rf "$dir"; mkdir -p "$dir"; git archive HEAD | tar x -C "$dir"; cd "$dir"
T="/usr/bin/time -f %e_wall_%U_user_%S_sys"
echo "== venv"; $T python3 -m venv .venv
echo "== install $flags"; $T .venv/bin/python -m pip install --quiet -e ".[test,docs]" $flags
echo "== collect"; $T .venv/bin/python -m pytest --collect-only -q -p no:cacheprovider > /dev/null
echo "== imports"; $T .venv/bin/python -c "import mkdocs.__main__, mkdocs.commands.build, \
mkdocs_jupyter.plugin, nbclient, nbconvert, ipykernel.kernelapp, material, mkdocstrings, \
mkdocstrings_handlers.python, mypy.main, matplotlib.pyplot, flax.nnx, ase, xarray, pandas"
echo "== mypy"; $T .venv/bin/python -m mypy > /dev/null
