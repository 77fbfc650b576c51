#!/usr/bin/env bash
# GPU runbook of docs/gpu.md: one prepared script for a session that has a GPU.
#
# Usage: bash experiments/gpu_runbook.sh [OUT_DIR]        (run from the repository root)
#        bash experiments/gpu_runbook.sh --help
#
# 1. environment: date, load average, nvidia-smi, Python, jax version and devices, and a
#    preflight import of kvstats_gpu and of both Pallas GPU backends (Mosaic GPU needs
#    absl-py); stops with exit status 3 if jax sees no GPU (a CUDA plugin that failed to
#    load leaves jax on the CPU, where step 2 would only skip and step 3 would time CPU
#    code), 4 if kvstats_gpu or both backends fail to import (one backend missing is
#    reported and the run goes on with the other);
# 2. correctness: `pytest -m gpu tests/gpu` with KVSTATS_REQUIRE_GPU=1 (no silent skips) --
#    every compiled kernel, through Mosaic GPU and through Triton, against its jnp
#    reference (decode attention at 32k tokens);
# 3. throughput: `python -m kvstats_gpu.bench --require-gpu --impl B` once per Pallas backend B
#    (BENCH_IMPLS, default "mosaic triton"), each in its own process, so that a backend whose
#    compile aborts the process (a fatal LLVM/ptxas error is not a Python exception) leaves
#    the other's figures: its own correctness check, then one decode step over a KQV@4 cache
#    at 32k and 128k tokens (8 KV heads, 32 query heads, d = 128) against dense bf16
#    attention and the device's peak HBM bandwidth, each timed output checked against the
#    jnp reference.
# Everything printed also lands in OUT_DIR (default $OUT, else ./gpu_runbook_out):
# env.txt, pytest_gpu.txt, and per backend bench_B.txt and bench_B.json. Exit status 0 only
# if every step run passed. pytest runs verbose (one line per test as it finishes, with
# durations) and the bench prints and saves each row as it is measured, so a step cut short
# by its time cap still says what passed and what was measured.
#
# Sized for a 15-minute device budget (machine start included) with room for one rerun: the
# steps are capped at T_TESTS=120 s and T_BENCH=90 s per backend (environment variables;
# `timeout -k 10`), at most about 5.4 minutes with the environment step; call it with a
# timeout of ~360 s. STEPS (default "tests bench") chooses the steps, e.g. STEPS=bench for a
# shorter rerun of the throughput step alone, BENCH_IMPLS=triton for one backend. PYTHON
# (default python3: on the lent H200 machine the image's Python with jax[cuda] and absl-py)
# runs it; BENCH_ARGS overrides the bench's arguments other than --impl and --json. The
# repository is not pip-installed there: PYTHONPATH is set to the repository root.
#
# Dry run on a machine without a GPU: RUNBOOK_ALLOW_CPU=1 runs the same steps on the CPU
# (the gpu tests skip, which checks that they collect; the bench checks each backend's
# kernels in the Pallas interpreter and times the jnp reference at its CPU sizes, with
# T_BENCH defaulting to 900 s: the interpreter is slow; XLA's optimisations off unless
# JAX_DISABLE_MOST_OPTIMIZATIONS is set), to check the script and the imports under another
# environment; its exit status says nothing about the GPU.
set -u -o pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0
fi
OUT_DIR=${1:-${OUT:-gpu_runbook_out}}
PY=${PYTHON:-python3}
DRY=${RUNBOOK_ALLOW_CPU:-0}
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

{
    date -u
    uptime
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    else
        echo "nvidia-smi: not available"
    fi
    "$PY" -c "import sys, jax, jaxlib, numpy; print('python', sys.version.split()[0], 'numpy', numpy.__version__)
print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'backend', jax.default_backend(), jax.devices())
try:  # where XLA and Mosaic GPU look for ptxas first (CUDA_ROOT overrides); a private name
    from jax._src import lib; print('jax cuda_path', lib.cuda_path)
except Exception as exc: print('jax cuda_path: unknown', type(exc).__name__)"
    # Mosaic GPU and XLA assemble PTX with ptxas: a failure to find it shows here first
    echo "ptxas: $(command -v ptxas || echo 'not on PATH')  nvcc: $(command -v nvcc || echo 'not on PATH')"
} 2>&1 | tee "$OUT_DIR/env.txt"

# preflight: the package and both Pallas GPU backends import (Triton is deprecated in
# jax >= 0.11 and may be gone; either backend missing is reported, not fatal: its tests
# fail and the bench leaves it out)
"$PY" - <<'EOF' 2>&1 | tee -a "$OUT_DIR/env.txt"
import importlib, sys
failed = []
for mod in ("kvstats_gpu.decode", "kvstats_gpu.bench", "kvstats_gpu.mosaic_call", "absl",
            "jax.experimental.pallas.mosaic_gpu", "jax.experimental.pallas.triton"):
    try:
        importlib.import_module(mod)
        print("import", mod, "ok")
    except Exception as exc:  # report every failing import, then decide
        print("import", mod, "FAILED:", type(exc).__name__, exc)
        failed.append(mod)
try:  # what kvstats_gpu.mosaic_call compiles Mosaic kernels with (a gap fails Mosaic only: reported)
    from jax.experimental.pallas import mosaic_gpu as plgpu
    names = ("kernel", "emit_pipeline", "LoweringSemantics", "CompilerParams", "Layout", "load", "layout_cast")
    print("mosaic entry points:", {n: hasattr(plgpu, n) for n in names})
except Exception as exc:
    print("mosaic entry points: FAILED:", type(exc).__name__, exc)
# fatal: the package itself, or both backends (Mosaic needs absl-py); one backend missing
# still leaves the other's tests and timings worth the run
mosaic_gone = any(m in failed for m in ("absl", "jax.experimental.pallas.mosaic_gpu"))
triton_gone = "jax.experimental.pallas.triton" in failed
fatal = any(m.startswith("kvstats_gpu") for m in failed) or (mosaic_gone and triton_gone)
if failed and not fatal:
    print("preflight: going on without", "Mosaic GPU" if mosaic_gone else "Triton", "(its tests and bench rows fail)")
sys.exit(4 if fatal else 0)
EOF
rc_pre=$?
if [[ $rc_pre -ne 0 ]]; then
    echo "runbook: kvstats_gpu or both Pallas GPU backends failed to import (above); stopping before the GPU" \
         "steps (exit 4)" | tee -a "$OUT_DIR/env.txt"
    exit 4
fi
backend=$("$PY" -c "import jax; print(jax.default_backend())" 2>/dev/null)
if [[ "$backend" != "gpu" && "$DRY" != "1" ]]; then
    echo "runbook: jax's default backend is '$backend', not 'gpu': no GPU visible to jax (a CUDA plugin that" \
         "failed to load falls back to the CPU); stopping (exit 3). RUNBOOK_ALLOW_CPU=1 makes a CPU dry run." \
        | tee -a "$OUT_DIR/env.txt"
    exit 3
fi
if [[ "$backend" == "gpu" ]]; then
    export KVSTATS_REQUIRE_GPU=1  # tests/gpu/conftest.py: no GPU is then an error, not a skip
    bench_default="--require-gpu --schemes KQV:4 --tokens 32768 131072"
else
    # XLA's optimisations off, as tests/gpu do off a GPU: the interpreter's programs compile
    # about twice as fast and compute the same operations (its CPU timings are then -O0's)
    export JAX_DISABLE_MOST_OPTIMIZATIONS=${JAX_DISABLE_MOST_OPTIMIZATIONS:-1}
    echo "runbook: DRY RUN on the CPU (RUNBOOK_ALLOW_CPU=1): gpu tests skip, the bench runs its CPU sizes" \
         "(JAX_DISABLE_MOST_OPTIMIZATIONS=$JAX_DISABLE_MOST_OPTIMIZATIONS)" | tee -a "$OUT_DIR/env.txt"
    bench_default="--schemes KQV:4 --quick"
    T_BENCH=${T_BENCH:-900}  # the interpreter's correctness check alone takes minutes on a loaded CPU
fi

steps=" ${STEPS:-tests bench} "
rc_tests=0
rc_all=0
summary=""
if [[ "$steps" == *" tests "* ]]; then
    timeout -k 10 "${T_TESTS:-120}" "$PY" -m pytest -v --durations=0 -p no:cacheprovider -p no:xdist -m gpu \
        tests/gpu -rs 2>&1 | tee "$OUT_DIR/pytest_gpu.txt"
    rc_tests=$?
    summary="tests exit $rc_tests"
    rc_all=$rc_tests
fi

if [[ "$steps" == *" bench "* ]]; then
    for impl in ${BENCH_IMPLS:-mosaic triton}; do
        # shellcheck disable=SC2086  # BENCH_ARGS is a list of words
        timeout -k 10 "${T_BENCH:-90}" "$PY" -m kvstats_gpu.bench --impl "$impl" --json "$OUT_DIR/bench_$impl.json" \
            ${BENCH_ARGS:-$bench_default} 2>&1 | tee "$OUT_DIR/bench_$impl.txt"
        rc=$?
        summary="${summary:+$summary, }bench $impl exit $rc"
        [[ $rc -ne 0 ]] && rc_all=$rc
    done
fi

note=""
[[ "$backend" != "gpu" ]] && note=" -- CPU dry run: says nothing about the GPU"
echo "runbook: steps${steps% }: ${summary:-nothing run} (124 or 137 = timed out)$note" | tee -a "$OUT_DIR/env.txt"
[[ $rc_all -eq 0 ]]
