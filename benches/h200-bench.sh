#!/usr/bin/env bash
# steptrace bench on the lent H200, with the PyTorch twin in the same call:
# the profiler's overhead (--profile off|wait|active) on the MLP and the
# ConvNet, and burn against PyTorch eager for the same workloads.
# Runs in the repository root on the device machine, with the binary carried
# as .bin/steptrace.xz. Writes everything as one archive, $OUT/h200-bench.tgz
# (the device returns a limited number of files).
set -u
FINAL=${OUT:-/tmp/steptrace-out}
OUT=work/out
mkdir -p "$FINAL" "$OUT"
xz -dc .bin/steptrace.xz > work/steptrace && chmod +x work/steptrace
B=work/steptrace
# A fresh cache directory: the first train per model is a cold start.
CACHE=/tmp/steptrace-cubecl-cache-$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -a; nproc;
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } > "$OUT/machine.txt" 2>&1

stamp() { echo "$(date +%T) $*" | tee -a "$OUT/runs.txt"; }
MLP=(--model mlp --dataset digits --batch 256)
CONV=(--model convnet --dataset fashion-mnist --batch 256)

# Cold caches first: compilation and autotune, timed by the summary.
for name in mlp conv; do
  if [ $name = mlp ]; then W=("${MLP[@]}"); else W=("${CONV[@]}"); fi
  stamp "cold $name"
  timeout 200 $B train --backend cuda "${W[@]}" --steps 3 --no-profile --quiet --cache-dir "$CACHE" \
    --json "$OUT/cold-$name.json" > "$OUT/cold-$name.log" 2>&1
done

P=(--warmup 20 --steps 100 --runs 5 --backend cuda --cache-dir "$CACHE")
for name in mlp conv; do
  if [ $name = mlp ]; then W=("${MLP[@]}"); else W=("${CONV[@]}"); fi
  for mode in off wait active; do
    stamp "steptrace bench $name $mode"
    timeout 150 $B bench "${W[@]}" "${P[@]}" --profile $mode --trace-dir work/traces \
      --json "$OUT/bench-$name-$mode.json" > "$OUT/bench-$name-$mode.log" 2>&1
  done
  # Same order again for off, to see the drift between the first and last.
  stamp "steptrace bench $name off (again)"
  timeout 150 $B bench "${W[@]}" "${P[@]}" --profile off --json "$OUT/bench-$name-off2.json" > "$OUT/bench-$name-off2.log" 2>&1
done

for model in mlp convnet; do
  for mode in off active; do
    stamp "torch $model $mode"
    timeout 150 python3 benches/torch_twin.py --model $model --batch 256 --warmup 20 --steps 100 --runs 5 \
      --profile $mode --out "$OUT/torch-$model-$mode.json" > "$OUT/torch-$model-$mode.log" 2>&1
  done
done
stamp done
$B compare "$OUT/bench-mlp-off.json" "$OUT/bench-mlp-wait.json" --vary profile > "$OUT/compare-mlp-wait.txt" 2>&1
$B compare "$OUT/bench-mlp-off.json" "$OUT/bench-mlp-active.json" --vary profile > "$OUT/compare-mlp-active.txt" 2>&1
$B compare "$OUT/bench-conv-off.json" "$OUT/bench-conv-wait.json" --vary profile > "$OUT/compare-conv-wait.txt" 2>&1
$B compare "$OUT/bench-conv-off.json" "$OUT/bench-conv-active.json" --vary profile > "$OUT/compare-conv-active.txt" 2>&1
$B compare "$OUT/bench-mlp-off.json" "$OUT/bench-mlp-off2.json" > "$OUT/compare-mlp-off-off2.txt" 2>&1
$B compare "$OUT/bench-conv-off.json" "$OUT/bench-conv-off2.json" > "$OUT/compare-conv-off-off2.txt" 2>&1
tar czf "$FINAL/h200-bench.tgz" -C work out
cat "$OUT/runs.txt"; ls -la "$FINAL"
