#!/usr/bin/env bash
# The accelerator runs, prepared for a lent machine (the workplace's `device` tool: one
# TPU v5e chip with Python 3.11, or an NVIDIA GPU with Python 3.12; JAX installed there,
# fixedopt not; no internet), one command per call so that a failed call can be rerun
# within the session's minutes. SUITE is a suite of benchmarks.run (tpu_peers,
# tiny, tiny_large, gpu, ...) or `tests`: the float32 slice of the suite (make test-device).
#
#   bash benchmarks/device.sh tests tpu_peers    # on a TPU: the slice, then the tpu_peers suite
#   bash benchmarks/device.sh tiny_large tiny    # 1e7 Gpufit fits, then 1e3..1e6
#
# optax (a dependency of fixedopt) and what it needs come from the machine's own package
# index (/opt/pypi/simple, a TPU machine's) where it is missing, installed after the
# machine's JAX on the path. Comparison packages no index there holds travel as wheels
# in .whl/ (with carry [".whl"]): `make device-wheels` (cp312, a GPU machine's Python;
# DEVICE_PYTHON=3.11 for a TPU's). Each suite runs under `timeout` (SUITE_SECONDS,
# default 240) and writes its json and md (plots where matplotlib is installed); all of
# them, and the log, come back as one archive, $OUT/results.tgz (the tool returns at most
# 8 files). Unpack it into benchmarks/results/ and commit what it wrote. QUICK=1 runs the
# suites' --quick sizes: the script's own smoke test, also on a CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: bash benchmarks/device.sh SUITE [SUITE ...]" >&2; exit 2; }
out="${OUT:?OUT: the folder whose files come back}"
results=$(mktemp -d)
site=/tmp/fixedopt-site
index=/opt/pypi/simple
if compgen -G ".whl/*.whl" > /dev/null; then
    PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps \
        --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || exit 1
fi
if ! PYTHONPATH="${PYTHONPATH:-}:$site" python3 -c "import optax" 2> /dev/null && [ -d "$index" ]; then
    PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --only-binary=:all: \
        --no-cache-dir --index-url "file://$index" --target "$site" optax || exit 1
fi
# Appended: the machine's own JAX and NumPy stay first (pip brings others along).
export PYTHONPATH="$PWD:${PYTHONPATH:-}:$site" PYTHONUNBUFFERED=1
python3 -c "import jax, fixedopt; print('jax', jax.__version__, jax.devices())" \
    2>&1 | tee "$results/device.log" || exit 1
quick=()
[ "${QUICK:-0}" = 1 ] && quick=(--quick)
status=0
for suite in "$@"; do
    echo "== $suite $(date -u +%H:%M:%S)" | tee -a "$results/device.log"
    if [ "$suite" = tests ]; then
        command=(python3 -m pytest -p no:cacheprovider -o addopts=-q tests/test_device.py
            tests/driver/test_machine.py --junitxml "$results/tests.xml" --durations=8)
    else
        command=(python3 -m benchmarks.run --suite "$suite" "${quick[@]}" ${BENCH_ARGS:-} --out "$results")
    fi
    timeout "${SUITE_SECONDS:-240}" "${command[@]}" 2>&1 | tee -a "$results/device.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
tar czf "$out/results.tgz" -C "$results" .
exit $status
