#!/usr/bin/env bash
# steptrace train on the lent H200: CUDA cold and warm cache, wgpu (Vulkan),
# the three models. Runs in the repository root on the device machine, with
# the binary carried as .bin/steptrace.xz and the Vulkan loader debs in .gl/.
# Writes results.tgz (summaries, logs, traces) and table.md under $OUT.
set -u
OUT=${OUT:-/tmp/steptrace-out}
mkdir -p "$OUT" work
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
xz -dc .bin/steptrace.xz > work/steptrace && chmod +x work/steptrace
B=work/steptrace
CACHE=/tmp/steptrace-cubecl-cache
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -a; nproc; } > work/machine.txt 2>&1
$B backends > work/backends.txt 2>&1

run() {
  local name=$1 limit=$2; shift 2
  local start=$(date +%s.%N)
  timeout "$limit" $B train --quiet --json "work/$name.json" --out "work/traces-$name" --cache-dir "$CACHE" "$@" > "work/$name.log" 2>&1
  rc=$?; echo "$name rc=$rc wall=$(python3 -c "import time; print(round(time.time() - $start, 1))")s" | tee -a work/runs.txt
}
S="wait=5,warmup=2,active=5,repeat=2"
run cuda-mlp-cold      240 --backend cuda --model mlp --dataset digits --batch 256 --steps 60 --schedule "$S"
run cuda-mlp-warm      240 --backend cuda --model mlp --dataset digits --batch 256 --steps 60 --schedule "$S"
run wgpu-mlp-1         240 --backend wgpu --model mlp --dataset digits --batch 256 --steps 60 --schedule "$S"
run wgpu-mlp-2         240 --backend wgpu --model mlp --dataset digits --batch 256 --steps 60 --schedule "$S"
run cuda-mlp-internals 120 --backend cuda --model mlp --dataset digits --batch 256 --steps 20 --schedule "wait=5,warmup=2,active=5,repeat=1" --detail internals --memory
run cuda-convnet-cold  240 --backend cuda --model convnet --dataset digits --batch 256 --steps 60 --schedule "$S"
run cuda-transformer-cold 300 --backend cuda --model transformer --dataset shakespeare --batch 64 --seq-len 64 --steps 60 --schedule "$S"

python3 benches/summarize.py work > "$OUT/table.md" 2>&1
cp work/runs.txt work/backends.txt work/machine.txt "$OUT/" 2>/dev/null
tar czf "$OUT/results.tgz" work/*.json work/*.log work/*.txt work/traces-* 2>/dev/null
ls -la "$OUT"
