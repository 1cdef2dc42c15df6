#!/usr/bin/env bash
# The tuning sweep on the lent H200 (device tool; carry build and .whl): builds a slice of
# the sm_90a catalog there (16 nvcc jobs: the 32 variants of tiles 128x128, 128x256 and
# 256x128 with k = 128, every cluster 1x1..2x2, both schedules where legal, swizzle 1 and
# 8, stages auto), tunes every built candidate per shape bucket (squares and the three
# rectangular shapes of the benchmark), then runs the benchmark and the demo with the
# table it wrote. At most 8 files under $OUT (what the device tool brings back):
#   bash scripts/device_sweep.sh   -> $OUT/run.log, tuning.json, bench.{json,csv,png}
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
set -f  # the variant globs below are patterns for ozaki-cutlass, not file names
GLOBS="i8_sm90a_256x128x128_*_s0_int32_g1* i8_sm90a_128x256x128_*_s0_int32_g1* i8_sm90a_128x128x128_*_s0_int32_g1*"
RECT="16384x16384x1024 4096x4096x65536 65536x1024x4096"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  OZAKI_BUILD_JOBS=8 $PY -m ozaki_cutlass build --arch sm_90a | tail -1
  for g in $GLOBS; do
    OZAKI_BUILD_JOBS=16 timeout 240 $PY -m ozaki_cutlass build --arch sm_90a --variants "$g" | tail -1
  done
  echo "== ozaki-cutlass tune --sizes 1024 2048 4096 8192 16384 --shapes $RECT --variants $GLOBS"
  timeout 170 $PY -m ozaki_cutlass tune --sizes 1024 2048 4096 8192 16384 --shapes $RECT \
    --variants $GLOBS --out "$OUT/tuning.json"
  echo "== OZAKI_TUNING_TABLE=tuning.json ozaki-cutlass bench"
  OZAKI_TUNING_TABLE="$OUT/tuning.json" timeout 150 $PY -m ozaki_cutlass bench \
    --json "$OUT/bench.json" --csv "$OUT/bench.csv" --plot "$OUT/bench.png"
  echo "== OZAKI_TUNING_TABLE=tuning.json ozaki-cutlass demo"
  OZAKI_TUNING_TABLE="$OUT/tuning.json" timeout 60 $PY -m ozaki_cutlass demo
} > "$OUT/run.log" 2>&1
tail -80 "$OUT/run.log"
