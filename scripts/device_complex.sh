#!/usr/bin/env bash
# The complex (ZGEMM) checks and figures in one device call (carry .whl; the kernels are
# built here, into OZAKI_CACHE_DIR outside the carried tree, so a warm machine keeps them):
#   bash scripts/device_complex.sh            build, the complex GPU tests, Karatsuba at
#                                             8192 and 16384 against the fused path
#   TUNE=1 bash scripts/device_complex.sh     also re-tune the complex 16384 bucket into
#                                             $OUT/tuning.json (the shipped table extended)
# Writes $OUT/build.log, zgemm_tests.log, karatsuba.json (and tune.txt, tuning.json);
# about 5 minutes cold (one device call may run 10).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export OZAKI_CACHE_DIR=${OZAKI_CACHE_DIR:-/root/ozaki-cache}
(cd /tmp && OZAKI_BUILD_JOBS=16 $PY -m ozaki_cutlass build --arch sm_90a && \
  OZAKI_BUILD_JOBS=16 $PY -m ozaki_cutlass build --arch sm_80) > "$OUT/build.log" 2>&1
tail -1 "$OUT/build.log"
timeout 150 $PY -m pytest tests/gpu/test_zgemm_gpu.py tests/gpu/test_gpu_memory.py -q -p no:cacheprovider -rfE \
  --timeout 120 > "$OUT/zgemm_tests.log" 2>&1
tail -3 "$OUT/zgemm_tests.log"
timeout 150 $PY scripts/karatsuba_bench.py --sizes 8192 16384 --reps 5 --out "$OUT/karatsuba.json" 2>&1 | tail -8
if [ -n "${TUNE:-}" ]; then
  timeout 150 $PY -m ozaki_cutlass tune --sizes --zgemm 16384 --mode fast --reps 3 \
    --extend ozaki_cutlass/data/tuning.json --out "$OUT/tuning.json" > "$OUT/tune.txt" 2>&1
  tail -18 "$OUT/tune.txt"
fi
