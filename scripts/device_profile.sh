#!/usr/bin/env bash
# Nsight Compute figures of one emulated GEMM (carry build and .whl, as for
# device_check.sh): bash scripts/device_profile.sh [N]
# For each path, every kernel of one call is profiled with ncu's full section set
# (clocks left alone, METHOD.md); the details and raw metric pages go to $OUT as CSV.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
N=${1:-8192}
ncu --version | tail -1 | tee "$OUT/ncu_env.txt"
for P in staged fused; do
  timeout 240 ncu --clock-control none --set full --target-processes all -f -o "/tmp/prof_$P" \
    $PY scripts/profile_gemm.py "$N" "$P" 2>&1 | grep -v "^==PROF==" | tail -5
  ncu --import "/tmp/prof_$P.ncu-rep" --csv --page details > "$OUT/ncu_${P}_${N}_details.csv" 2>&1
  ncu --import "/tmp/prof_$P.ncu-rep" --csv --page raw > "$OUT/ncu_${P}_${N}_raw.csv" 2>&1
done
# kernel durations only, at 4096: the host gaps between launches show against the event total
timeout 60 ncu --clock-control none --section SpeedOfLight --csv --page details \
  $PY scripts/profile_gemm.py 4096 staged > "$OUT/ncu_staged_4096_sol.csv" 2>&1
for P in staged fused; do $PY scripts/profile_gemm.py 4096 $P --warm 2>&1 | tail -1; done
