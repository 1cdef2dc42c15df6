#!/usr/bin/env bash
# Tuning and benchmark run on the lent H200 (carry build and .whl, as for device_check.sh):
#   bash scripts/device_tune.sh
# Times every candidate kernel and native DGEMM per size (ozaki-cutlass tune), then the
# benchmark with the resulting table (staged, fused and the auto policy against native).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
# The candidates are the built-in ones (the shipped table's kernels, the default staged set
# and the fused family); carry them built (`ozaki-cutlass build --arch sm_90a` here), as
# tune skips a candidate that is not built.
timeout 170 $PY -m ozaki_cutlass tune --sizes 1024 2048 4096 8192 16384 \
  --shapes 16384x16384x1024 4096x4096x65536 65536x1024x4096 --out "$OUT/tuning.json" 2>&1 | tee "$OUT/tune.log"
OZAKI_TUNING_TABLE="$OUT/tuning.json" timeout 200 $PY -m ozaki_cutlass bench --json "$OUT/bench.json" \
  --csv "$OUT/bench.csv" --plot "$OUT/bench.png" 2>&1 | tee "$OUT/bench.log"
