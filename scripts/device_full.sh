#!/usr/bin/env bash
# Everything in device calls (carry build and .whl, as for device_check.sh), at most 8 files
# under $OUT (what the device tool brings back). One call may run 10 minutes, so the work
# is in two parts, each a call; PART picks (default: both, for a machine without that limit):
#   PART=1 bash scripts/device_full.sh  build what is missing, the GPU tests, the demo, the
#            INT8 ceiling (scripts/int8_ceiling.py)   -> $OUT/run1.log, ceiling.json
#   PART=2 bash scripts/device_full.sh  `ozaki-cutlass tune`, then the benchmark with the
#            table it wrote (native, staged, fused, auto), the 14-moduli error at 8192 and
#            16384, operand reuse before/after, host cost per call
#            -> $OUT/run2.log, tuning.json, bench.{json,csv,png}, bench14.json, prepare.json
#   SKIP_TUNE=1 (part 2): the benchmark with the shipped table instead of a fresh tune
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
PART=${PART:-12}

if [[ $PART == *1* ]]; then
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  $PY -c "import numpy, cupy, cuda.bindings; print('numpy', numpy.__version__, 'cupy', cupy.__version__, 'cuda.bindings', cuda.bindings.__version__)"
  OZAKI_BUILD_JOBS=16 $PY -m ozaki_cutlass build --arch sm_90a
  OZAKI_BUILD_JOBS=16 $PY -m ozaki_cutlass build --arch sm_80
  echo "== tests/gpu"
  timeout -s INT 330 $PY -m pytest tests/gpu -q -p no:cacheprovider -rfE --timeout 200 2>&1 | tail -25  # INT: the summary even when cut
  echo "== ozaki-cutlass demo"
  timeout 60 $PY -m ozaki_cutlass demo
  echo "== python scripts/int8_ceiling.py"
  timeout 120 $PY scripts/int8_ceiling.py --json "$OUT/ceiling.json"
  date -u +%FT%TZ
} > "$OUT/run1.log" 2>&1
tail -45 "$OUT/run1.log"
fi

if [[ $PART == *2* ]]; then
{
  date -u +%FT%TZ
  if [ -n "${SKIP_TUNE:-}" ]; then  # the shipped table (ozaki_cutlass/data/tuning.json)
    echo "== ozaki-cutlass bench (shipped tuning table)"
    timeout 200 $PY -m ozaki_cutlass bench --json "$OUT/bench.json" --csv "$OUT/bench.csv" --plot "$OUT/bench.png"
  else
    # the built-in candidates and the shipped table's kernels (carried built, or built in part 1)
    echo "== ozaki-cutlass tune --sizes 1024 2048 4096 8192 16384 --shapes 16384x16384x1024 4096x4096x65536 65536x1024x4096"
    timeout 200 $PY -m ozaki_cutlass tune --sizes 1024 2048 4096 8192 16384 \
      --shapes 16384x16384x1024 4096x4096x65536 65536x1024x4096 --out "$OUT/tuning.json"
    echo "== OZAKI_TUNING_TABLE=tuning.json ozaki-cutlass bench"
    OZAKI_TUNING_TABLE="$OUT/tuning.json" timeout 200 $PY -m ozaki_cutlass bench --json "$OUT/bench.json" --csv "$OUT/bench.csv" --plot "$OUT/bench.png"
  fi
  # is 14 moduli's error at most native DGEMM's at the large sizes? (the issues' moduli rule)
  echo "== ozaki-cutlass bench --moduli 14 --shapes 8192 16384 --paths fused --no-auto"
  timeout 60 $PY -m ozaki_cutlass bench --moduli 14 --shapes 8192 16384 --paths fused --no-auto --json "$OUT/bench14.json"
  echo "== python scripts/bench_prepare.py"
  timeout 60 $PY scripts/bench_prepare.py --json "$OUT/prepare.json"
  echo "== python scripts/profile_host.py"
  timeout 40 $PY scripts/profile_host.py | grep -v "^$\|Ordered\|List reduced"
  date -u +%FT%TZ
} > "$OUT/run2.log" 2>&1
tail -60 "$OUT/run2.log"
fi
