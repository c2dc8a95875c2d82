#!/usr/bin/env bash
# Issue 18's accelerator checks, prepared for a lent GPU machine (the workplace's
# `device` tool: one NVIDIA H200, Python 3.12, JAX and optax there, no internet), run as
# one command per call so that a failed call can be rerun within the session's minutes.
#
# Here, once: `make device-wheels` (the comparison packages the machine lacks, cp312
# wheels, into the git-ignored .whl/). Then, through the tool, with carry [".whl"]:
#   bash benchmarks/device.sh tiny_large tiny    # 1e7 Gpufit fits, then 1e3..1e6 (~5 min?)
#   bash benchmarks/device.sh gpu                # the minimize suite sized for a device
# Each suite runs under `timeout` (SUITE_SECONDS, default 240) and writes its json, md and
# plots; all of them, and the log, come back as one archive, $OUT/results.tgz (the tool
# returns at most 8 files). Unpack it into benchmarks/results/ and commit what it wrote.
# QUICK=1 runs the suites' --quick sizes: the script's own smoke test, also on a CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: bash benchmarks/device.sh SUITE [SUITE ...]" >&2; exit 2; }
out="${OUT:?OUT: the folder whose files come back}"
results=$(mktemp -d)
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
python3 -c "import jax, fixedopt; print('jax', jax.__version__, jax.devices())" \
    2>&1 | tee "$results/device.log" || exit 1
quick=()
[ "${QUICK:-0}" = 1 ] && quick=(--quick)
status=0
for suite in "$@"; do
    echo "== $suite $(date -u +%H:%M:%S)" | tee -a "$results/device.log"
    timeout "${SUITE_SECONDS:-240}" python3 -m benchmarks.run --suite "$suite" "${quick[@]}" \
        --out "$results" 2>&1 | tee -a "$results/device.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
tar czf "$out/results.tgz" -C "$results" .
exit $status
