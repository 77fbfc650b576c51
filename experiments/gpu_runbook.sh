#!/usr/bin/env bash
# GPU runbook of docs/gpu.md: one prepared script for a session that has a GPU.
#
# Usage: bash experiments/gpu_runbook.sh [--dry-run] [OUT_DIR]      (from the repository root)
#        bash experiments/gpu_runbook.sh --help
#
# Steps, each written to OUT_DIR as it runs (a step or the whole call cut short still leaves
# what finished), each under its own time cap, correctness before throughput:
# 1. env: date, load, nvidia-smi, Python, numpy, jax, jaxlib and the CUDA plugin's versions,
#    jax's backend and devices, where ptxas and nvcc are; a preflight import of kvstats_gpu
#    and of both Pallas GPU backends (Mosaic GPU needs absl-py). Stops with exit status 3 if
#    jax sees no GPU (a CUDA plugin that failed to load leaves jax on the CPU, where the tests
#    would only skip and the bench would time CPU code), 4 if kvstats_gpu or both backends
#    fail to import (one missing is reported and the run goes on with the other);
# 2. tests: `pytest -m gpu -k "mosaic or triton" tests/gpu` with KVSTATS_REQUIRE_GPU=1 (no
#    silent skips), over TEST_WORKERS (default 8) pytest-xdist workers, each test in its own
#    worker (compiles take 10-80 s a test on the H200: one after another they did not fit):
#    every compiled kernel of both backends against its jnp reference, decode attention at 32k
#    tokens, and tests/gpu/test_gpu_device_h4.py's compiled cases: decode over a partly filled
#    cache (length < capacity), d = 64 (Triton) and d = 256, a jitted append_kv step, vmap over
#    a ragged batch. Workers share the GPU, so jax's preallocation is off for them
#    (XLA_PYTHON_CLIENT_PREALLOCATE=false: two preallocating processes ran out of memory on
#    2026-12-04). A fatal compile error (an LLVM or ptxas abort is no Python exception) kills
#    only its worker: xdist reports that test as failed and goes on. TEST_WORKERS=0 runs them
#    in one process. The summary gives pytest's closing line and each backend's counts.
# 3. bench B, for B in BENCH_IMPLS (default "mosaic triton"), one after another, alone on the
#    GPU: `python -m kvstats_gpu.bench --require-gpu --impl B`, one process per backend: its
#    own correctness check, then one decode step over a KQV@4 cache at 32k and 128k tokens
#    (8 KV heads, 32 query heads, d = 128) against the fastest of three dense bf16 decode steps
#    (XLA's generic jax.nn.dot_product_attention, its cuDNN implementation, JAX's Pallas
#    flash-decoding GQA kernel; one that fails is reported "unavailable: <reason>", and the
#    fastest is named) and the device's peak HBM bandwidth, each timed output checked against
#    the jnp reference.
# Files in OUT_DIR (default $OUT, else ./gpu_runbook_out): env.txt, pytest_gpu.txt, bench_B.txt
# and bench_B.json per backend, and summary.txt: one line per step as it ends (exit status,
# seconds, cap; pytest's result line and per-backend counts; the bench's correctness and
# measured lines), then the overall verdict. Seven files with the default backends (the
# device tool returns at most eight). Exit status 0 only if every step ran and passed.
#
# Time: each step has a cap against a hang (T_TESTS=240 s for the tests, T_BENCH=150 s per
# bench process, T_ENV=60 s per environment command; `timeout -k 10`), and the whole script a
# deadline, RUNBOOK_DEADLINE=450 s from its start: a step gets the lesser of its cap and the
# time left (less 15 s for the summary), and a step with under 20 s left is skipped and
# reported, so the summary is written before a device call of timeout_s=480 ends. On the
# H200 (2026-12-04) one bench process took 70-100 s. STEPS (default "tests bench") chooses the
# steps, e.g. STEPS=bench for a shorter rerun of the throughput step; TEST_IMPLS and
# BENCH_IMPLS the backends (BENCH_IMPLS=reference times the jnp path compiled by XLA);
# BENCH_ARGS replaces the bench's arguments other than --impl and --json. PYTHON (default
# python3: on the lent H200 machine the image's Python with jax[cuda], absl-py and
# pytest-xdist) runs it. The repository is not pip-installed there: PYTHONPATH is set to the
# repository root.
#
# Dry run without a GPU: --dry-run (or RUNBOOK_ALLOW_CPU=1) runs the same steps on the CPU to
# check the script and the imports under another environment: the gpu tests collect and
# skip; each bench process checks its backend's kernels in the Pallas interpreter and times
# the jnp reference at its small CPU size (--quick), XLA's optimisations off unless
# JAX_DISABLE_MOST_OPTIMIZATIONS is set; T_BENCH defaults to 900 s and RUNBOOK_DEADLINE to
# 3600 s there (the interpreter is slow). Its exit status says nothing about the GPU.
set -u -o pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
DRY=${RUNBOOK_ALLOW_CPU:-0}
OUT_ARG=""
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
        --dry-run) DRY=1 ;;
        -*) echo "gpu_runbook.sh: unknown option '$arg' (allowed: --dry-run, --help, an output folder)" >&2
            exit 2 ;;
        *) if [[ -n "$OUT_ARG" ]]; then
               echo "gpu_runbook.sh: one output folder expected; received '$OUT_ARG' and '$arg'" >&2
               exit 2
           fi
           OUT_ARG=$arg ;;
    esac
done
OUT_DIR=${OUT_ARG:-${OUT:-gpu_runbook_out}}
PY=${PYTHON:-python3}
if [[ "$DRY" == "1" ]]; then
    DEADLINE=${RUNBOOK_DEADLINE:-3600}
    T_BENCH=${T_BENCH:-900}  # the interpreter's correctness check alone takes minutes on a loaded CPU
else
    DEADLINE=${RUNBOOK_DEADLINE:-450}
fi
RESERVE=15    # seconds kept for the summary after the last step
MIN_STEP=20   # a step with less time than this left is skipped, not started
mkdir -p "$OUT_DIR"
: > "$OUT_DIR/summary.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

summary() { echo "$*" | tee -a "$OUT_DIR/summary.txt"; }

# cap_for SECONDS: the lesser of a step's own cap and what the deadline leaves; 0 when that is
# under MIN_STEP (the step is then skipped)
cap_for() {
    local left=$((DEADLINE - SECONDS - RESERVE)) want=$1
    ((left < want)) && want=$left
    ((want < MIN_STEP)) && want=0
    echo "$want"
}

rc_all=0
# run_step NAME OWN_CAP LOG COMMAND...: the command under `timeout -k 10`, its output shown and
# appended to LOG as it comes; one summary line when it ends (or why it did not start)
run_step() {
    local name=$1 own=$2 log=$3 cap t0 rc
    shift 3
    cap=$(cap_for "$own")
    if ((cap == 0)); then
        summary "$name: SKIPPED, $((DEADLINE - SECONDS)) s left before the ${DEADLINE} s deadline"
        rc_all=1
        return
    fi
    t0=$SECONDS
    timeout -k 10 "$cap" "$@" 2>&1 | tee -a "$log"
    rc=$?
    local note=""
    ((rc == 124 || rc == 137)) && note=" (TIMED OUT)"
    ((rc != 0)) && rc_all=1
    summary "$name: exit $rc$note, $((SECONDS - t0)) s of a ${cap} s cap"
}

# 1. environment
: > "$OUT_DIR/env.txt"
{
    date -u
    uptime
    if command -v nvidia-smi >/dev/null; then
        timeout -k 5 "${T_ENV:-60}" nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    else
        echo "nvidia-smi: not available"
    fi
    timeout -k 5 "${T_ENV:-60}" "$PY" -c "import sys, jax, jaxlib, numpy, importlib.metadata as md
print('python', sys.version.split()[0], sys.executable, 'numpy', numpy.__version__)
print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)
for dist in ('jax-cuda13-plugin', 'jax-cuda13-pjrt', 'jax-cuda12-plugin', 'jax-cuda12-pjrt'):
    try: print(dist, md.version(dist))
    except md.PackageNotFoundError: pass
print('jax devices', jax.devices())
try:  # where XLA and Mosaic GPU look for CUDA tools first (CUDA_ROOT overrides); a private name
    from jax._src import lib; print('jax cuda_path', lib.cuda_path)
except Exception as exc: print('jax cuda_path: unknown', type(exc).__name__)
print('jax default backend:', jax.default_backend())"
    echo "env exit $? (python, jax and its devices; 124 or 137 = timed out)"
    # XLA and Mosaic GPU assemble PTX: where the CUDA tools are shows here
    echo "ptxas: $(command -v ptxas || echo 'not on PATH')  nvcc: $(command -v nvcc || echo 'not on PATH')"
} 2>&1 | tee -a "$OUT_DIR/env.txt"
backend=$(sed -n 's/^jax default backend: //p' "$OUT_DIR/env.txt" | tail -n 1)

# preflight: the package and both Pallas GPU backends import (Triton is deprecated in
# jax >= 0.11 and may be gone; either backend missing is reported, not fatal: its tests
# fail and the bench leaves it out)
timeout -k 5 "${T_ENV:-60}" "$PY" - <<'EOF' 2>&1 | tee -a "$OUT_DIR/env.txt"
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
try:  # Mosaic's compiled half, from the CUDA plugin (a private module; absent from CPU-only jaxlib,
    # where lowering still works): without it every compiled Mosaic kernel fails (reported only)
    from jax._src.lib import mosaic_gpu as mgpu_lib
    print("mosaic GPU bindings ok:", mgpu_lib._mosaic_gpu_ext.__file__)
except Exception as exc:
    print("mosaic GPU bindings: FAILED:", type(exc).__name__, exc, "(expected off a GPU build of jax)")
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
    summary "runbook: kvstats_gpu or both Pallas GPU backends failed to import (env.txt; preflight exit" \
            "$rc_pre); stopping before the GPU steps (exit 4)"
    exit 4
fi
if [[ "$backend" != "gpu" && "$DRY" != "1" ]]; then
    summary "runbook: jax's default backend is '$backend', not 'gpu': no GPU visible to jax (a CUDA plugin" \
            "that failed to load falls back to the CPU; env.txt); stopping (exit 3). --dry-run makes a CPU dry run."
    exit 3
fi
if [[ "$backend" == "gpu" ]]; then
    export KVSTATS_REQUIRE_GPU=1  # tests/gpu/conftest.py: no GPU is then an error, not a skip
    bench_default="--require-gpu --schemes KQV:4 --tokens 32768 131072"
else
    # XLA's optimisations off, as tests/gpu do off a GPU: the interpreter's programs compile
    # about twice as fast and compute the same operations (its CPU timings are then -O0's)
    export JAX_DISABLE_MOST_OPTIMIZATIONS=${JAX_DISABLE_MOST_OPTIMIZATIONS:-1}
    summary "runbook: DRY RUN on the CPU (jax backend '$backend'): gpu tests skip, the bench runs its CPU" \
            "sizes (JAX_DISABLE_MOST_OPTIMIZATIONS=$JAX_DISABLE_MOST_OPTIMIZATIONS)"
    bench_default="--schemes KQV:4 --quick"
fi
summary "env: done at $SECONDS s; deadline ${DEADLINE} s; jax backend '$backend'"

steps=" ${STEPS:-tests bench} "
test_impls=" ${TEST_IMPLS:-mosaic triton} " bench_impls=" ${BENCH_IMPLS:-mosaic triton} "
if [[ "$steps" == *" tests "* ]]; then
    : > "$OUT_DIR/pytest_gpu.txt"
    k_expr=$(echo $test_impls | sed 's/ / or /g')
    n_workers=${TEST_WORKERS:-8}
    [[ "$DRY" == "1" ]] && n_workers=${TEST_WORKERS:-2}  # the tests only skip there
    workers=(-p no:xdist)
    if [[ "$n_workers" != "0" ]]; then
        if "$PY" -c "import xdist" 2>/dev/null; then
            workers=(-n "$n_workers" --dist load)
        else
            summary "tests: pytest-xdist is not installed: the tests run in one process"
        fi
    fi
    echo "=== tests: pytest -m gpu -k '$k_expr' tests/gpu ${workers[*]} ===" >> "$OUT_DIR/pytest_gpu.txt"
    run_step "tests" "${T_TESTS:-240}" "$OUT_DIR/pytest_gpu.txt" env XLA_PYTHON_CLIENT_PREALLOCATE=false \
        "$PY" -m pytest -v --durations=0 -p no:cacheprovider "${workers[@]}" -m gpu -k "$k_expr" tests/gpu -rs
    # the closing line (how many passed, failed, skipped), or what it reached; then per backend
    closing=$(grep -E '^=+ .*(passed|failed|skipped|error|deselected|no tests ran).* =+$' \
              "$OUT_DIR/pytest_gpu.txt" | tail -n 1)
    summary "    ${closing:-no closing line (cut short)}"
    # a verbose result line, serial or xdist: "<id> PASSED [ 12%]" or "[gw0] [ 12%] PASSED <id>"
    count() { grep -E " $1( |$)" "$OUT_DIR/pytest_gpu.txt" | grep -cE "\[$2[]-]"; }
    for impl in $test_impls; do
        summary "    $impl: $(count PASSED "$impl") passed, $(count FAILED "$impl") failed, $(count ERROR "$impl")" \
                "errors, $(count SKIPPED "$impl") skipped"
    done
fi
for impl in $bench_impls; do
    if [[ "$steps" == *" bench "* ]]; then
        rm -f "$OUT_DIR/bench_$impl.txt" "$OUT_DIR/bench_$impl.json"  # a skipped step leaves none
        # shellcheck disable=SC2086  # BENCH_ARGS is a list of words
        run_step "bench $impl" "${T_BENCH:-150}" "$OUT_DIR/bench_$impl.txt" \
            "$PY" -m kvstats_gpu.bench --impl "$impl" --json "$OUT_DIR/bench_$impl.json" ${BENCH_ARGS:-$bench_default}
        # a row's verdicts (MISMATCH, HOST-BOUND) come first in its line: the cut keeps them
        [[ -f "$OUT_DIR/bench_$impl.txt" ]] && grep -E '^(correctness|measured|CORRECTNESS FAILURE)' \
            "$OUT_DIR/bench_$impl.txt" | cut -c1-400 | sed 's/^/    /' | tee -a "$OUT_DIR/summary.txt"
    fi
done

note=""
[[ "$backend" != "gpu" ]] && note=" -- CPU dry run: says nothing about the GPU"
summary "runbook: steps${steps% }: $([[ $rc_all -eq 0 ]] && echo 'all passed' || echo 'NOT all passed')," \
        "$SECONDS s$note"
# the whole summary once more, last: a caller that keeps only the tail of the output has it
echo "=== $OUT_DIR/summary.txt ==="
cat "$OUT_DIR/summary.txt"
exit "$rc_all"
