#!/usr/bin/env bash
# The per-stage table of issue 16 on the device (carry .whl; kernels are built first into
# $OZAKI_CACHE_DIR, default /root/ozaki-cache): bash scripts/device_stages.sh [CONFIG...]
# CONFIG: "accurate15" (15 moduli, accurate mode, fused path) and/or "contract" (the
# default call's choice, fused path). For each shape, one call under
#   ncu --clock-control none --profile-from-start off --metrics time, DRAM read, DRAM write,
#   SM clock, warp instructions
# (stages-SHAPE-CONFIG.{json,csv}), then under the same ncu plain kernels that move each
# stage's bytes in one launch (stages-SHAPE-CONFIG-move.csv: stage_table.py move; MOVES=0
# skips them), the residues of both operands as a call launches them
# (stages-residue-calls.json: scripts/residues_alone.py --calls) and the device's copy
# bandwidth (copy.txt), all in one
# $OUT/stages.tar (the device tool brings back a few files only); then here: python scripts/stage_table.py table --bandwidth TBS RUN.json:NCU.csv[:MOVE.csv] ...
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
# outside the carried tree, so a warm machine keeps them; built before any call runs under
# ncu (a build under ncu crashed: 2026-12-02)
export OZAKI_CACHE_DIR=${OZAKI_CACHE_DIR:-/root/ozaki-cache}
(cd /tmp && OZAKI_BUILD_JOBS=${OZAKI_BUILD_JOBS:-14} $PY -m ozaki_cutlass build --arch sm_90a) 2>&1 | tail -1
CONFIGS=${*:-accurate15 contract}
SHAPES=${SHAPES:-"4096x4096x4096 8192x8192x8192 16384x16384x16384 8192x8192x2048 2048x2048x16384 16384x1024x16384 4096x4096x65536"}
$PY - <<'PY' | tee "$OUT/copy.txt"
import cupy as cp, statistics
x = cp.empty(2**29); y = cp.empty_like(x)   # 4 GiB each
ev = [cp.cuda.Event() for _ in range(2)]
ts = []
for _ in range(12):
    ev[0].record(); cp.copyto(y, x); ev[1].record(); ev[1].synchronize()
    ts.append(cp.cuda.get_elapsed_time(ev[0], ev[1]))
ms = statistics.median(ts[2:])
print(f"copy: {2 * x.nbytes / ms / 1e6:.0f} GB/s ({2 * x.nbytes / 1e9:.2f} GB in {ms:.3f} ms, median of 10)")
PY
for S in $SHAPES; do
  IFS=x read -r M N K <<< "$S"
  for C in $CONFIGS; do
    case $C in
      accurate15) ARGS="--moduli 15 --mode accurate" ;;
      contract) ARGS="" ;;
      *) echo "unknown config $C"; exit 2 ;;
    esac
    timeout 300 ncu --clock-control none --profile-from-start off --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum \
      $PY scripts/stage_table.py call "$M" "$N" "$K" $ARGS --path fused --json "$OUT/stages-$S-$C.json" \
      > "$OUT/stages-$S-$C.csv" 2> "$OUT/stages-$S-$C.err" || tail -5 "$OUT/stages-$S-$C.err"
    echo "$S $C: $(grep -c gpu__time "$OUT/stages-$S-$C.csv") kernels"
    if [ "${MOVES:-1}" != 0 ] && [ -s "$OUT/stages-$S-$C.json" ]; then
      timeout 300 ncu --clock-control none --profile-from-start off --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        $PY scripts/stage_table.py move "$OUT/stages-$S-$C.json" --ncu "$OUT/stages-$S-$C.csv" \
        > "$OUT/stages-$S-$C-move.csv" 2> "$OUT/stages-$S-$C-move.err" || tail -5 "$OUT/stages-$S-$C-move.err"
      echo "$S $C: $(grep -c gpu__time "$OUT/stages-$S-$C-move.csv") move kernels"
    fi
  done
done
# The residues of both operands as the calls launch them (op(B)'s forked onto a second
# stream; ncu above runs one kernel at a time): CUDA events, route 2^56 (accurate mode's at
# k <= 8192), unless RESIDUE_CALLS=0.
if [ "${RESIDUE_CALLS:-1}" != 0 ]; then
  timeout 200 $PY scripts/residues_alone.py --calls $SHAPES --top 56 --rounds 5 \
    --json "$OUT/stages-residue-calls.json"
fi
(cd "$OUT" && tar -cf stages.tar copy.txt stages-*.json stages-*.csv && rm -f stages-*)
