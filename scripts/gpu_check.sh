#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU: bench/bench_certify.py (ranked certified-wins steps), the GPU test
# subset, then bench/bench_gpu.py (tunes reduction,
# sgemm, softmax and attention for runtime + energy, re-measures the fronts interleaved against the nvcc defaults)
# writing bench/results/gpu_<date>.json and .md, then the same with compiler controls only (the -D knobs
# at their defaults: gpu_<date>_flags_only.*). Fronts are re-measured on the kernels' other workloads too.
# About 7 minutes on one H200 (6.5 before workloads were added).
#
# usage: scripts/gpu_check.sh [OUTDIR]          (default OUTDIR: bench/results)
#
# Needs: python3 with numpy, scipy, pandas, cloudpickle, pytest, cupy-cuda12x/13x (matching the driver) and
# nvidia-ml-py; pymoo 0.6.2 and what it needs; nvcc and ptxas on PATH (or the pinned nvcc wheels of the `cuda` extra).
# On a machine without network access, bring the missing packages as wheels, built for that machine's Python:
#   pip download --no-deps --only-binary=:all: -d wheels pymoo==0.6.2 moocore==0.3.2 cffi pycparser platformdirs \
#       autograd cma deprecated alive-progress==3.3.0 about-time==4.2.1 graphemeu==0.7.2
# and set WHEELS=wheels: they are installed into a private folder first (nothing else is touched).
set -u
cd "$(dirname "$0")/.."
OUTDIR=${1:-bench/results}
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
if [ -n "${WHEELS:-}" ]; then
    site=$(mktemp -d)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$WHEELS"/*.whl || exit 1
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
day=$(date +%F)
status=0

echo "== GPU and toolchain"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || status=1
nvcc --version | tail -2
"$PY" -c "import cupy, pymoo; print('cupy', cupy.__version__, 'pymoo', pymoo.__version__)" || exit 1

# the certified-wins checks first, ranked: each step saves its results as it finishes (A/A warm and cold, the
# canary, a short tuning certified and re-checked with validate --acf, recorded run stores for the lab's replay)
echo "== certified wins (bench/bench_certify.py)"
timeout "${CERTIFY_S:-420}" "$PY" bench/bench_certify.py --out "$OUTDIR" || status=1

echo "== GPU tests"
timeout 300 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/measure/test_gpu.py 2>&1 | tee "$OUTDIR/gpu_tests_$day.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== tuning bundled kernels: compiler controls and -D knobs"
"$PY" bench/bench_gpu.py --out "$OUTDIR" --budget-s "${BUDGET_S:-40}" || status=1
echo "== tuning bundled kernels: compiler controls only"
"$PY" bench/bench_gpu.py --out "$OUTDIR" --budget-s "${FLAGS_BUDGET_S:-25}" --no-knobs || status=1
exit $status
