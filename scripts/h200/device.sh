#!/usr/bin/env bash
# steptrace train on the lent H200 with CUPTI device activity: the default
# job's traces (what a user opens), and the profiler's cost paired inside
# one process for the MLP and the ConvNet (device activity on, and host
# spans only), as wait-phase against active-phase steps of the same run,
# analysed by scripts/overhead.py and scripts/device-stats.py.
# (`bench --profile interleaved`, which scripts/h200/measure.sh and later
# experiments run, does the paired measurement in one command.)
#
# Runs in the repository root on the device machine:
#   scripts/h200/run device
# with the release binary carried in .devbin/ (as common.sh unpacks it). Everything
# lands in two archives under $OUT (the device returns at most 8 files):
#   h200-device.tgz         summaries, logs, default-job traces, analyses
#   h200-device-traces.txz  the 650-step runs' trace directories
# and the console log, tee'd, as $OUT/h200-device.log.
#
#   scripts/h200/run device alternate
# is the cross-process control: per model one cold run (--no-profile), then
# processes of the same 650-step command alternating --device-activity off
# and auto (off auto auto off off auto), and one --no-profile process (its
# "phases" are labels only: a null check of the paired ratio). Summaries and
# logs only: $OUT/h200-device-alt.tgz and $OUT/h200-device-alt.log.
#
# Knobs: BUDGET (seconds, default 500), BACKEND (cpu: a local dry run), STEPTRACE (a local
# binary instead of the carried one).
set -euo pipefail
MODE=${1:-main}

FINAL=${OUT:?OUT must name the output folder}
W=/tmp/st-h200
R=$W/results
CACHE=/tmp/cubecl                      # one cubecl cache for every run
BUDGET=${BUDGET:-500}                  # seconds for all the train runs
S="skip_first=50,wait=6,warmup=1,active=3,repeat=60"
BACKEND=${BACKEND:-cuda}               # cpu: a local dry run of this script
REPO=$PWD
. "$(dirname "$0")/common.sh"

pack() {
  set +e
  echo "$(date -u +%T) packing"
  tar czf "$FINAL/h200-device.tgz" -C "$W" --exclude='results/traces/mlp-*' --exclude='results/traces/conv-*' results
  if [ -d "$R/traces" ]; then
    (cd "$W" && ls -d results/traces/mlp-* results/traces/conv-* 2>/dev/null | \
      tar cf - -T - | xz -T0 -6 > "$FINAL/h200-device-traces.txz")
  fi
  ls -la "$FINAL"
}

# NAME CAP_SECONDS ARGS...: steptrace ARGS under the budget (common.sh).
run_train() {
  local name=$1 cap=$2
  shift 2
  st_run_capped "$name" "$cap" "$B" "$@"
}

main() {
  trap pack EXIT
  rm -rf "$W"
  mkdir -p "$R/traces"
  st_binaries "$W"                     # or $STEPTRACE, a local binary, for a dry run
  st_cupti_path

  echo "== machine ($(date -u +%FT%TZ))"
  {
    sha256sum "$B"
    uname -a; nproc
    nvidia-smi -L || echo "nvidia-smi -L rc=$?"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true
    ls -la /usr/local/cuda*/targets/x86_64-linux/lib/libcupti* || echo "ls libcupti rc=$?"
    ls -la /usr/local/cuda*/extras/CUPTI/lib64/libcupti* 2>/dev/null || true
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" || true
    "$B" --version || true
    "$B" backends || echo "steptrace backends rc=$?"
  } 2>&1 | tee "$R/machine.txt"

  SECONDS=0
  local C=(--cache-dir "$CACHE" --quiet)
  local OH=(--batch 256 --dataset digits --schedule "$S" --steps 650 --loss-every 0)
  # 2. The default job (MLP, digits, default schedule), first: a cold cache.
  run_train default 240 train --backend "$BACKEND" --out traces/default --json default.json "${C[@]}"
  # 3. Overhead, paired inside one process, device activity on, then host spans only.
  run_train mlp-auto 180 train --backend "$BACKEND" --model mlp "${OH[@]}" --device-activity auto \
    --out traces/mlp-auto --json mlp-auto.json "${C[@]}"
  run_train mlp-off 120 train --backend "$BACKEND" --model mlp "${OH[@]}" --device-activity off \
    --out traces/mlp-off --json mlp-off.json "${C[@]}"
  run_train conv-auto 240 train --backend "$BACKEND" --model convnet "${OH[@]}" --device-activity auto \
    --out traces/conv-auto --json conv-auto.json "${C[@]}"
  run_train conv-off 120 train --backend "$BACKEND" --model convnet "${OH[@]}" --device-activity off \
    --out traces/conv-off --json conv-off.json "${C[@]}"

  echo "== analyses [${SECONDS}s]"
  local f sums=()
  for f in mlp-auto mlp-off conv-auto conv-off; do
    if [ -f "$R/$f.json" ]; then sums+=("$R/$f.json"); fi
  done
  if [ ${#sums[@]} -gt 0 ]; then
    python3 "$REPO/scripts/overhead.py" "${sums[@]}" --schedule "$S" --json "$R/overhead.json" \
      > "$R/overhead.txt" 2>&1 || echo "overhead.py rc=$?"
    cat "$R/overhead.txt"
  fi
  local dirs=()
  for d in default mlp-auto conv-auto; do
    if [ -d "$R/traces/$d" ]; then dirs+=(--traces "$R/traces/$d"); fi
  done
  if [ ${#dirs[@]} -gt 0 ]; then
    python3 "$REPO/scripts/device-stats.py" "${dirs[@]}" --json "$R/device-stats.json" \
      > "$R/device-stats.txt" 2>&1 || echo "device-stats.py rc=$?"
    cat "$R/device-stats.txt"
  fi
  if [ -d "$R/traces/default" ]; then
    "$B" report "$R/traces/default" > "$R/report-default.txt" 2>&1 || echo "report rc=$?"
    head -n 60 "$R/report-default.txt"
  fi
  du -sh "$R"/traces/* || true
  cat "$R/rc.txt"
}

pack_alt() {
  set +e
  tar czf "$FINAL/h200-device-alt.tgz" -C "$W" --exclude='results/traces' results
  ls -la "$FINAL"
}

alternate() {
  trap pack_alt EXIT
  rm -rf "$W"
  mkdir -p "$R/traces"
  st_binaries "$W"                     # or $STEPTRACE, a local binary, for a dry run
  st_cupti_path
  { sha256sum "$B"; nvidia-smi -L || true; "$B" backends || true; } 2>&1 | tee "$R/machine.txt"
  SECONDS=0
  local C=(--cache-dir "$CACHE" --quiet)
  local OH=(--batch 256 --dataset digits --schedule "$S" --steps 650 --loss-every 0)
  local model short i=0 da sums=()
  for model in mlp convnet; do
    short=${model%net}
    run_train "$short-cold" 200 train --backend "$BACKEND" --model "$model" --batch 256 --dataset digits \
      --steps 60 --no-profile --json "$short-cold.json" "${C[@]}"
    i=0
    for da in off auto auto off off auto; do
      i=$((i + 1))
      run_train "$short-$i-$da" 60 train --backend "$BACKEND" --model "$model" "${OH[@]}" \
        --device-activity "$da" --out "traces/$short-$i-$da" --json "$short-$i-$da.json" "${C[@]}"
      if [ -f "$R/$short-$i-$da.json" ]; then sums+=("$R/$short-$i-$da.json"); fi
    done
    run_train "$short-7-noprofile" 60 train --backend "$BACKEND" --model "$model" "${OH[@]}" \
      --no-profile --json "$short-7-noprofile.json" "${C[@]}"
    if [ -f "$R/$short-7-noprofile.json" ]; then sums+=("$R/$short-7-noprofile.json"); fi
  done
  if [ ${#sums[@]} -gt 0 ]; then
    python3 "$REPO/scripts/overhead.py" "${sums[@]}" --schedule "$S" --json "$R/overhead-alt.json" \
      > "$R/overhead-alt.txt" 2>&1 || echo "overhead.py rc=$?"
    grep -E '^/|wait  |active  |active_over' "$R/overhead-alt.txt" || true
  fi
  # What the recorded windows hold, for one auto process per model.
  local dirs=()
  for d in mlp-2-auto conv-2-auto; do
    if [ -d "$R/traces/$d" ]; then dirs+=(--traces "$R/traces/$d"); fi
  done
  if [ ${#dirs[@]} -gt 0 ]; then
    python3 "$REPO/scripts/device-stats.py" "${dirs[@]}" > "$R/device-stats-alt.txt" 2>&1 || echo "device-stats.py rc=$?"
    tail -n 20 "$R/device-stats-alt.txt"
  fi
  cat "$R/rc.txt"
}

if [ "$MODE" = alternate ]; then
  alternate 2>&1 | tee "$FINAL/h200-device-alt.log"
else
  main 2>&1 | tee "$FINAL/h200-device.log"
fi
