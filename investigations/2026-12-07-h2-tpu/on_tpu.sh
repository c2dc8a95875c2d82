#!/usr/bin/env bash
# On the TPU machine (the `device` tool), from the carried trees' parent folder:
# `bash .tpu-h2/investigations/2026-12-07-h2-tpu/on_tpu.sh bench|check`.
# bench: benchmarks.first_call (float32, first call and new process) of spot,
# spectra_slow and models at the base (.tpu-h2-base, 3af40d8) then this tree (.tpu-h2),
# fresh processes, the same machine session; check: models' first call again (its
# covariance compiled ahead at any size), pcov_check.py and spot_pad_ab.py. optax from
# the machine's own index, after its JAX on the path.
set -uo pipefail
root=$PWD
site=/tmp/fixedopt-site
log="$OUT/log-$1.txt"
if ! PYTHONPATH="${PYTHONPATH:-}:$site" python3 -c "import optax" 2> /dev/null; then
    PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --only-binary=:all: \
        --no-cache-dir --index-url file:///opt/pypi/simple --target "$site" optax || exit 1
fi
export PYTHONUNBUFFERED=1
machine_path=${PYTHONPATH:-}
in_tree() {  # in_tree DIR SECONDS COMMAND...: COMMAND in DIR, its fixedopt first
    local dir=$1 seconds=$2
    shift 2
    echo "== $dir $* $(date -u +%H:%M:%S)" | tee -a "$log"
    (cd "$root/$dir" && PYTHONPATH="$PWD:$machine_path:$site" timeout "$seconds" "$@") 2>&1 \
        | tee -a "$log"
}
if [ "$1" = bench ]; then
    for pair in .tpu-h2-base:h2b-base-3af40d8 .tpu-h2:h2b-padhost; do
        in_tree "${pair%%:*}" 270 python3 -m benchmarks.first_call --float32 --first-only \
            --repeats 1 --cases spot spectra_slow models --label "${pair##*:}" --out "$OUT"
    done
else  # models (its covariance ahead at any size), the pcov check, the spot's compiled call
    for pair in .tpu-h2-base:h2b-base2-3af40d8 .tpu-h2:h2b-modelsahead; do
        in_tree "${pair%%:*}" 100 python3 -m benchmarks.first_call --float32 --first-only \
            --repeats 1 --cases models --label "${pair##*:}" --out "$OUT"
    done
    in_tree .tpu-h2 150 python3 investigations/2026-12-07-h2-tpu/pcov_check.py "$OUT/pcov.json"
    in_tree .tpu-h2 60 python3 investigations/2026-12-07-h2-tpu/spot_pad_ab.py "$OUT/spot_pad.json"
fi
echo "== done $(date -u +%H:%M:%S)" | tee -a "$log"
