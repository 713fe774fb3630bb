#!/usr/bin/env bash
# steptrace on burn 0.22 on the H200, by the method of the burn 0.21 figures
# (scripts/h200/measure.sh `cold`), in runs of under 10 minutes:
#
#   scripts/h200/run port first        the default `steptrace train` on CUDA with device
#                                      activity into an empty cubecl cache (the MLP's cold
#                                      first step, itemised), `report`, `report --json`,
#                                      `report --html`; then the ConvNet into the same
#                                      cache (cold for its kernels), and the MLP again
#                                      (warm); traces kept for HTA
#   scripts/h200/run port cold         0.21's cold-start method exactly (measure.sh
#                                      `cold`): into an empty cache, the MLP at batch 256,
#                                      then the ConvNet (partly warm), then the MLP again
#                                      (warm); then the Transformer (its own kernels)
#   scripts/h200/run port transformer  the Transformer alone, in the cache an earlier run left
#   scripts/h200/run port overhead     `bench --profile interleaved` for the MLP (with
#                                      --baseline) and the ConvNet at batch 256, RUNS
#                                      processes each, in the cache `first` left (when the
#                                      machine is still the same; else they pay the cold
#                                      start)
#
# Knobs: BUDGET (default 560), RUNS (default 3), BACKEND, CACHE, CAP. The release binary is
# carried as .devbin/steptrace.xz (the H200 has no Rust). Results land in
# $OUT/h200-port-MODE.tgz and the console log in $OUT/h200-port-MODE.log.
set -euo pipefail
MODE=${1:?first or overhead}
FINAL=${OUT:?OUT must name the output folder}
W=/tmp/st-h200-port
R=$W/results-$MODE
BUDGET=${BUDGET:-560}
BACKEND=${BACKEND:-cuda}
RUNS=${RUNS:-3}
CACHE=${CACHE:-/tmp/cubecl-port}
. "$(dirname "$0")/common.sh"

pack() {
  set +e
  tar czf "$FINAL/h200-port-$MODE.tgz" -C "$W" "results-$MODE"
  ls -la "$FINAL"
}

train() {
  local name=$1
  shift
  st_run_capped "$name" "${CAP:-240}" "$B" train --backend "$BACKEND" --cache-dir "$CACHE" \
    --out "traces/$name" --json "$name.json" "$@"
}

report() {
  local name=$1
  "$B" report "traces/$name" > "$R/report-$name.txt" 2>&1 || echo "report $name rc=$?"
  "$B" report "traces/$name" --json > "$R/report-$name.json" 2> "$R/report-$name.json.err" || echo "report --json $name rc=$?"
  "$B" report "traces/$name" --html "$R/report-$name.html" > /dev/null 2>&1 || echo "report --html $name rc=$?"
  grep -A 12 '^== Hypotheses' "$R/report-$name.txt" || true
}

overhead() {
  local name=$1
  shift
  st_run_capped "$name" "${CAP:-270}" "$B" bench --profile interleaved --backend "$BACKEND" --runs "$RUNS" \
    --cache-dir "$CACHE" --trace-dir "traces/$name" --json "$name.json" "$@"
}

main() {
  trap pack EXIT
  st_start "$R"
  case $MODE in
    first)
      rm -rf "$CACHE"
      # The README's default run, on CUDA: the MLP on the digits, its default schedule.
      CAP=200 train default-mlp
      (cd "$R" && report default-mlp)
      CAP=220 train cold-convnet --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0
      CAP=90 train warm-mlp --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0
      ;;
    cold)
      rm -rf "$CACHE"
      CAP=150 train cold-mlp-256 --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0
      CAP=200 train cold-convnet-256 --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0
      CAP=60 train warm-mlp-256 --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0
      CAP=200 train cold-transformer --model transformer --dataset shakespeare --batch 64 --seq-len 64 --steps 40 --loss-every 0
      ;;
    transformer)
      CAP=240 train cold-transformer --model transformer --dataset shakespeare --batch 64 --seq-len 64 --steps 40 --loss-every 0
      ;;
    overhead)
      overhead overhead-mlp-256 --model mlp --dataset digits --batch 256 --baseline
      overhead overhead-convnet-256 --model convnet --dataset fashion-mnist --batch 256
      rm -rf "$R"/traces/overhead-*
      ;;
    *) echo "unknown mode $MODE" >&2; exit 2 ;;
  esac
  echo "== done [${SECONDS}s]"
  cat "$R/rc.txt" 2>/dev/null || true
}

main 2>&1 | tee "$FINAL/h200-port-$MODE.log"
