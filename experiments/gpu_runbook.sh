#!/usr/bin/env bash
# GPU runbook of docs/gpu.md: one prepared script for a session that has a GPU.
#
# Usage: bash experiments/gpu_runbook.sh [OUT_DIR]        (run from the repository root)
#        bash experiments/gpu_runbook.sh --help
#
# 1. environment: date, load average, nvidia-smi, jax version and devices;
# 2. correctness: `pytest -m gpu tests/gpu` -- every compiled kernel, through Mosaic GPU
#    and through Triton, against its jnp reference (decode attention at 32k tokens);
# 3. throughput: `python -m kvstats_gpu.bench` -- its own correctness check per backend,
#    then one decode step over a KQV@4 cache at 32k and 128k tokens (8 KV heads,
#    32 query heads, d = 128) against dense bf16 attention and the device's peak HBM
#    bandwidth, for each backend that passed.
# Everything printed also lands in OUT_DIR (default $OUT, else ./gpu_runbook_out):
# env.txt, pytest_gpu.txt, bench_gpu.txt, bench_gpu.json. Exit status 0 only if both steps passed.
#
# Sized for a 15-minute device budget with room for one rerun: the steps are capped at
# T_TESTS=120 s and T_BENCH=180 s (environment variables), about 5.5 minutes in all; call
# it with a timeout of ~340 s. PYTHON (default python3: on the lent H200 machine the image's
# Python with jax[cuda] and absl-py) runs it; BENCH_ARGS overrides the bench's arguments.
set -u -o pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0
fi
OUT_DIR=${1:-${OUT:-gpu_runbook_out}}
PY=${PYTHON:-python3}
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

{
    date -u
    uptime
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "nvidia-smi: not available"
    "$PY" -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())"
} 2>&1 | tee "$OUT_DIR/env.txt"

timeout "${T_TESTS:-120}" "$PY" -m pytest -q -p no:cacheprovider -p no:xdist -m gpu tests/gpu -rs 2>&1 \
    | tee "$OUT_DIR/pytest_gpu.txt"
rc_tests=$?

# shellcheck disable=SC2086  # BENCH_ARGS is a list of words
timeout "${T_BENCH:-180}" "$PY" -m kvstats_gpu.bench --json "$OUT_DIR/bench_gpu.json" \
    ${BENCH_ARGS:---schemes KQV:4 --tokens 32768 131072 --impl mosaic triton} 2>&1 | tee "$OUT_DIR/bench_gpu.txt"
rc_bench=$?

echo "runbook: tests exit $rc_tests, bench exit $rc_bench (124 = timed out)" | tee -a "$OUT_DIR/env.txt"
[[ $rc_tests -eq 0 && $rc_bench -eq 0 ]]
