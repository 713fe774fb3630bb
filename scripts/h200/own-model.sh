#!/usr/bin/env bash
# A program's own model and loop on CUDA (the `own_model` example: a residual MLP whose block 1
# is planted wide), through steptrace_burn::Session: each capability, read back with
# `steptrace report`; then the paired bench of `steptrace train` (built on the Session type)
# on the MLP at batch 256, host spans with the null check, for docs/benchmarks.md.
#
#   scripts/h200/run own-model
#
# Knobs: BUDGET (seconds, default 560), RUNS (bench processes, default 20), BENCH=0, OOM=0,
# CAPTURE=0, RUNS_OWN=0 (skips the own_model runs before the out-of-memory one), CONVNET=1 (the
# bench on the ConvNet at batch 256 too), CACHE, WORK. Needs .devbin/steptrace and own_model
# (one .tar.xz). What comes back: $OUT/h200-own-model.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-own-model}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-560}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
RUNS=${RUNS:-20}
. "$HERE/common.sh"

trap 'st_pack h200-own-model' EXIT
st_start "$W"
mkdir -p "$FINAL"
OM=$W/bin/own_model
# The Session's cubecl cache: shared by every run here.
export STEPTRACE_CACHE_DIR=$CACHE

# NAME CAP ARGS...: own_model on CUDA into traces/NAME, then its report as text and JSON.
om() {
  local name=$1 cap=$2
  shift 2
  st_run_capped "$name" "$cap" "$OM" --backend cuda --out "traces/$name" "$@"
  (cd "$R" && "$B" report "traces/$name" > "report-$name.txt" 2>&1; "$B" report "traces/$name" --json > "report-$name.json" 2>&1) || true
}

# The first run compiles and autotunes (cold cache); it asks for device activity only.
if [ "${RUNS_OWN:-1}" = 1 ]; then
om plain 150 --steps 40
om ops 90 --steps 40 --ops
om spans 90 --steps 40 --ops --spans
om memory 90 --steps 40 --memory
grep -A14 "Which op" "$R/report-ops.txt" | head -30
grep -A14 "Which op" "$R/report-spans.txt" | head -30
grep -A14 "Device memory" "$R/report-memory.txt" | head -16
fi

# A batch whose wide layer cannot be allocated: 131,072 floats a sample (64 x 2048), 300,000
# samples, 157 GB for one activation on a 141 GB device.
if [ "${OOM:-1}" = 1 ]; then
  om oom 150 --steps 6 --batch 300000 --wide 2048 --memory --schedule wait=0,warmup=0,active=3,repeat=1
  grep -B2 -A30 "OUT OF DEVICE MEMORY" "$R/oom.log" | head -40
fi

# On demand: a long run, one capture of 3 steps asked for after its start.
if [ "${CAPTURE:-1}" = 1 ]; then
  (cd "$R" && timeout 90 "$OM" --backend cuda --out traces/on-demand --schedule on-demand --steps 1000000 > on-demand.log 2>&1) &
  run=$!
  sleep 25
  ready=$(ls "$R"/traces/on-demand/.steptrace-capture/*.ready.json 2> /dev/null | head -n 1)
  pid=$(basename "$ready"); pid=${pid%%.*}
  if [ -n "$pid" ]; then
    st_run_capped capture 40 "$B" capture "$pid" --steps 3 --out traces/on-demand --json
    kill -INT "$pid" 2> /dev/null
  fi
  wait "$run"
  echo "on-demand exit: $?" >> "$R/rc.txt"
  (cd "$R" && "$B" report traces/on-demand > report-on-demand.txt 2>&1) || true
fi

# `steptrace train` (built on the Session type): what its host spans cost, paired in each process.
if [ "${BENCH:-1}" = 1 ]; then
  st_run_capped bench-mlp-host 200 "$B" bench --profile interleaved --backend cuda --cache-dir "$CACHE" \
    --schedule wait=7,warmup=1,active=2 --runs "$RUNS" --model mlp --dataset digits --batch 256 \
    --device-activity off --baseline --json bench-mlp-host.json
  if [ "${CONVNET:-0}" = 1 ]; then
    st_run_capped bench-convnet-host 200 "$B" bench --profile interleaved --backend cuda --cache-dir "$CACHE" \
      --schedule wait=7,warmup=1,active=2 --runs "$RUNS" --model convnet --dataset digits --batch 256 \
      --device-activity off --json bench-convnet-host.json
  fi
fi
echo "== done [${SECONDS}s]"
cat "$R/rc.txt" 2> /dev/null || true
