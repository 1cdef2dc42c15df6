#!/usr/bin/env bash
# The GPU check, as run on the lent H200 (device tool), from the repository root:
#   carry: build (artifacts compiled here) and .whl (the nvidia-cutlass wheel, see below)
#   command: bash scripts/device_check.sh [pytest args...]   (SKIP_INT8=1, SKIP_BENCH=1 shorten it:
#   one device call may run 10 minutes at most)
# Installs the carried wheel and this checkout into the machine's python3 (no registry
# there), records the environment, runs the GPU tests and the benchmarks; logs in $OUT.
# The wheel: python3 -m pip download --no-deps --only-binary=:all: -d .whl nvidia-cutlass==4.2.0.0
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  nvcc --version | tail -2
  $PY -c "import numpy, cupy, torch, cuda.bindings; print('numpy', numpy.__version__, 'cupy', cupy.__version__, 'torch', torch.__version__, 'cuda.bindings', cuda.bindings.__version__)"
  $PY -m ozaki_cutlass list
} 2>&1 | tee "$OUT/env.txt"
OZAKI_BUILD_JOBS=8 $PY -m ozaki_cutlass build --arch sm_90a 2>&1 | tee -a "$OUT/env.txt"
OZAKI_BUILD_JOBS=8 $PY -m ozaki_cutlass build --arch sm_80 2>&1 | tee -a "$OUT/env.txt"
timeout 300 $PY -m pytest tests/gpu -q -p no:cacheprovider -rfE --timeout 120 "$@" 2>&1 | tee "$OUT/gpu_tests.log"
timeout 120 $PY -m ozaki_cutlass demo 2>&1 | tee "$OUT/demo.log"
[ -n "${SKIP_BENCH:-}" ] && exit 0
[ -n "${SKIP_INT8:-}" ] || timeout 90 $PY -m ozaki_cutlass bench-int8 --json "$OUT/int8.json" 2>&1
timeout 300 $PY -m ozaki_cutlass bench --json "$OUT/bench.json" --csv "$OUT/bench.csv" --plot "$OUT/bench.png" 2>&1
