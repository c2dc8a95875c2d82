#!/usr/bin/env bash
# One device call (run from a copy of the tree): optax from the machine's index, then
# PART: "b" (Model.fit's covariance precision: the measurement and the chip's tests),
# "a" (first calls at XLA's default and lower effort, RUNS), "flags" (libtpu's XLA
# options whose names speak of effort, autotuning or compile). Results in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
site=/tmp/fixedopt-site
python3 -c "import optax" 2> /dev/null || PIP_CONFIG_FILE=/dev/null python3 -m pip install \
    --isolated -q --only-binary=:all: --no-cache-dir --index-url file:///opt/pypi/simple \
    --target "$site" optax || exit 4
export PYTHONPATH="$PWD:${PYTHONPATH:-}:$site" PYTHONUNBUFFERED=1
here=investigations/2026-12-07-h2-effort
for part in "$@"; do
    echo "== $part $(date -u +%T)"
    case "$part" in
    b)
        timeout 150 python3 $here/pcov_precision.py "$OUT" 2>&1 | tail -40
        timeout 150 python3 -m pytest -p no:cacheprovider -o addopts=-q tests/test_device.py \
            -k "covariance" --durations=5 2>&1 | tail -15 ;;
    flags)
        so=$(python3 -c "import libtpu, pathlib; print(next(pathlib.Path(libtpu.__file__).parent.rglob('libtpu*.so')))")
        strings "$so" | grep -E '^xla_[a-z0-9_]*(effort|autotun|compile|fusion_|level|passes|opt_)' \
            | sort -u > "$OUT/libtpu_flags.txt"; wc -l "$OUT/libtpu_flags.txt" ;;
    a)
        timeout "${A_SECONDS:-330}" python3 $here/effort.py "$OUT/eff" ${RUNS:-spot:default spot:e-1}
        tar czf "$OUT/eff.tgz" -C "$OUT" eff && rm -rf "$OUT/eff" ;;
    esac
done
