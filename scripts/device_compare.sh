#!/usr/bin/env bash
# Before and after on one lent H200: this checkout ("after") against a base tree
# ("before", BASE, default .dev/base, made here with
#   mkdir -p .dev/base && git archive REV | tar -x -C .dev/base
# and carried with .whl, the nvidia-cutlass wheel: see device_check.sh).
# The checkout is installed editable (device_env.sh), the base copied into its own folder, both
# build into one kernel cache (keys differ where the sources do). One call runs 10 minutes
# at most, so the work is in two steps, each a call on the same warm machine:
#   STEP=build bash scripts/device_compare.sh   build both (in parallel), then the GPU tests
#                                               on the checkout -> $OUT/build.log, gpu.log
#                                               (SKIP_TESTS=1: sm_90a only, no tests)
#   STEP=bench bash scripts/device_compare.sh   `ozaki-cutlass bench $BENCH_ARGS` before, after,
#                                               before, after (while time is left)
#                                               -> $OUT/bench-*.json
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
BASE=${BASE:-.dev/base}
BASE_SITE=/root/ozaki-base
export OZAKI_CACHE_DIR=${OZAKI_CACHE_DIR:-/root/ozaki-cache}
STEP=${STEP:-build}

# the base may predate `python -m ozaki_cutlass`: its CLI's main, called directly
before() { (cd /tmp && PYTHONPATH=$BASE_SITE $PY -c 'import sys
try:
    from ozaki_cutlass.tools.cli import main
except ImportError:
    from ozaki_cutlass.cli import main
sys.exit(main(sys.argv[1:]))' "$@"); }
after() { (cd /tmp && $PY -m ozaki_cutlass "$@"); }

if [[ $STEP == build ]]; then
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
  # the base laid out as installed (generator/ and templates/ inside the package); its
  # dependencies, the cutlass wheel included, are those device_env.sh installed
  rm -rf $BASE_SITE && mkdir -p $BASE_SITE && cp -r "$BASE/ozaki_cutlass" $BASE_SITE/ \
    && cp -r "$BASE/generator" "$BASE/templates" $BASE_SITE/ozaki_cutlass/ || exit 1
  OZAKI_BUILD_JOBS=6 before build --arch sm_90a >"$OUT/build-before.log" 2>&1 &
  base_build=$!
  { OZAKI_BUILD_JOBS=10 after build --arch sm_90a && { [[ -n ${SKIP_TESTS:-} ]] || OZAKI_BUILD_JOBS=10 after build --arch sm_80; }; } \
    >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  tail -2 "$OUT/build.log"
  [[ -n ${SKIP_TESTS:-} ]] || timeout 400 $PY -m pytest tests/gpu -q -p no:cacheprovider -rfE 2>&1 | tee "$OUT/gpu.log" | tail -15
  wait $base_build || { tail -20 "$OUT/build-before.log"; exit 1; }
  tail -2 "$OUT/build-before.log"
  date -u +%FT%TZ
fi

if [[ $STEP == bench ]]; then
  start=$SECONDS
  for round in 1 2; do
    for side in before after; do
      if (( SECONDS - start > ${BENCH_BUDGET_S:-330} )); then
        echo "stopped before $side round $round: time budget spent"
        continue
      fi
      echo "== $side, round $round ($(date -u +%T))"
      # shellcheck disable=SC2086  # BENCH_ARGS: several words
      $side bench ${BENCH_ARGS:-} --json "$OUT/bench-$side-$round.json" 2>&1 | tail -12
    done
  done
fi
