#!/usr/bin/env bash
# How fast could it be, on the H200: the device's limits measured by `steptrace peaks` (beside
# the datasheet's), the bundled models' kernels priced against them (`--detail ops`, report in
# text and JSON: the priced share, the step around its floor, layers by time above the floor),
# then the priced bytes and FLOPs of kernels checked against Nsight Compute's counters for the
# same kernels (a matmul, a convolution, a fused elementwise block, a reduction, an optimizer
# update), and the recording cost of --detail ops against the default, paired in one process.
#
#   scripts/h200/run roofline
#
# Knobs: BUDGET (seconds, default 560), CACHE, WORK, BATCH (default 256), NCU=0 (skips Nsight
# Compute), NCU_SKIP (launches skipped before ncu profiles, default 3000: past startup),
# NCU_COUNT (kernels profiled, default 120), COST=0 (skips the paired cost), RUNS (bench
# processes for the cost, default 6). Needs .devbin/steptrace (CUDA, release). What comes
# back: $OUT/h200-roofline.tgz; scripts/h200/ncu_compare.py reads it back here.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-roofline}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-560}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
BATCH=${BATCH:-256}
. "$HERE/common.sh"

trap 'st_pack h200-roofline' EXIT
st_start "$W"
mkdir -p "$FINAL"
# The peaks cache lives under the steptrace cache: every run below carries what peaks measured.
export STEPTRACE_CACHE_DIR=$CACHE

st_run_capped peaks 150 "$B" peaks --backend cuda
(cd "$R" && "$B" peaks --backend cuda --json > peaks.json 2> peaks-json.log) || true
cat "$R/peaks.log"

# NAME MODEL DATASET: --detail ops on CUDA, then its report as text and JSON.
priced() {
  local name=$1 model=$2 dataset=$3
  st_train "$name" --model "$model" --dataset "$dataset" --batch "$BATCH" --steps 40 --detail ops
  (cd "$R" && "$B" report "traces/$name" > "report-$name.txt" 2>&1; "$B" report "traces/$name" --json > "report-$name.json" 2>&1) || true
  grep -A30 "How fast could it be" "$R/report-$name.txt" | head -40
}
priced mlp mlp digits
priced convnet convnet fashion-mnist
priced transformer transformer shakespeare

# Nsight Compute on the ConvNet (it has all five kinds): DRAM bytes and FP32 instruction
# counts of the kernels after startup, while steptrace records the same process with CUDA
# events (STEPTRACE_CUPTI=off: ncu and CUPTI's activity API do not share a process), so that each profiled kernel
# has its priced block in the trace beside it.
if [ "${NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
  metrics=dram__bytes_read.sum,dram__bytes_write.sum
  metrics=$metrics,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum
  metrics=$metrics,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__inst_executed_pipe_tensor.sum
  # L2 traffic from the SMs (32-byte sectors): what the kernel moved, wherever it was served from.
  metrics=$metrics,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
  STEPTRACE_CUPTI=off st_run_capped ncu 300 ncu --target-processes all --launch-skip "${NCU_SKIP:-3000}" \
    --launch-count "${NCU_COUNT:-120}" --metrics "$metrics" --csv --page raw --print-units base --log-file ncu.csv \
    "$B" train --backend cuda --cache-dir "$CACHE" --model convnet --dataset fashion-mnist --batch "$BATCH" --steps 80 \
    --schedule skip_first=20,wait=0,warmup=1,active=40,repeat=1 --detail ops --out traces/ncu --json ncu.json
  head -c 2000 "$R/ncu.csv" || true
else
  echo "Nsight Compute skipped (NCU=0 or no ncu on the path)" | tee -a "$R/rc.txt"
fi

# The recording cost of --detail ops against the default, paired inside each process.
if [ "${COST:-1}" = 1 ]; then
  for model in mlp convnet; do
    st_run_capped "cost-$model" 200 "$B" bench --backend cuda --model "$model" --batch "$BATCH" \
      --profile interleaved --runs "${RUNS:-6}" --detail ops --json "cost-$model.json"
  done
fi
