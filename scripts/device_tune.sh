#!/usr/bin/env bash
# Tuning and benchmark run on the lent H200 (carry build and .whl, as for device_check.sh):
#   bash scripts/device_tune.sh
# Times every candidate kernel and native DGEMM per size (ozaki-cutlass tune), then the
# benchmark with the resulting table (staged, fused and the auto policy against native).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
SW8="i8_sm90a_256x128x128_c1x2_coop_s0_int32_g1_sw8 i8_sm90a_128x256x128_c1x1_coop_s0_int32_g1_sw8 i8_sm90a_128x128x128_c1x1_coop_s0_pcrt_g4_sw8"
timeout 200 $PY -m ozaki_cutlass.cli tune --sizes 1024 2048 4096 8192 16384 --variants $SW8 --out "$OUT/tuning.json" 2>&1 | tee "$OUT/tune.log"
OZAKI_TUNING_TABLE="$OUT/tuning.json" timeout 300 $PY -m ozaki_cutlass.cli bench --json "$OUT/bench.json" --csv "$OUT/bench.csv" --plot "$OUT/bench.png" 2>&1 | tee "$OUT/bench.log"
