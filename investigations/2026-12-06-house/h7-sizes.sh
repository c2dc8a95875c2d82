#!/bin/bash
# usage: sizes.sh <checkout> <out>
cd "$1" && for c in spectra rk4; do PYTHONPATH=. /work/wt/h7/.venv/bin/python -c "
from benchmarks.first_call import program_size; import json; print('$c', json.dumps(program_size('$c')))"; done > "$2" 2>&1
