#!/usr/bin/env bash
# The shipped tuning table's two steps on the lent H200 (carry .whl; the script builds the
# candidates first, cached under OZAKI_CACHE_DIR on a warm machine):
#   bash scripts/device_tune.sh              -> $OUT/tuning.json, tune-real.txt, tune-zgemm.txt
#   BENCH=1 bash scripts/device_tune.sh      and then the benchmark with it -> bench.{json,csv,png}
# 1. real calls, 15 moduli, accurate mode: the square sizes and the rectangular shapes,
#    the built-in candidates and the kernels of the tables so far (--variants);
# 2. complex 16384^3 in fast mode (the default call's contract, where Karatsuba runs),
#    its bucket put ahead of step 1's (--extend).
# Copy $OUT/tuning.json to ozaki_cutlass/data/tuning.json to ship it (docs/benchmarks.md,
# "The shipped table", says what each bucket runs).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
VARIANTS=('i8_sm90a_256x128x128_c1x2_coop_s0_*_g1_sw8' i8_sm90a_128x128x128_c1x2_pp_s0_pcrt_g1
          i8_sm90a_128x256x128_c1x1_coop_s0_pcrt_g1_sw8 i8_sm90a_128x256x128_c2x1_coop_s0_pcrt_g1)
# tune builds nothing: the built-in candidates (the default build) and the variants named
{ $PY -m ozaki_cutlass build --arch sm_90a && $PY -m ozaki_cutlass build --arch sm_90a --variants "${VARIANTS[@]}"; } \
  > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
timeout 420 $PY -m ozaki_cutlass tune --sizes 1024 2048 4096 8192 16384 \
  --shapes 16384x16384x1024 4096x4096x65536 65536x1024x4096 8192x8192x2048 2048x2048x16384 16384x1024x16384 \
  --variants "${VARIANTS[@]}" --out "$OUT/real.json" > "$OUT/tune-real.txt" 2>&1 || { tail -30 "$OUT/tune-real.txt"; exit 1; }
OZAKI_TUNING_TABLE="$OUT/real.json" timeout 200 $PY -m ozaki_cutlass tune --sizes --zgemm 16384 --mode fast \
  --reps 3 --extend "$OUT/real.json" --out "$OUT/tuning.json" > "$OUT/tune-zgemm.txt" 2>&1 \
  || { tail -30 "$OUT/tune-zgemm.txt"; exit 1; }
rm -f "$OUT/real.json"   # kept inside tuning.json, under "extends"
tail -40 "$OUT/tune-real.txt"
tail -8 "$OUT/tune-zgemm.txt"
if [ -n "${BENCH:-}" ]; then
  OZAKI_TUNING_TABLE="$OUT/tuning.json" timeout 200 $PY -m ozaki_cutlass bench --json "$OUT/bench.json" \
    --csv "$OUT/bench.csv" --plot "$OUT/bench.png" 2>&1 | tail -30
fi
