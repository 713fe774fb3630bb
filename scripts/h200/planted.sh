#!/usr/bin/env bash
# Planted cases on the H200 (a slow layer, a repeated upload, NVTX, memory, a failure), in one
# run of under 10 minutes:
#
#   scripts/h200/run planted [all|second|memory]
#
# `all` (the default):
# 1. A planted slow layer: the MLP with hidden widths 128,4096,4096,128 (`--hidden`), so that
#    `hidden2` (4096 x 4096 weights) does 32 times the matmul work of any other layer;
#    `--detail ops`, batch 256. The report must name hidden2's matmuls as the top op and layer.
# 2. The planted upload (`--plant-upload`, a 4000-byte constant made in `loss` each step) with
#    `--detail ops`: the repeated-upload rule must name `loss` from the CUPTI copies.
# 3. NVTX (the binary is built with the CLI's `nvtx` feature): whether Nsight Systems (`nsys`)
#    is on the machine; if so, a short MLP run under `nsys profile -t cuda,nvtx` and its NVTX
#    summary; in any case the same run with the stand-in injection library
#    (tests/nvtx/inject.c, carried as .devbin/libinject.so.gz) logging every range.
# 4. Memory: the MLP and the ConvNet at batch 256 with `--memory` (by category; the binary of
#    2026-12-02 this first ran sampled after each phase, as `--memory-phases` does now), the MLP again
#    at batch 512; then a planted out-of-memory: the ConvNet on 512 x 512 synthetic images at
#    batch 8192 (conv1's output alone is 137 GB), to see how it surfaces.
#
# `second`: the planted slow layer again (backward ops named through the views made during
# backward), `bench --profile interleaved` of the MLP at batch 256 with and without `--memory`
# (3 processes each: what the samples cost, paired in one process), and two planted failures:
# the ConvNet case that exceeds a launch limit, and an MLP whose hidden layers (80000 wide) and
# batch (65536) exceed the device's memory.
#
# `memory`: what --memory costs at the step's end only, against --memory-phases and nothing,
# paired in one process (MLP at batch 256, 4 processes each), and the ConvNet's categories.
#
# Knobs: BUDGET (default 560), CACHE, CAP. The release binary is carried as
# .devbin/steptrace.xz (the H200 has no Rust). Results land in $OUT/h200-planted.tgz and the
# console log in $OUT/h200-planted.log.
set -euo pipefail
MODE=${1:-all}
FINAL=${OUT:?OUT must name the output folder}
W=/tmp/st-h200-planted
R=$W/results
BUDGET=${BUDGET:-560}
CACHE=${CACHE:-/tmp/cubecl-planted}
. "$(dirname "$0")/common.sh"

pack() { st_pack h200-planted; }
train() { st_train "$@"; }

second() {
  train mlp-planted --model mlp --dataset digits --hidden 128,4096,4096,128 --batch 256 --steps 40 \
    --loss-every 0 --detail ops
  local m
  for m in memory plain; do
    st_run_capped "bench-mlp-$m" 150 "$B" bench --profile interleaved --backend cuda --runs 3 --cache-dir "$CACHE" \
      --trace-dir "traces/bench-$m" --json "bench-mlp-$m.json" --model mlp --dataset digits --batch 256 --baseline \
      $([ "$m" = memory ] && echo --memory)
  done
  CAP=120 train oom-convnet --model convnet --dataset synthetic --synthetic-shape 1,512,512 --synthetic-samples 8192 \
    --batch 8192 --steps 12 --schedule skip_first=0,wait=0,warmup=1,active=3 --loss-every 0 --memory
  CAP=150 train oom-mlp --model mlp --dataset digits --hidden 80000,80000 --batch 65536 --steps 6 \
    --schedule skip_first=0,wait=0,warmup=1,active=3 --loss-every 0 --memory
  rm -rf "$R"/traces/bench-*
  echo "== done [${SECONDS}s]"
  cat "$R/rc.txt" 2>/dev/null || true
}

# `memory`: what --memory costs at the step's end only, against --memory-phases and nothing,
# paired in one process (MLP at batch 256, 4 processes each), and the ConvNet's categories.
memory_cost() {
  local m
  for m in end phases plain; do
    st_run_capped "bench-mlp-$m" 150 "$B" bench --profile interleaved --backend cuda --runs 4 --cache-dir "$CACHE" \
      --trace-dir "traces/bench-$m" --json "bench-mlp-$m.json" --model mlp --dataset digits --batch 256 --baseline \
      $(case $m in end) echo --memory ;; phases) echo --memory --memory-phases ;; esac)
  done
  train mem-convnet-256 --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0 --memory
  train mem-convnet-phases --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0 --memory \
    --memory-phases
  rm -rf "$R"/traces/bench-*
  echo "== done [${SECONDS}s]"
  cat "$R/rc.txt" 2>/dev/null || true
}

main() {
  trap pack EXIT
  st_start "$R"
  if [ "${MODE:-all}" = memory ]; then memory_cost; return 0; fi
  if [ "${MODE:-all}" = second ]; then second; return 0; fi
  {
    command -v nsys ncu || true
    ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null || true
    ls /usr/local/cuda*/targets/x86_64-linux/lib/ | grep -i nvToolsExt || echo "no libnvToolsExt"
  } > "$R/nsight.txt" 2>&1
  cat "$R/nsight.txt"
  train mlp-planted --model mlp --dataset digits --hidden 128,4096,4096,128 --batch 256 --steps 40 \
    --loss-every 0 --detail ops
  train mlp-upload --model mlp --dataset digits --plant-upload --batch 256 --steps 40 --loss-every 0 --detail ops
  if [ -e .devbin/libinject.so.gz ]; then
    gzip -dc .devbin/libinject.so.gz > "$W/bin/libinject.so"
    NVTX_INJECTION64_PATH=$W/bin/libinject.so STEPTRACE_NVTX_LOG=$R/nvtx-inject.log \
      train mlp-nvtx-inject --model mlp --dataset digits --batch 256 --steps 20 --loss-every 0
  fi
  train mem-mlp-256 --model mlp --dataset digits --batch 256 --steps 40 --loss-every 0 --memory
  train mem-mlp-512 --model mlp --dataset digits --batch 512 --steps 40 --loss-every 0 --memory
  train mem-convnet-256 --model convnet --dataset fashion-mnist --batch 256 --steps 40 --loss-every 0 --memory
  CAP=120 train oom-convnet --model convnet --dataset synthetic --synthetic-shape 1,512,512 --synthetic-samples 8192 \
    --batch 8192 --steps 12 --schedule skip_first=0,wait=0,warmup=1,active=3 --loss-every 0 --memory
  local nsys
  nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -n 1 || true)
  if [ -n "$nsys" ]; then
    st_run_capped nsys-profile 150 "$nsys" profile -t cuda,nvtx -o "$R/nsys-mlp" --force-overwrite true \
      "$B" train --backend cuda --cache-dir "$CACHE" --out traces/nsys --model mlp --batch 256 --steps 20 --loss-every 0
    st_run_capped nsys-stats 60 "$nsys" stats -r nvtx_sum -f csv -o "$R/nsys-nvtx" "$R/nsys-mlp.nsys-rep"
    rm -f "$R"/nsys-mlp.sqlite
  fi
  echo "== done [${SECONDS}s]"
  cat "$R/rc.txt" 2>/dev/null || true
}

main 2>&1 | tee "$FINAL/h200-planted.log"
