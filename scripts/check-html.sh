#!/usr/bin/env bash
# Check that a `steptrace report --html` page is self-contained and renders:
# opened from file:// in headless Chromium with the network cut off, it must
# load nothing, show its SVG charts, and not be blank.
#
#   scripts/check-html.sh PAGE.html [--screenshot OUT.png] [--min-svg N]
#                         [--timeout SECONDS] [--no-install]
#   scripts/check-html.sh --self-test      # a good page passes, bad ones fail
#
# Exit status: 0 pass, 1 the check failed, 2 usage or setup error.
#
# Layers, each on its own:
# - static: the file is UTF-8 HTML with a Content-Security-Policy that allows
#   no script or remote load; no <script>, <link>, <iframe>, <object>,
#   <embed>, <base>, <meta http-equiv=refresh>; no src/href/srcset/action/...
#   attribute other than an in-page "#anchor"; no url(...), @import or
#   @font-face in any style.
# - dom: the same attribute rules on the DOM Chromium rendered (--dump-dom),
#   plus at least --min-svg <svg> charts (default 1) that hold drawn shapes,
#   and the report's sections (run, steps, device, spans, hypotheses,
#   viewers) when the page is a steptrace report.
# - net: Chromium runs with every host mapped to NOTFOUND and a dead proxy,
#   and writes a NetLog; any request the page itself started (its network
#   isolation key is file://) to anything but file:, data:, about: fails the
#   check. Chromium's own background requests (update checks, ...) are listed
#   and ignored; they fail to resolve anyway.
# - pixels: a 1200 px wide screenshot of the whole page must not be blank:
#   enough rows must differ from the row above or hold more than one colour
#   (read from the PNG's filtered scanlines with python3's zlib, no imaging
#   library). The screenshot is cut below the last drawn row.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
PYTHON="${PYTHON:-python3}"
# Which layers run (the self-test turns some off to prove the others).
LAYERS="${CHECK_HTML_LAYERS:-static,dom,net,pixels}"

say() { echo "check-html: $*"; }
die() { echo "check-html: error: $*" >&2; exit 2; }
usage() { sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }

# ------------------------------------------------------------------ self-test
if [[ "${1:-}" == "--self-test" ]]; then
  OUTDIR="$REPO_ROOT/target/check-html/self-test"
  rm -rf "$OUTDIR"; mkdir -p "$OUTDIR"
  csp='<meta http-equiv="Content-Security-Policy" content="default-src '"'none'"'; style-src '"'unsafe-inline'"'">'
  svg='<svg width="400" height="200" viewBox="0 0 400 200"><rect x="10" y="10" width="300" height="150" fill="#2f6fdb"/><text x="20" y="190">bars</text></svg>'
  printf '<!DOCTYPE html><html><head><meta charset="utf-8">%s<title>t</title></head><body><h1>ok</h1><a href="#x">x</a>%s<p id="x">%s</p></body></html>\n' \
    "$csp" "$svg" "$(printf 'text %.0s' {1..200})" >"$OUTDIR/good.html"
  printf '<!DOCTYPE html><html><head><meta charset="utf-8">%s</head><body><h1>remote</h1>%s<img src="http://example.com/x.png"><link rel="stylesheet" href="https://example.org/a.css"></body></html>\n' \
    "$csp" "$svg" >"$OUTDIR/remote.html"
  printf '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><h1>no policy</h1>%s<img src="http://example.com/x.png"></body></html>\n' \
    "$svg" >"$OUTDIR/no-csp.html"
  printf '<!DOCTYPE html><html><head><meta charset="utf-8">%s</head><body><p>no chart here</p></body></html>\n' "$csp" >"$OUTDIR/no-svg.html"
  printf '<!DOCTYPE html><html><head><meta charset="utf-8">%s<style>body{background:#fff}</style></head><body>%s</body></html>\n' \
    "$csp" '<svg width="10" height="10"><rect width="1" height="1" fill="#fff"/></svg>' >"$OUTDIR/blank.html"
  passed=0; failed=0
  # case NAME WANT_RC PATTERN LAYERS FILE
  case_() {
    local name="$1" want="$2" pattern="$3" layers="$4" file="$5" rc=0
    CHECK_HTML_LAYERS="$layers" "${BASH_SOURCE[0]}" "$file" --screenshot "$OUTDIR/$name.png" >"$OUTDIR/$name.log" 2>&1 || rc=$?
    if [[ $rc -eq $want ]] && grep -qE -- "$pattern" "$OUTDIR/$name.log"; then
      passed=$((passed + 1)); echo "ok   $name (exit $rc)"
    else
      failed=$((failed + 1)); echo "FAIL $name: exit $rc (wanted $want), or no line matching /$pattern/; log:"
      sed 's/^/     /' "$OUTDIR/$name.log"
    fi
  }
  case_ good          0 'OK: .*good.html'                         static,dom,net,pixels "$OUTDIR/good.html"
  case_ remote-static 1 'static: .*src="http://example.com'       static,dom,net,pixels "$OUTDIR/remote.html"
  case_ remote-dom    1 'dom: .*src="http://example.com'          dom,net,pixels        "$OUTDIR/remote.html"
  case_ remote-net    1 'net: the page requested http://example.com/x.png' net        "$OUTDIR/no-csp.html"
  case_ no-csp        1 'static: no Content-Security-Policy'      static                "$OUTDIR/no-csp.html"
  case_ no-svg        1 'dom: 0 <svg> chart'                      dom                   "$OUTDIR/no-svg.html"
  case_ blank         1 'pixels: the screenshot is blank'         pixels                "$OUTDIR/blank.html"
  echo "check-html self-test: logs and screenshots in $OUTDIR"
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]; exit $?
fi

# ------------------------------------------------------------------ arguments
PAGE=""
SCREENSHOT=""
MIN_SVG=1
TIMEOUT=60
INSTALL=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage ;;
    --screenshot) [[ $# -ge 2 ]] || die "--screenshot needs a path"; SCREENSHOT="$2"; shift 2 ;;
    --min-svg) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || die "--min-svg needs a number"; MIN_SVG="$2"; shift 2 ;;
    --timeout) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || die "--timeout needs a number of seconds"; TIMEOUT="$2"; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --*) die "unknown option $1 (try --help)" ;;
    *) [[ -z "$PAGE" ]] || die "only one page, got '$PAGE' and '$1'"; PAGE="$1"; shift ;;
  esac
done
[[ -n "$PAGE" ]] || usage
[[ -f "$PAGE" ]] || die "no such file: $PAGE"
PAGE="$(cd "$(dirname "$PAGE")" && pwd)/$(basename "$PAGE")"
if [[ -z "$SCREENSHOT" ]]; then
  SCREENSHOT="$REPO_ROOT/target/check-html/$(basename "$PAGE" .html).png"
fi
mkdir -p "$(dirname "$SCREENSHOT")" || die "cannot create the folder of $SCREENSHOT"
command -v "$PYTHON" >/dev/null || die "$PYTHON is missing"

# ------------------------------------------------------------------ chromium
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi; }
if [[ ! -x "$CHROMIUM" ]]; then
  CHROMIUM="$(command -v chromium || true)"
  if [[ ! -x "$CHROMIUM" ]]; then
    [[ $INSTALL -eq 1 ]] || die "chromium is missing (apt-get install chromium, or set CHROMIUM=/path/to/chromium)"
    command -v apt-get >/dev/null || die "chromium is missing and there is no apt-get to install it"
    say "apt-get install chromium"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
      || die "apt-get install chromium failed"
    CHROMIUM="$(command -v chromium || true)"
    [[ -x "$CHROMIUM" ]] || die "chromium was installed but not found; set CHROMIUM=/path/to/chromium"
  fi
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/steptrace-check-html.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
START=$SECONDS

# Every host resolves to nothing and every request goes to a dead proxy: the
# page cannot reach anything, and the NetLog shows what it tried.
browser() {
  local profile="$WORK/profile-$1"; shift
  local flags=(--headless --disable-gpu --hide-scrollbars --no-first-run --no-default-browser-check
    --disable-background-networking --disable-component-update --disable-sync --disable-extensions
    --disable-default-apps --mute-audio --user-data-dir="$profile"
    --host-resolver-rules="MAP * ~NOTFOUND" --proxy-server="http://127.0.0.1:9" --proxy-bypass-list="<-loopback>")
  # As root chromium runs unsandboxed, and then needs no zygote (the process that forks its
  # renderers): without it, the zygote's "Failed to send GetTerminationStatus" hang, seen under
  # load on 2 cores, cannot happen.
  [[ $(id -u) -eq 0 ]] && flags+=(--no-sandbox --no-zygote)
  timeout --kill-after=5 "$TIMEOUT" "$CHROMIUM" "${flags[@]}" "$@"
}
# OUT ERR NAME ARGS...: `browser` with its output in OUT and ERR (the same file when equal), once
# more with a fresh profile and fresh files when chromium hung until the timeout (seen once on a
# 2-core machine right after chromium's install: zygote errors, no output).
browser_to() {
  local out=$1 err=$2 name=$3 rc=0 try
  shift 3
  for try in "$name" "$name-again"; do
    rc=0
    if [[ "$out" == "$err" ]]; then
      browser "$try" "$@" >"$out" 2>&1 || rc=$?
    else
      browser "$try" "$@" >"$out" 2>"$err" || rc=$?
    fi
    [[ $rc -eq 124 || $rc -eq 137 ]] || break
    [[ "$try" == "$name" ]] && echo "check-html: note: chromium hung ($name, exit $rc); trying once more" >&2
  done
  return $rc
}
URL="file://$PAGE"
rc=0
browser_to "$WORK/dom.html" "$WORK/dom.log" dom --log-net-log="$WORK/netlog.json" --dump-dom "$URL" || rc=$?
if [[ $rc -ne 0 || ! -s "$WORK/dom.html" ]]; then
  echo "check-html: error: chromium could not render $PAGE (exit $rc):" >&2
  grep -v 'dbus\|unexpected operator' "$WORK/dom.log" | tail -5 | sed 's/^/  | /' >&2
  exit 2
fi
# A viewport as tall as any report; the picture is cut below its last drawn row.
rc=0
browser_to "$WORK/shot.log" "$WORK/shot.log" shot --window-size=1200,16000 --run-all-compositor-stages-before-draw \
  --screenshot="$WORK/shot.png" "$URL" || rc=$?
if [[ $rc -ne 0 || ! -s "$WORK/shot.png" ]]; then
  echo "check-html: error: chromium took no screenshot of $PAGE (exit $rc):" >&2
  grep -v 'dbus\|unexpected operator' "$WORK/shot.log" | tail -5 | sed 's/^/  | /' >&2
  exit 2
fi

# ------------------------------------------------------------------ checks
rc=0
"$PYTHON" - "$PAGE" "$WORK/dom.html" "$WORK/netlog.json" "$WORK/shot.png" "$SCREENSHOT" "$MIN_SVG" "$LAYERS" <<'PY' || rc=$?
import html.parser, json, re, struct, sys, zlib

page, dom_path, netlog_path, shot_path, out_png, min_svg, layers = sys.argv[1:8]
min_svg, layers = int(min_svg), set(layers.split(","))
failures = []

def fail(layer, msg):
    failures.append(f"{layer}: {msg}")

# Attributes that make a browser fetch or navigate.
URL_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "formaction", "poster", "data", "background",
             "codebase", "cite", "longdesc", "ping", "manifest", "icon", "lowsrc", "dynsrc"}
BANNED_TAGS = {"script", "link", "iframe", "frame", "object", "embed", "base", "applet", "audio", "video",
               "source", "track", "img", "image", "use", "feimage", "portal"}
BAD_CSS = re.compile(r"url\s*\(|@import|@font-face|image-set\s*\(|expression\s*\(", re.I)

class Scan(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems, self.svgs, self.shapes, self.ids, self.csp = [], 0, 0, set(), None
        self.in_style, self.stack = False, []
    def handle_starttag(self, tag, attrs):
        tag = tag.lower()
        a = {k.lower(): (v or "") for k, v in attrs}
        if tag in BANNED_TAGS:
            self.problems.append(f"<{tag}> element" + (f' with src="{a["src"]}"' if "src" in a else ""))
        if tag == "meta" and a.get("http-equiv", "").lower() == "refresh":
            self.problems.append("<meta http-equiv=refresh>")
        if tag == "meta" and a.get("http-equiv", "").lower() == "content-security-policy":
            self.csp = a.get("content", "")
        for k, v in a.items():
            if k in URL_ATTRS and not v.startswith("#"):
                self.problems.append(f'<{tag}> {k}="{v}"')
            if k.startswith("on"):
                self.problems.append(f"<{tag}> event handler {k}")
            if k == "style" and BAD_CSS.search(v):
                self.problems.append(f"<{tag}> style loads something: {v[:80]}")
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "svg":
            self.svgs += 1
        if tag in ("rect", "path", "polyline", "polygon", "line", "circle", "text") and "svg" in self.stack:
            self.shapes += 1
        if tag == "style":
            self.in_style = True
        self.stack.append(tag)
    def handle_endtag(self, tag):
        tag = tag.lower()
        if tag == "style":
            self.in_style = False
        while self.stack:
            if self.stack.pop() == tag:
                break
    def handle_data(self, data):
        if self.in_style and BAD_CSS.search(data):
            self.problems.append(f"<style> loads something: {BAD_CSS.search(data).group(0)}")

def scan(text):
    s = Scan()
    s.feed(text)
    s.close()
    return s

# --- static: the file as written
raw = open(page, "rb").read()
try:
    text = raw.decode("utf-8")
except UnicodeDecodeError as e:
    text = raw.decode("utf-8", "replace")
    if "static" in layers:
        fail("static", f"not UTF-8: {e}")
static = scan(text)
if "static" in layers:
    if not text.lstrip().lower().startswith("<!doctype html>"):
        fail("static", "no <!DOCTYPE html> at the start")
    for p in static.problems:
        fail("static", p)
    csp = (static.csp or "").replace("'", "")
    if static.csp is None:
        fail("static", "no Content-Security-Policy <meta>: nothing stops a load the markup does not show")
    elif "default-src none" not in csp or re.search(r"script-src|connect-src|font-src|img-src\s+(?!data:)", csp):
        fail("static", f"the Content-Security-Policy allows loads: {static.csp}")

# --- dom: what Chromium rendered
dom = scan(open(dom_path, encoding="utf-8", errors="replace").read())
if "dom" in layers:
    for p in dom.problems:
        fail("dom", p)
    if dom.svgs < min_svg or dom.shapes == 0:
        fail("dom", f"{dom.svgs} <svg> chart(s) with {dom.shapes} drawn shapes in the rendered page (wanted at least {min_svg})")
    if "steptrace report" in text:
        missing = [s for s in ("run", "steps", "device", "spans", "hypotheses", "viewers") if s not in dom.ids]
        if missing:
            fail("dom", f"sections missing from the rendered page: {', '.join(missing)}")

# --- net: every request the page started
if "net" in layers:
    try:
        log = json.load(open(netlog_path, encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        # A NetLog cut at exit lacks its closing brackets.
        body = open(netlog_path, encoding="utf-8", errors="replace").read().rstrip().rstrip(",")
        log = json.loads(body + ("]}" if not body.endswith("]}") else ""))
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    own, background = set(), set()
    for e in log.get("events", []):
        p = e.get("params") or {}
        if names.get(e.get("type")) != "URL_REQUEST_START_JOB" or "url" not in p:
            continue
        url = p["url"]
        if re.match(r"(file|data|about|blob|chrome|devtools):", url):
            continue
        if "file://" in str(p.get("network_isolation_key", "")) or p.get("initiator") == "null":
            own.add(url)
        else:
            background.add(url.split("?")[0])
    for url in sorted(own):
        fail("net", f"the page requested {url}")
    if background:
        print(f"check-html: note: chromium's own background requests (not the page's; cut off like everything else): {len(background)}")

# --- pixels: the screenshot, from its filtered scanlines
def png_rows(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    w, h, depth, colour, _, _, interlace = ihdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or interlace or channels is None:
        raise ValueError(f"unexpected PNG layout (depth {depth}, colour type {colour}, interlace {interlace})")
    raw = zlib.decompress(b"".join(idat))
    stride = w * channels + 1
    return ihdr, channels, [raw[i * stride:(i + 1) * stride] for i in range(h)]

def drawn(row, channels):
    # Whether a row holds anything: two colours, or a colour other than the
    # row above's. Read from the filtered bytes (filter type first): None
    # keeps the pixels; Up is zero where the row repeats the one above; Sub,
    # Average and Paeth are zero past the first pixel where it also is of
    # one colour.
    kind, body = row[0], row[1:]
    if kind == 0:
        return body != body[:channels] * (len(body) // channels)
    if kind == 2:
        return body.count(0) < len(body)
    return body[channels:].count(0) < len(body) - channels

if "pixels" in layers:
    try:
        ihdr, channels, rows = png_rows(shot_path)
    except (OSError, ValueError, zlib.error) as e:
        print(f"check-html: error: cannot read the screenshot: {e}", file=sys.stderr)
        sys.exit(2)
    ink = [drawn(r, channels) for r in rows]
    last = max((i for i, v in enumerate(ink) if v), default=-1)
    share = sum(ink) / max(1, last + 1)
    if last < 0 or sum(ink) < 40 or share < 0.05:
        fail("pixels", f"the screenshot is blank ({sum(ink)} of {len(rows)} rows hold anything)")
    # Keep the page down to its last drawn row, plus a margin.
    keep = min(len(rows), max(last + 24, 200))
    w, h, depth, colour, comp, flt, il = ihdr
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, keep, depth, colour, comp, flt, il))
           + chunk(b"IDAT", zlib.compress(b"".join(rows[:keep]), 9)) + chunk(b"IEND", b""))
    open(out_png, "wb").write(png)
    print(f"check-html: screenshot {w}x{keep} px ({len(png) // 1024} KiB), {sum(ink)} rows drawn: {out_png}")

for f in failures:
    print(f"check-html: FAIL: {f}", file=sys.stderr)
if not failures:
    print(f"check-html: {dom.svgs} SVG chart(s), {dom.shapes} shapes; sections {', '.join(sorted(dom.ids & {'run', 'steps', 'device', 'spans', 'hypotheses', 'viewers'})) or '-'}")
sys.exit(1 if failures else 0)
PY
if [[ $rc -eq 0 ]]; then
  say "OK: $(basename "$PAGE") is self-contained and renders ($((SECONDS - START)) s)"
else
  say "FAILED: $(basename "$PAGE") ($((SECONDS - START)) s)"
  [[ $rc -eq 2 ]] || rc=1
fi
exit $rc
