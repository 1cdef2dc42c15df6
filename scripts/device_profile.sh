#!/usr/bin/env bash
# Nsight Compute figures of one emulated GEMM (carry .whl; the sm_90a kernels are built first
# into $OZAKI_CACHE_DIR, default /root/ozaki-cache): bash scripts/device_profile.sh [N]
# For each path, every kernel of one call is profiled with ncu's full section set
# (clocks left alone, METHOD.md); the details and raw metric pages go to $OUT as CSV.
#   KERNEL=REGEX bash scripts/device_profile.sh [N]
# instead profiles the kernels whose names match REGEX in the second of two fused calls
# (15 moduli, accurate mode), one launch each, with SASS-level source counters: details
# and source pages as CSV, and their instruction mix per output entry (scripts/ncu_mix.py).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
N=${1:-8192}
ncu --version | tail -1 | tee "$OUT/ncu_env.txt"
# the kernels built first, outside ncu (a build under ncu crashed: 2026-12-02), into a cache
# outside the carried tree
export OZAKI_CACHE_DIR=${OZAKI_CACHE_DIR:-/root/ozaki-cache}
(cd /tmp && OZAKI_BUILD_JOBS=${OZAKI_BUILD_JOBS:-14} $PY -m ozaki_cutlass build --arch sm_90a) 2>&1 | tail -1
if [[ -n ${KERNEL:-} ]]; then
  # the first (--warm) call launches each matching kernel once per launch of the second
  launches=$(timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum -k "regex:$KERNEL" --csv \
    $PY scripts/profile_gemm.py "$N" fused 2>/dev/null | grep -c gpu__time_duration)
  (( launches > 0 )) || { echo "no kernel of a fused call at $N matches KERNEL=$KERNEL"; exit 1; }
  timeout 300 ncu --clock-control none --set full --import-source yes -k "regex:$KERNEL" \
    --launch-skip "$launches" --launch-count "$launches" -f -o /tmp/prof_kernel \
    $PY scripts/profile_gemm.py "$N" fused --warm 2>&1 | grep -v "^==PROF==" | tail -3
  ncu --import /tmp/prof_kernel.ncu-rep --csv --page details > "$OUT/ncu_kernel_${N}_details.csv" 2>&1
  ncu --import /tmp/prof_kernel.ncu-rep --csv --page source --print-source sass > /tmp/prof_kernel_source.csv 2>&1
  $PY scripts/ncu_mix.py /tmp/prof_kernel_source.csv --entries $((N * N)) --json "$OUT/ncu_kernel_${N}_mix.json"
  exit
fi
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
