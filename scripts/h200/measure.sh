#!/usr/bin/env bash
# The paired overhead, the span and sink benches, and the cold start on the lent H200, with
# the release binaries carried in .devbin/ (steptrace, the criterion bench `overhead-bench`, the
# `long_window` example and, for before/after, `overhead-bench-old` and `long_window_old`):
#
#   scripts/h200/run measure cold   the cold start itemised: MLP -> ConvNet -> MLP
#                                   into one empty cubecl cache (cold, partly warm,
#                                   warm), then `bench --profile interleaved` of the
#                                   MLP (digits, batch 256, with --baseline) and the
#                                   ConvNet (fashion-mnist, batch 256) in that cache
#   scripts/h200/run measure host   the criterion bench (span cost against
#                                   tracing-chrome alone, the sink's throughput) and
#                                   long_window's memory on this host's CPU, for this
#                                   build and (`-old` binaries, when carried) the one
#                                   before, then
#                                   `bench --profile interleaved` of the MLP at batch
#                                   4096 (synthetic, 65,536 samples)
#   scripts/h200/run measure big    the ConvNet at batch 4096 (synthetic), and the
#                                   MLP's cold start with --autotune-level minimal
#
# Results (summaries, bench JSON, logs, reports) land in $OUT/h200-measure-MODE.tgz,
# the console in $OUT/h200-measure-MODE.log (tee'd by the caller).
# Knobs: BUDGET (default 540), RUNS (default 3), BACKEND, TRAIN_STEPS (default 40), BENCH_ARGS,
# CAP, STEPTRACE. A local dry run: BACKEND=cpu STEPTRACE=path/to/steptrace OUT=$(mktemp -d) \
#   RUNS=1 TRAIN_STEPS=6 BENCH_ARGS="--warmup 2 --steps 20" scripts/h200/run measure cold
set -euo pipefail
MODE=${1:?cold, host or big}
FINAL=${OUT:?OUT must name the output folder}
W=/tmp/st-h200-measure
R=$W/results
BUDGET=${BUDGET:-540}
BACKEND=${BACKEND:-cuda}
RUNS=${RUNS:-3}
TRAIN_STEPS=${TRAIN_STEPS:-40}
read -r -a BENCH_EXTRA <<< "${BENCH_ARGS:-}"
. "$(dirname "$0")/common.sh"

pack() {
  set +e
  tar czf "$FINAL/h200-measure-$MODE.tgz" -C "$W" --exclude='results/traces' --exclude='results/*/traces' results
  ls -la "$FINAL"
}

# NAME CACHE ARGS...: a train run with its console, summary and cold start.
train() {
  local name=$1 cache=$2
  shift 2
  st_run_capped "$name" "${CAP:-240}" "$B" train --backend "$BACKEND" --steps "$TRAIN_STEPS" --loss-every 0 \
    --cache-dir "$cache" --out "traces/$name" --json "$name.json" "$@"
}

# NAME CACHE ARGS...: bench --profile interleaved, its JSON kept.
overhead() {
  local name=$1 cache=$2
  shift 2
  st_run_capped "$name" "${CAP:-300}" "$B" bench --profile interleaved --backend "$BACKEND" --runs "$RUNS" \
    --cache-dir "$cache" --trace-dir "traces/$name" --json "$name.json" "${BENCH_EXTRA[@]}" "$@"
}

main() {
  trap pack EXIT
  st_start "$W"
  case $MODE in
    cold)
      CAP=200 train cold-1-mlp /tmp/cubecl-cold --model mlp --dataset digits --batch 256
      CAP=240 train cold-2-convnet /tmp/cubecl-cold --model convnet --dataset fashion-mnist --batch 256
      CAP=90 train cold-3-mlp /tmp/cubecl-cold --model mlp --dataset digits --batch 256
      overhead overhead-mlp-256 /tmp/cubecl-cold --model mlp --dataset digits --batch 256 --baseline
      overhead overhead-convnet-256 /tmp/cubecl-cold --model convnet --dataset fashion-mnist --batch 256
      ;;
    host)
      local bin
      bin=$(dirname "$B")
      # This build and, where carried, the one before (same bench source): `old` first.
      local v
      for v in old new; do
        local exe=$bin/overhead-bench
        [ $v = old ] && exe=$bin/overhead-bench-old
        if [ -x "$exe" ]; then
          CRITERION_HOME=$R/criterion-$v st_run_capped "criterion-$v" 150 "$exe" --bench 'span_|sink'
        fi
      done
      for n in 100000 400000; do
        for v in old new; do
          exe=$bin/long_window
          [ $v = old ] && exe=$bin/long_window_old
          if [ -x "$exe" ]; then st_run_capped "long-window-$v-$n" 60 "$exe" "$n"; fi
        done
      done
      overhead overhead-mlp-4096 /tmp/cubecl-host --model mlp --dataset synthetic --synthetic-samples 65536 --batch 4096
      ;;
    big)
      RUNS=2 CAP=330 overhead overhead-convnet-4096 /tmp/cubecl-big --model convnet --dataset synthetic \
        --synthetic-samples 65536 --batch 4096 --steps 200
      CAP=200 train cold-minimal-mlp /tmp/cubecl-minimal --model mlp --dataset digits --batch 256 --autotune-level minimal
      ;;
    *) echo "unknown mode $MODE" >&2; exit 2 ;;
  esac
}

main
