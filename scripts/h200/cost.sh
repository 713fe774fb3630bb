#!/usr/bin/env bash
# Both sides of every overhead figure on the H200 (steptrace and torch.profiler, the same hour),
# in one run of under 10 minutes:
#
#   scripts/h200/run cost
#
# For the MLP (digits) and the ConvNet (fashion-mnist) at batch 256, back to back on one
# machine:
# 1. steptrace: `bench --profile interleaved` (3 processes with device activity, 3 with host
#    spans only, and 3 with no profiler: the null check), schedule wait=7,warmup=1,active=2.
# 2. torch.profiler: `benches/torch_twin.py --profile interleaved`, the same schedule, 3
#    processes (one run each, so that each process is its own control as steptrace's are),
#    with CPU and CUDA activities, then with CPU only.
# 3. An on-demand run: `train --schedule on-demand` asked for one capture by `steptrace capture`,
#    to see how many steps after the request the recording starts on CUDA.
#
# 4. With EXPERIMENTS=1 (where a launch-bound step's host-span cost goes), for the MLP: host
#    spans only at `--detail internals` (burn's and cubecl's spans too: many more spans a step,
#    so the slope against `--detail steps` is what one span costs inside a real step), and host
#    spans only with the process held to two cores (`taskset -c 0,1`: does the writer thread
#    compete with cubecl's launching thread for a core?). Spans per step are counted from a
#    short recorded `train` at each detail level. Then host spans with jemalloc preloaded (does
#    glibc's allocator, with tracing-chrome's writer thread freeing what the training thread
#    allocated, make spans dearer?). And a cycle of four warmup steps: the first enables CUPTI,
#    the next three show what it costs a step to keep it enabled outside the window.
#
# 5. With MEMORY_COST=1: the MLP's paired bench with `--memory`, host spans only, and a short
#    run whose summary times each allocator query.
#
# 6. With SINK=1: the sink's rate and a long window's peak memory on this CPU.
#
# 7. With VERIFY=1 (first, before anything else): the CUPTI smoke example (.devbin/smoke.gz), whose
#    windows with the kinds kept on between them must count what a per-cycle window counts, launches
#    included; then a default `train` (CUPTI kept on between windows 7 steps apart) whose traces must
#    carry launch records (`cuda_driver` > 0) in every window, the first and the kept ones.
#
# 8. With POLICY=1: the default CUPTI policy (kept on between windows up to 32 steps apart) against
#    host spans only, for the MLP and the ConvNet.
#
# MODELS (default "mlp convnet"), RUNS (steptrace's processes a condition, default 3), BASELINE (default 1: the no-profiler processes too),
# TORCH_ACTIVITIES (default "cpu+cuda cpu") and ON_DEMAND (default 1) choose the parts, so that
# the work can be split over runs of under 10 minutes. BUDGET (default 560), WORK. The cubecl
# cache is $CACHE (default /tmp/st-cubecl-cache, outside $W), so that a later run on the same
# machine starts warm.
#
# Needs the release binary in .devbin/steptrace.xz. What comes back: $OUT/h200-cost.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
REPO=$(pwd)
W=${WORK:-/tmp/st-cost}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-560}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
MODELS=${MODELS-mlp convnet}
. "$HERE/common.sh"

trap 'st_pack h200-cost' EXIT
st_start "$W"
mkdir -p "$FINAL"

# DIR LABEL: one line per trace under DIR: its device activity's source, what it wrote, its
# problems, its kernel and launch events, the collector's costs, and what it discarded or lost.
device_activity_lines() {
  python3 - "$1" "$2" << 'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/**/*.json", recursive=True)):
    if "manifest" in f:
        continue
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f"{f}: unreadable ({e})"); continue
    a = d.get("metadata", {}).get("device_activity") or {}
    ev = d["traceEvents"]
    kernels = sum(1 for e in ev if e.get("cat") == "kernel")
    launches = sum(1 for e in ev if e.get("cat") == "cuda_driver")
    print(sys.argv[2], f.rsplit("/", 1)[-1], "source:", a.get("source"), "| written:", json.dumps(a.get("written")),
          "| problems:", a.get("problems"), "| kernels", kernels, "cuda_driver", launches,
          "| collector_us", json.dumps(a.get("collector_us")), "| outside", a.get("outside_window"),
          "dropped", a.get("dropped_by_collector"))
PY
}

# Events per recorded step in the traces under DIR (complete and begin events, counters aside).
spans_per_step() {
  python3 - "$1" << 'PY'
import glob, json, sys
files = [f for f in glob.glob(sys.argv[1] + "/**/*.json", recursive=True) if "manifest" not in f]
steps = spans = 0
for f in files:
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f"{f}: unreadable ({e})"); continue
    ev = d["traceEvents"] if isinstance(d, dict) else d
    m = d.get("metadata", {}).get("manifest", {}) if isinstance(d, dict) else {}
    spans += sum(1 for e in ev if e.get("ph") in ("X", "B") and "stream" not in e.get("args", {}))
    steps += sum(1 for e in ev if e.get("ph") in ("X", "B") and str(e.get("name", "")).startswith("ProfilerStep"))
print(f"files {len(files)} host spans {spans} steps {steps} spans/step {spans / max(steps, 1):.1f}")
PY
}

if [ "${VERIFY:-0}" = 1 ]; then
  if [ -x "$W/bin/smoke" ]; then
    st_run_capped cupti-smoke 60 "$W/bin/smoke"
  fi
  CAP=200 st_train verify-default --model mlp --dataset digits --batch 256 --steps 60 \
    --schedule skip_first=10,wait=7,warmup=1,active=2
  device_activity_lines "$R/traces/verify-default" default | tee -a "$R/verify.txt"
fi

for model in $MODELS; do
  data=digits; [ "$model" = convnet ] && data=fashion-mnist
  st_run_capped "bench-$model" 240 "$B" bench --profile interleaved --backend cuda --runs "${RUNS:-3}" --cache-dir "$CACHE" \
    --trace-dir "traces/bench-$model" --json "bench-$model.json" --model "$model" --dataset "$data" --batch 256 \
    $([ "${BASELINE:-1}" = 1 ] && echo --baseline) --schedule wait=7,warmup=1,active=2
  for acts in ${TORCH_ACTIVITIES:-cpu+cuda cpu}; do
    for p in 1 2 3; do
      st_run_capped "torch-$model-$acts-$p" 60 env PYTHONUNBUFFERED=1 python3 "$REPO/benches/torch_twin.py" \
        --model "$model" --batch 256 --runs 1 --warmup 20 --steps 100 --profile interleaved \
        --schedule wait=7,warmup=1,active=2 --activities "$acts" --out "torch-$model-$acts-$p.json"
    done
  done
  rm -rf "$R/traces/bench-$model"
done

if [ "${MEMORY_COST:-0}" = 1 ]; then
  # --memory's cost: host spans plus one allocator query at each recorded step's end, against the
  # host-spans-only runs of the MLP above; then one run whose summary times each query.
  st_run_capped bench-mlp-memory 150 "$B" bench --profile interleaved --backend cuda --runs 3 --cache-dir "$CACHE" \
    --model mlp --dataset digits --batch 256 --device-activity off --memory --json bench-mlp-memory.json \
    --schedule wait=7,warmup=1,active=2
  CAP=60 st_train memory-queries --model mlp --dataset digits --batch 256 --steps 80 --device-activity off --memory \
    --schedule skip_first=20,wait=2,warmup=1,active=3
  python3 -c 'import json,sys; print("memory:", json.load(open(sys.argv[1]))["memory"])' "$R/memory-queries.json" \
    | tee -a "$R/rc.txt" || true
fi

if [ "${POLICY:-0}" = 1 ]; then
  # The default policy: CUPTI kept enabled between windows up to 32 steps apart (here 7), against
  # host spans only, the MLP and the ConvNet; and one short traced run to read the collector's
  # costs per window.
  for model in mlp convnet; do
    data=digits; [ "$model" = convnet ] && data=fashion-mnist
    st_run_capped "policy-$model" 90 "$B" bench --profile interleaved --backend cuda --runs 3 --cache-dir "$CACHE" \
      --model "$model" --dataset "$data" --batch 256 --schedule wait=7,warmup=1,active=2 --json "policy-$model.json"
  done
fi

if [ "${EXPERIMENTS:-0}" = 1 ]; then
  common=(bench --profile interleaved --backend cuda --runs 3 --cache-dir "$CACHE" --model mlp --dataset digits
    --batch 256 --device-activity off --schedule wait=7,warmup=1,active=2)
  [ -n "$MODELS" ] || st_run_capped exp-steps 150 "$B" "${common[@]}" --json exp-steps.json
  st_run_capped exp-internals 90 "$B" "${common[@]}" --detail internals --json exp-internals.json
  # What CUPTI costs a step while enabled outside a window. Warmup steps run with the
  # collector open and nothing kept, so with four of them the first is the enabling and the
  # other three are what keeping CUPTI enabled across cycles would cost every step (auto, then
  # off for the same spans without CUPTI). Every step's phase is in the --json. Then the same
  # with the kinds kept enabled between cycles (STEPTRACE_CUPTI=keep): the warmup's first step
  # no longer enables anything, and every wait step after the first cycle pays CUPTI's
  # per-launch cost instead.
  st_run_capped exp-long-warmup 120 "$B" bench --profile interleaved --backend cuda --runs 3 --cache-dir "$CACHE" \
    --model mlp --dataset digits --batch 256 --schedule wait=4,warmup=4,active=2 --json exp-long-warmup.json
  st_run_capped exp-keep 120 env STEPTRACE_CUPTI=keep "$B" bench --profile interleaved --backend cuda --runs 3 \
    --cache-dir "$CACHE" --model mlp --dataset digits --batch 256 --schedule wait=7,warmup=1,active=2 \
    --json exp-keep.json
  # What opening and closing CUPTI's window takes on the training thread, by part, from the
  # traces' device_activity.collector_us: per cycle, and kept enabled.
  for mode in cycle keep; do
    if [ $mode = keep ]; then export STEPTRACE_CUPTI=keep; fi
    CAP=60 st_train "cupti-$mode" --model mlp --dataset digits --batch 256 --steps 60 \
      --schedule skip_first=10,wait=7,warmup=1,active=2
    unset STEPTRACE_CUPTI
    device_activity_lines "$R/traces/cupti-$mode" "$mode" | tee -a "$R/collector.txt"
  done
  # bench keeps no traces: one short recorded run per detail level, to count its spans.
  for d in steps internals; do
    CAP=60 st_train "spans-$d" --model mlp --dataset digits --batch 256 --steps 30 --device-activity off \
      --detail "$d" --schedule skip_first=20,wait=0,warmup=1,active=3,repeat=1
    echo "detail $d: $(spans_per_step "$R/traces/spans-$d")" | tee -a "$R/spans.txt"
  done
  rm -rf "$R"/traces/spans-*
  st_run_capped exp-two-cores 90 taskset -c 0,1 "$B" "${common[@]}" --json exp-two-cores.json
  # Does glibc's allocator make spans dearer inside a real step? tracing-chrome allocates two
  # Strings a span on the emitting thread, and its writer thread frees them while the next step
  # runs: the same host spans with jemalloc preloaded (carried in .devbin).
  if [ -e "$W/bin/libjemalloc.so.2" ]; then
    st_run_capped exp-jemalloc 90 env LD_PRELOAD="$W/bin/libjemalloc.so.2" "$B" "${common[@]}" --json exp-jemalloc.json
  fi
fi

if [ "${SINK:-0}" = 1 ]; then
  # On the H200's CPU: the sink's end-to-end rate (criterion, profile bench) and a
  # 100,000-step window's peak memory (the long_window example, release), carried as
  # .devbin/overhead.gz and .devbin/long_window.gz.
  if [ -x "$W/bin/overhead" ]; then
    st_run_capped sink-rate 90 "$W/bin/overhead" --bench 'sink/' --noplot
  fi
  if [ -x "$W/bin/long_window" ]; then
    for i in 1 2 3; do st_run_capped "long-window-$i" 40 "$W/bin/long_window" 100000; done
  fi
fi

[ "${ON_DEMAND:-1}" = 1 ] || { echo "== done [${SECONDS}s]"; cat "$R/rc.txt"; exit 0; }

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
