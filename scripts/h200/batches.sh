#!/usr/bin/env bash
# What a recorded step's host spans cost on the H200, paired inside each process, and where it
# goes. The stepping thread's spans and events are records handed to the writer once a step
# (collect/batch.rs, collect/direct.rs); the knobs below switch the experiments that compare
# them with other paths. In one run of under 10 minutes:
# 1. criterion (`overhead` bench, release): a span at a step's density on the stepping thread
#    (`span_paced/inside_window`) beside tracing-chrome alone, and back to back on a thread that
#    is not the stepping one (`span_enter_exit/inside_window`: tracing-chrome's path);
#    the sink's rate on both paths; and, when carried, `span_paced` of an earlier tree; then
#    the `step` bench (a training step's instrumentation, point by point), when carried;
# 2. a short recorded `train` (MLP, host spans only): its traces must read as before (spans per
#    step, no batch announcement left, every file parses);
# 3. `bench --profile interleaved`, MLP at batch 256: host spans only with the null check
#    (`--baseline`), host spans with `--memory`, and the default (CUPTI); then the ConvNet's host
#    spans. RUNS processes a condition (default 6).
#
#   scripts/h200/run batches
#
# Knobs (each part on by default unless its knob says =1): RUNS, BUDGET (default 420), CACHE,
# CRITERION=0, CRITERION_CAP, EVICT=1 (the `step` bench again with 8 MiB written between points),
# HOST=0, HOST_CAP, MEMORY=0, MEMORY_CAP, CUPTI=0, CUPTI_CAP, TORCH=1 (torch.profiler beside it),
# LINGER=1 (STEPTRACE_LINGER off and 5000), OWN=1 (STEPTRACE_OWN_SPANS=tracing), SPANS=1
# (STEPTRACE_SPANS=steps), UNWRITTEN=1 (STEPTRACE_SPANS=unwritten), ANNOUNCED=1
# (STEPTRACE_SPANS=announced), CONVNET=0, CONVNET_CAP, WORK.
# Needs .devbin/steptrace.xz and .devbin/overhead.gz (.devbin/overhead-before.gz, .devbin/step.gz
# and step-before.gz optional). What comes back: $OUT/h200-batches.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
REPO=$PWD
W=${WORK:-/tmp/st-batches}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-420}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
RUNS=${RUNS:-6}
. "$HERE/common.sh"

trap 'st_pack h200-batches' EXIT
st_start "$W"
mkdir -p "$FINAL"

if [ -x "$W/bin/overhead" ] && [ "${CRITERION:-1}" = 1 ]; then
  st_run_capped criterion "${CRITERION_CAP:-60}" "$W/bin/overhead" --bench 'span_paced|span_enter_exit/(inside_window|tracing_chrome_alone)' \
    --noplot --warm-up-time 1 --measurement-time 3
  # The sink's rate, spans emitted on a thread that is not the stepping one (tracing-chrome's
  # path) and on the stepping thread (batches), beside tracing-chrome alone.
  st_run_capped sink-rate 80 "$W/bin/overhead" --bench 'sink/' --noplot
fi
# What a training step's instrumentation costs its thread, point by point, recorded against
# wait (the `step` bench), when carried (.devbin/step.gz).
if [ -x "$W/bin/step" ]; then
  st_run_capped step-bench 60 "$W/bin/step" --bench --noplot --warm-up-time 1 --measurement-time 4
  # With EVICT=1, the same with 8 MiB written between points, as a model's work evicts the
  # caches in situ.
  [ "${EVICT:-0}" = 1 ] && st_run_capped step-bench-evict 60 env STEP_BENCH_EVICT_KB=8192 "$W/bin/step" --bench --noplot --warm-up-time 1 \
    --measurement-time 4
fi
if [ -x "$W/bin/step-before" ]; then
  st_run_capped step-bench-before 40 "$W/bin/step-before" --bench --noplot --warm-up-time 1 --measurement-time 4
fi
# The same criterion groups built from the tree before batches, when carried (.devbin/overhead-before.gz).
if [ -x "$W/bin/overhead-before" ]; then
  st_run_capped criterion-before 40 "$W/bin/overhead-before" --bench 'span_paced' --noplot --warm-up-time 1 \
    --measurement-time 3
fi

# The first CUDA process compiles and autotunes into $CACHE; this short run pays for it.
CAP=200 st_train spans --model mlp --dataset digits --batch 256 --steps 40 --device-activity off \
  --schedule skip_first=20,wait=0,warmup=1,active=3,repeat=1
python3 - "$R/traces/spans" << 'PY' | tee -a "$R/spans.txt"
import glob, json, sys
files = [f for f in glob.glob(sys.argv[1] + "/**/*.json", recursive=True) if "manifest" not in f]
steps = spans = events = 0
own = set()
for f in files:
    text = open(f).read()
    if "steptrace::batch" in text:
        print(f"{f}: an announcement was left")
    d = json.loads(text)
    ev = d["traceEvents"]
    events += len(ev)
    spans += sum(1 for e in ev if e.get("ph") in ("X", "B"))
    steps += sum(1 for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep"))
    own.add(str(d.get("metadata", {}).get("own_spans")))
print(f"files {len(files)} events {events} host spans {spans} steps {steps} spans/step {spans / max(steps, 1):.1f}")
print("own_spans:", sorted(own))
PY

common=(bench --profile interleaved --backend cuda --runs "$RUNS" --cache-dir "$CACHE" --batch 256
  --schedule wait=7,warmup=1,active=2)
[ "${HOST:-1}" = 1 ] && st_run_capped mlp-host "${HOST_CAP:-120}" "$B" "${common[@]}" --model mlp --dataset digits --device-activity off --baseline \
  --json mlp-host.json
[ "${MEMORY:-1}" = 1 ] && st_run_capped mlp-memory "${MEMORY_CAP:-60}" "$B" "${common[@]}" --model mlp --dataset digits --device-activity off --memory \
  --json mlp-memory.json
# One short run whose summary times the memory samples: the allocator query and the training
# thread's share of each step-start sample.
CAP=60 st_train memory-queries --model mlp --dataset digits --batch 256 --steps 80 --device-activity off --memory \
  --schedule skip_first=20,wait=2,warmup=1,active=3
python3 -c 'import json,sys; print("memory:", json.load(open(sys.argv[1]))["memory"])' "$R/memory-queries.json" \
  | tee -a "$R/rc.txt" || true
[ "${CUPTI:-1}" = 1 ] && st_run_capped mlp-cupti "${CUPTI_CAP:-60}" "$B" "${common[@]}" --model mlp --dataset digits --json mlp-cupti.json
# With TORCH=1: torch.profiler's cost on the same MLP in the same run (benches/torch_twin.py,
# the same schedule, one process each).
if [ "${TORCH:-0}" = 1 ]; then
  for p in 1 2 3; do
    st_run_capped "torch-mlp-$p" 60 env PYTHONUNBUFFERED=1 python3 "$REPO/benches/torch_twin.py" --model mlp --batch 256 \
      --runs 1 --warmup 20 --steps 100 --profile interleaved --schedule wait=7,warmup=1,active=2 \
      --activities cpu+cuda --out "torch-mlp-$p.json"
  done
fi
# With LINGER=1: the MLP's host spans with the writer parked between steps (STEPTRACE_LINGER=off)
# and polling every 5 ms instead of 0.5 ms: does the lingering writer's polling cost the step?
if [ "${LINGER:-0}" = 1 ]; then
  for setting in off 5000; do
    st_run_capped "mlp-linger-$setting" 120 env STEPTRACE_LINGER=$setting "$B" "${common[@]}" --model mlp \
      --dataset digits --device-activity off --baseline --json "mlp-linger-$setting.json"
  done
fi
# With OWN=1: the MLP's host spans with steptrace's own spans kept in tracing's registry
# (STEPTRACE_OWN_SPANS=tracing), against the default, which keeps the stepping thread's own
# spans as records around it (collect/direct.rs).
if [ "${OWN:-0}" = 1 ]; then
  st_run_capped mlp-own-tracing 120 env STEPTRACE_OWN_SPANS=tracing "$B" "${common[@]}" --model mlp \
    --dataset digits --device-activity off --baseline --json mlp-own-tracing.json
fi
# With SPANS=1: the MLP with only the ProfilerStep spans made (STEPTRACE_SPANS=steps): what a
# recorded step costs without its spans.
if [ "${SPANS:-0}" = 1 ]; then
  st_run_capped mlp-steps-only 120 env STEPTRACE_SPANS=steps "$B" "${common[@]}" --model mlp \
    --dataset digits --device-activity off --baseline --json mlp-steps-only.json
fi
# With UNWRITTEN=1: the MLP's host spans made and handed over, but the writer writing none of
# the stepping thread's records (STEPTRACE_SPANS=unwritten): what the writer's work beside the
# step costs the step.
if [ "${UNWRITTEN:-0}" = 1 ]; then
  st_run_capped mlp-unwritten 120 env STEPTRACE_SPANS=unwritten "$B" "${common[@]}" --model mlp \
    --dataset digits --device-activity off --baseline --json mlp-unwritten.json
fi
# With ANNOUNCED=1: the MLP's host spans with every batch announced through tracing-chrome, a
# step's too (STEPTRACE_SPANS=announced), as before the profiler's flushes took them: what that
# saves the step.
if [ "${ANNOUNCED:-0}" = 1 ]; then
  st_run_capped mlp-announced "${HOST_CAP:-120}" env STEPTRACE_SPANS=announced "$B" "${common[@]}" --model mlp \
    --dataset digits --device-activity off --baseline --json mlp-announced.json
fi
[ "${CONVNET:-1}" = 1 ] && st_run_capped convnet-host "${CONVNET_CAP:-90}" "$B" "${common[@]}" --model convnet --dataset fashion-mnist --device-activity off \
  --json convnet-host.json
echo "== done [${SECONDS}s]"
cat "$R/rc.txt" 2> /dev/null || true
