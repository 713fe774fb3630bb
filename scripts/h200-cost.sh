#!/usr/bin/env bash
# Issue 26 on the H200: both sides of every overhead figure in one call of under 10 minutes.
#
#   bash scripts/h200-cost.sh
#
# For the MLP (digits) and the ConvNet (fashion-mnist) at batch 256, back to back on one
# machine in one hour:
# 1. steptrace: `bench --profile interleaved` (3 processes with device activity, 3 with host
#    spans only, and 3 with no profiler: the null check), schedule wait=7,warmup=1,active=2.
# 2. torch.profiler: `benches/torch_twin.py --profile interleaved`, the same schedule, 3
#    processes (one run each, so that each process is its own control as steptrace's are),
#    with CPU and CUDA activities, then with CPU only.
# 3. An on-demand run: `train --schedule on-demand` asked for one capture by `steptrace capture`,
#    to see how many steps after the request the recording starts on CUDA.
#
# Needs the release binary in .devbin/steptrace.xz. What comes back: $OUT/h200-cost.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
W=${WORK:-/tmp/st-cost}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-560}
CACHE=$W/cache
. "$(dirname "$0")/h200-common.sh"

trap 'st_pack h200-cost' EXIT
st_start "$W"
mkdir -p "$FINAL"

for model in mlp convnet; do
  data=digits; [ "$model" = convnet ] && data=fashion-mnist
  st_run_capped "bench-$model" 150 "$B" bench --profile interleaved --backend cuda --runs 3 --cache-dir "$CACHE" \
    --trace-dir "traces/bench-$model" --json "bench-$model.json" --model "$model" --dataset "$data" --batch 256 \
    --baseline --schedule wait=7,warmup=1,active=2
  for acts in cpu+cuda cpu; do
    for p in 1 2 3; do
      st_run_capped "torch-$model-$acts-$p" 60 env PYTHONUNBUFFERED=1 python3 "$REPO/benches/torch_twin.py" \
        --model "$model" --batch 256 --runs 1 --warmup 20 --steps 100 --profile interleaved \
        --schedule wait=7,warmup=1,active=2 --activities "$acts" --out "torch-$model-$acts-$p.json"
    done
  done
  rm -rf "$R/traces/bench-$model"
done

# On demand: a long run, one capture of 3 steps asked for after its start.
(cd "$R" && timeout 120 "$B" train --backend cuda --cache-dir "$CACHE" --model mlp --dataset digits --batch 256 \
  --steps 100000 --schedule on-demand --out traces/on-demand --json on-demand.json > on-demand.log 2>&1) &
run=$!
sleep 40
# The run's pid, from the ready file it writes in its trace directory.
ready=$(ls "$R"/traces/on-demand/.steptrace-capture/*.ready.json 2> /dev/null | head -n 1)
pid=$(basename "$ready"); pid=${pid%%.*}
if [ -n "$pid" ]; then
  st_run_capped capture 60 "$B" capture "$pid" --steps 3 --out traces/on-demand --json
  kill -TERM "$pid" 2> /dev/null
fi
wait "$run"
echo "== done [${SECONDS}s]"
cat "$R/rc.txt" 2>/dev/null || true
