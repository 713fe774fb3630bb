#!/usr/bin/env bash
# The device's memory bandwidth by another route, beside `steptrace peaks`: PyTorch's own
# kernels (fill, copy, neg, sum over 1 GiB of f32, best of 10 timed by CUDA events after 3
# untimed), and Nsight Compute's DRAM counters on the kernels `steptrace peaks` times for its
# write and copy figures (bytes moved, duration, DRAM throughput as a share of the device's
# peak). Says whether a gap to the datasheet is burn's kernels' or the device's.
#
#   scripts/h200/run bandwidth
#
# Knobs: BUDGET (default 240), CACHE, WORK, NCU=0 (skips Nsight Compute).
# Needs .devbin/steptrace (CUDA, release) and torch with CUDA on the machine.
# What comes back: $OUT/h200-bandwidth.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-bandwidth}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-240}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
. "$HERE/common.sh"

trap 'st_pack h200-bandwidth' EXIT
st_start "$W"
mkdir -p "$FINAL"

cat > "$R/torch_bandwidth.py" << 'PY'
import json, torch
n = 1 << 28  # 268,435,456 f32: 1 GiB
x = torch.ones(n, device="cuda")
y = torch.empty(n, device="cuda")
def best(f, moved, runs=10, untimed=3):
    for _ in range(untimed):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1000)
    return {"bytes": moved, "best_s": min(times), "worst_s": max(times),
            "best_tb_s": moved / min(times) / 1e12, "spread": max(times) / min(times) - 1}
out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
       "write (fill_)": best(lambda: y.fill_(1.0), 4 * n),
       "copy (copy_)": best(lambda: y.copy_(x), 8 * n),
       "copy (neg_, in place)": best(lambda: x.neg_(), 8 * n),
       "read (sum)": best(lambda: x.sum(), 4 * n)}
print(json.dumps(out, indent=1))
PY
st_run_capped torch 90 python3 torch_bandwidth.py
(cd "$R" && sed -n '/^{/,$p' torch.log > torch.json) || true

if [ "${NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
  # Every elementwise launch of `peaks` (the write figure's burn `full`, the copy figure's `neg`,
  # the read figure's input), each with its size in the CSV.
  metrics=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
  st_run_capped ncu 150 env STEPTRACE_CACHE_DIR="$W/peaks-cache" ncu --target-processes all \
    --kernel-name regex:'full_kernel|unary_float|elemwise_fuse' --launch-count 40 --metrics "$metrics" \
    --csv --page raw --print-units base --log-file ncu.csv "$B" peaks --backend cuda
  cut -c1-400 "$R/ncu.csv" | head -20
fi
echo "== done [${SECONDS}s]"
