#!/usr/bin/env bash
# Where `--detail ops`' cost goes on CUDA: the wall time and calls of each attribution hook
# (operations registered, each fused block's operations noted, launches, span boundaries, the
# module tree noted) and the window's close, from a binary built with
# scripts/h200/attribution-probe.patch, which prints one `attribution-probe` line to stderr as
# each window closes. Runs the MLP and the ConvNet at batch 256 with `--detail ops`, then
# sums the lines into results/hooks.txt, per window and per recorded step.
#
#   git apply scripts/h200/attribution-probe.patch   # here, in a clean tree
#   cargo build --release -p steptrace-cli            # then strip and xz it as
#   .devbin/steptrace-probe.xz, and undo the patch: git checkout crates/steptrace-burn
#   scripts/h200/run attribution-probe                # on the device machine
#
# With the release CLI beside it (its `shipped-...` conditions), carry both binaries in one
# archive, which shares LLVM's bytes and stays under the device machine's 64 MiB:
#   tar cf - steptrace steptrace-probe | xz -T1 --lzma2=preset=6,dict=400MiB > .devbin/bins.tar.xz
#
# Then the ablation: `bench --profile interleaved` on the MLP (and the ConvNet) with the default
# `--detail steps`, with `--detail ops`, and with `--detail ops` while the probe binary's
# ATTRIBUTION_PROBE_OFF turns single hooks off (clone: a block's start noted without its
# operations; boundary: no span boundary stamped; params: the module tree not noted; launch:
# no launch noted; all four), and with STEPTRACE_ATTRIBUTION=off (no observer installed).
# Each condition's in-process ratio says what the part left on costs; with the release CLI
# carried beside the probe (.devbin, `steptrace`), its `--detail steps` and `--detail ops` too
# (`shipped-...`); results/ablation.txt lists them side by side.
#
# Knobs: BUDGET (default 400), STEPS (80), CACHE, WORK, RUNS (bench processes a condition,
# default 6), ABLATION=0 (skips it), CONVNET_ABLATION=0 (the MLP only).
# Needs .devbin/steptrace-probe.xz. What comes back: $OUT/h200-attribution-probe.tgz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
W=${WORK:-/tmp/st-attribution-probe}
R=$W/results
FINAL=${OUT:-$W/out}
BUDGET=${BUDGET:-400}
STEPS=${STEPS:-80}
CACHE=${CACHE:-/tmp/st-cubecl-cache}
. "$HERE/common.sh"

trap 'st_pack h200-attribution-probe' EXIT
st_start "$W"
mkdir -p "$FINAL"
if [ -z "${STEPTRACE:-}" ]; then B=$W/bin/steptrace-probe; fi
if [ ! -x "$B" ]; then echo "error: $B is missing (.devbin/steptrace-probe.xz)" | tee -a "$R/rc.txt"; exit 1; fi
# Windows of a warmup and three active steps, the first after the startup.
schedule=(--schedule skip_first=20,wait=2,warmup=1,active=3 --steps "$STEPS" --loss-every 0 --detail ops)
CAP=200 st_train mlp --model mlp --dataset digits --batch 256 "${schedule[@]}"
CAP=150 st_train convnet --model convnet --dataset fashion-mnist --batch 256 "${schedule[@]}"
python3 - "$R" << 'PY' | tee "$R/hooks.txt"
import re, statistics, sys
from pathlib import Path
steps_a_window = 4  # warmup + active
for name in ("mlp", "convnet"):
    log = Path(sys.argv[1]) / f"{name}.log"
    if not log.exists():
        print(name, "no log"); continue
    rows = [dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", l))
            for l in log.read_text().splitlines() if l.startswith("attribution-probe ")]
    steady = rows[1:] or rows  # the first window grows its buffers
    print(f"{name}: {len(rows)} windows, {len(steady)} steady; medians per window, and per recorded step")
    for key in sorted(k for k in steady[0] if k.endswith("_ns")):
        med = statistics.median(r[key] for r in steady)
        calls = key[:-3] + "_calls"
        n = statistics.median(r[calls] for r in steady) if calls in steady[0] else None
        per = f", {med / n:.0f} ns a call ({n:.0f} calls)" if n else ""
        # The close runs once, at the boundary after the window's last step.
        step = "" if key == "close_ns" else f"  {med / 1000 / steps_a_window:8.1f} us a step"
        print(f"  {key[:-3]:<16} {med / 1000:9.1f} us a window{step}{per}")
PY

# NAME ENV ARGS...: one paired bench of the probe binary, with ENV (VAR=VALUE words, or "") set.
ablate() {
  local name=$1 vars=$2
  shift 2
  # shellcheck disable=SC2086 # ENV is words on purpose
  st_run_capped "ablation-$name" 120 env STEPTRACE_CACHE_DIR="$CACHE" $vars "$B" bench --backend cuda \
    --profile interleaved --runs "${RUNS:-6}" --json "ablation-$name.json" "$@"
}
if [ "${ABLATION:-1}" = 1 ]; then
  mlp=(--model mlp --batch 256)
  ablate mlp-steps "" "${mlp[@]}"
  ablate mlp-ops "" "${mlp[@]}" --detail ops
  for off in clone boundary params launch clone,boundary,params,launch; do
    ablate "mlp-ops-off-${off//,/-}" "ATTRIBUTION_PROBE_OFF=$off" "${mlp[@]}" --detail ops
  done
  ablate mlp-ops-attribution-off STEPTRACE_ATTRIBUTION=off "${mlp[@]}" --detail ops
  if [ "${CONVNET_ABLATION:-1}" = 1 ]; then
    conv=(--model convnet --dataset fashion-mnist --batch 256)
    ablate convnet-steps "" "${conv[@]}"
    ablate convnet-ops "" "${conv[@]}" --detail ops
    ablate convnet-ops-off-clone ATTRIBUTION_PROBE_OFF=clone "${conv[@]}" --detail ops
    ablate convnet-ops-off-clone-boundary-params-launch ATTRIBUTION_PROBE_OFF=clone,boundary,params,launch \
      "${conv[@]}" --detail ops
  fi
  # The release CLI carried beside the probe (a tree with the attribution changes under test):
  # the same conditions with it, named `shipped-...`.
  if [ -x "$W/bin/steptrace" ] && [ -z "${STEPTRACE:-}" ]; then
    probe=$B
    B=$W/bin/steptrace
    ablate shipped-mlp-steps "" "${mlp[@]}"
    ablate shipped-mlp-ops "" "${mlp[@]}" --detail ops
    if [ "${CONVNET_ABLATION:-1}" = 1 ]; then
      ablate shipped-convnet-steps "" "${conv[@]}"
      ablate shipped-convnet-ops "" "${conv[@]}" --detail ops
    fi
    B=$probe
  fi
  python3 - "$R" << 'PY' | tee "$R/ablation.txt"
import json, statistics, sys
from pathlib import Path
print("condition: each condition's active/wait (median over processes, range), warmup/wait, a cycle")
for f in sorted(Path(sys.argv[1]).glob("ablation-*.json")):
    try:
        d = json.loads(f.read_text())
    except Exception as e:
        print(f.stem, "unreadable:", e); continue
    out = [f"{f.stem[len('ablation-'):]:<44}"]
    for c in d.get("conditions", []):
        a, w = c.get("active_over_wait") or {}, c.get("warmup_over_wait") or {}
        s = a.get("spread") or {}
        cycle = statistics.mean(x.get("over_wait", 0) for x in c.get("slots", [])) if c.get("slots") else float("nan")
        out.append(f"{c.get('condition')}: {a.get('ratio', float('nan')):.4f} ({s.get('min', float('nan')):.4f}-{s.get('max', float('nan')):.4f})"
                   f" warmup {w.get('ratio', float('nan')):.4f} cycle {cycle:.4f}")
    print("  ".join(out))
PY
fi
echo "== done [${SECONDS}s]"
