#!/bin/bash
# usage (from a checkout's root): flags.sh NAME [XLA flags...]
# Writes NAME.txt (the 54 hashes, or 27 with HASH=a float64-only copy) and appends the
# CPU seconds to flags.log; diff two NAME.txt files for bit-identity.
here=$(dirname "$0")
name=$1; shift
XLA_FLAGS="$*" FIXEDOPT_CACHE=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
    .venv/bin/python "$here/measure.py" "${HASH:-$here/hash_solves.py}" > "$name.txt" 2> "$name.err"
echo "$name [$*] $(grep MEASURE "$name.err") load=$(cut -d' ' -f1 /proc/loadavg)" >> flags.log
