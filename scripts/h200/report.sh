#!/usr/bin/env bash
# Evidence for the device report on the lent H200: steptrace train runs with
# CUPTI device activity, each recording several cycles of a few active steps
# after the startup, a clean run and two with a planted inefficiency, the
# ConvNet, and torch.profiler traces of the PyTorch twin for side by side.
#
# Runs in the repository root on the device machine:
#   scripts/h200/run report
# with the release binary carried in .devbin/ (as common.sh unpacks it). In this order (the
# MLP first: one cubecl cache for every run, so only the first MLP run and
# the ConvNet run pay the cold compile and autotune, 47-121 s each):
#   mlp-clean   --model mlp --dataset digits --batch 256
#   mlp-loader  the same, --loader-delay-ms 5        (an input bottleneck)
#   mlp-upload  the same, --plant-upload             (a repeated 4000-byte upload)
#   conv-clean  --model convnet --dataset fashion-mnist --batch 256
#               (the ConvNet of the burn/PyTorch figures of 2026-11-29,
#               docs/benchmarks/archive-2026-11.md; CONV_DATASET=digits for the
#               device-activity figures of 2026-12-01)
#   conv-b128, conv-b512  the ConvNet at batch 128 and 512 (does the dominant kernel's time
#               follow the batch?)
#   torch-conv  benches/torch_twin.py --model convnet --profile active (torch.profiler trace)
#   torch-mlp   the same for the MLP
# each train run with --device-activity auto, its own --out and --json, and
# `steptrace report` (text and JSON) of its traces. Everything lands in
# $OUT/h200-report.tgz (the device returns at most 8 files, 16 MiB each; if
# the archive would be larger, the torch traces go to h200-report-torch.txz),
# and the console log, tee'd, in $OUT/h200-report.log.
#
# Knobs: BUDGET (default 540), STEPS (default 50), SCHEDULE, CACHE, CONV_DATASET, TORCH_WARMUP,
# TORCH_STEPS, BACKEND, STEPTRACE.
# A local dry run (no GPU, torch skipped when it is missing):
#   BACKEND=cpu STEPTRACE=target/release/steptrace OUT=$(mktemp -d) \
#     STEPS=14 SCHEDULE=skip_first=2,wait=1,warmup=1,active=2,repeat=2 scripts/h200/run report
set -euo pipefail

FINAL=${OUT:?OUT must name the output folder}
W=/tmp/st-h200-report
R=$W/results
CACHE=${CACHE:-/tmp/cubecl}            # one cubecl cache for every run
BUDGET=${BUDGET:-540}                  # seconds for all the runs, torch included
BACKEND=${BACKEND:-cuda}               # cpu: a local dry run of this script
SCHEDULE=${SCHEDULE:-skip_first=20,wait=2,warmup=1,active=3,repeat=4}
STEPS=${STEPS:-50}                     # 20 skipped + 4 cycles of 6 steps, and a few after
CONV_DATASET=${CONV_DATASET:-fashion-mnist}
TORCH_WARMUP=${TORCH_WARMUP:-20}
TORCH_STEPS=${TORCH_STEPS:-10}         # one torch.profiler cycle of this many active steps
REPO=$PWD
. "$(dirname "$0")/common.sh"

pack() {
  set +e
  echo "$(date -u +%T) packing"
  local limit=$((15 * 1024 * 1024)) size
  tar czf "$FINAL/h200-report.tgz" -C "$W" results
  size=$(stat -c %s "$FINAL/h200-report.tgz")
  if [ "$size" -gt "$limit" ] && [ -d "$R/traces" ]; then
    echo "h200-report.tgz is $size bytes: the torch traces go to h200-report-torch.txz"
    tar czf "$FINAL/h200-report.tgz" -C "$W" --exclude='results/traces/torch-*' results
    (cd "$W" && ls -d results/traces/torch-* 2>/dev/null | tar cf - -T - | xz -T0 -6 > "$FINAL/h200-report-torch.txz")
  fi
  ls -la "$FINAL"
}

# NAME CAP ARGS...: `steptrace train` with device activity, this run's own
# trace directory and summary, then the report of its traces.
train() {
  local name=$1 cap=$2
  shift 2
  st_run_capped "$name" "$cap" "$B" train --backend "$BACKEND" --batch "${BATCH:-256}" "$@" \
    --schedule "$SCHEDULE" --steps "$STEPS" --loss-every 0 --device-activity auto \
    --cache-dir "$CACHE" --quiet --out "traces/$name" --json "$name.json"
  report "$name"
}

# NAME [ARGS...]: `steptrace report` of traces/NAME (its steptrace traces,
# or every JSON file there: torch.profiler's are not named *.trace.json), as
# text and as JSON.
report() {
  local name=$1 dir=$R/traces/$1
  shift
  local what=("$dir")
  if ! ls "$dir"/*.trace.json* > /dev/null 2>&1; then
    what=("$dir"/*.json)
  fi
  if [ ! -e "${what[0]}" ]; then
    echo "no traces for $name"
    return 0
  fi
  "$B" report "${what[@]}" "$@" > "$R/report-$name.txt" 2>&1 || echo "report $name rc=$?"
  "$B" report "${what[@]}" "$@" --json > "$R/report-$name.json" 2> "$R/report-$name.json.err" \
    || echo "report --json $name rc=$?"
  grep -A 12 '^== Hypotheses' "$R/report-$name.txt" || true
}

# NAME MODEL DATASET: the PyTorch twin, one run, one torch.profiler cycle.
torch_run() {
  local name=$1 model=$2 dataset=$3
  if [ -z "$TORCH_DEVICE" ]; then
    echo "SKIPPED $name: $TORCH_WHY" | tee -a "$R/rc.txt"
    return 0
  fi
  mkdir -p "$R/traces/$name"
  st_run_capped "$name" 90 env PYTHONUNBUFFERED=1 python3 "$REPO/benches/torch_twin.py" --model "$model" \
    --dataset "$dataset" --batch 256 --device "$TORCH_DEVICE" --warmup "$TORCH_WARMUP" --steps "$TORCH_STEPS" \
    --runs 1 --profile active --trace-dir "traces/$name" --out "$name.json"
  report "$name" --batch 256
}

main() {
  trap pack EXIT
  rm -rf "$W"
  mkdir -p "$R/traces"
  st_binaries "$W"                     # or $STEPTRACE, a local binary, for a dry run
  st_cupti_path

  # torch on the same device as the train runs: skipped without torch, or
  # without CUDA where the runs are on CUDA.
  TORCH_DEVICE="" TORCH_WHY=""
  local want=cpu
  if [ "$BACKEND" != cpu ]; then want=cuda; fi
  if ! python3 -c "import torch" > /dev/null 2>&1; then
    TORCH_WHY="no torch here"
  elif [ $want = cuda ] && ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" > /dev/null 2>&1; then
    TORCH_WHY="torch.cuda.is_available() is False"
  else
    TORCH_DEVICE=$want
  fi

  echo "== machine ($(date -u +%FT%TZ))"
  {
    nvidia-smi || echo "nvidia-smi rc=$?"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true
    sha256sum "$B"
    uname -a; nproc
    ls -la /usr/local/cuda*/targets/x86_64-linux/lib/libcupti* 2>/dev/null || echo "no libcupti under /usr/local/cuda*/targets"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    python3 --version || true
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" \
      || echo "no torch"
    "$B" --version || true
    "$B" backends || echo "steptrace backends rc=$?"
    echo "backend=$BACKEND schedule=$SCHEDULE steps=$STEPS conv_dataset=$CONV_DATASET torch=${TORCH_DEVICE:-skipped ($TORCH_WHY)}"
  } 2>&1 | tee "$R/machine.txt"

  SECONDS=0
  # The MLP first: its first run compiles and autotunes into the shared cache.
  train mlp-clean 200 --model mlp --dataset digits
  train mlp-loader 90 --model mlp --dataset digits --loader-delay-ms 5
  train mlp-upload 120 --model mlp --dataset digits --plant-upload
  train conv-clean 220 --model convnet --dataset "$CONV_DATASET"
  # The dominant-kernel hypothesis's next experiment: half the batch (and
  # twice): does the kernel's time follow the batch?
  BATCH=128 train conv-b128 120 --model convnet --dataset "$CONV_DATASET"
  BATCH=512 train conv-b512 120 --model convnet --dataset "$CONV_DATASET"
  torch_run torch-conv convnet "$CONV_DATASET"
  torch_run torch-mlp mlp digits

  echo "== done [${SECONDS}s]"
  du -sh "$R"/traces/* 2>/dev/null || true
  cat "$R/rc.txt"
}

main 2>&1 | tee "$FINAL/h200-report.log"
