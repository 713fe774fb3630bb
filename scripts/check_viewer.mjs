// Browser half of scripts/check-viewer.sh: drives headless Chromium (through
// playwright-core) against a Perfetto UI served by vizviewer, and optionally
// against the speedscope static bundle. Run it through check-viewer.sh, which
// installs the dependencies, starts vizviewer and passes these options:
//
//   node check_viewer.mjs --perfetto-url http://127.0.0.1:PORT/ --trace FILE
//        [--expect NAME]... [--expect-slice NAME]... [--screenshot OUT.png]
//        [--speedscope --speedscope-trace FILE --speedscope-screenshot OUT.png]
//        [--timeout SECONDS] [--strict] [--user-data-dir DIR]
//
// Exit status: 0 every check passed, 1 a check failed, 2 usage or setup error.

import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const TAG = 'check-viewer:';
const log = (...a) => console.log(TAG, ...a);
const warn = (...a) => console.log(TAG, 'warning:', ...a);
const t0 = Date.now();
const secs = () => ((Date.now() - t0) / 1000).toFixed(1) + 's';

// ---------------------------------------------------------------- options
function parseArgs(argv) {
  const o = {
    expect: [], expectSlice: [], timeout: 180, strict: false, speedscope: false,
    chromium: process.env.CHROMIUM || '/usr/bin/chromium',
  };
  const need = (i) => {
    if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
    return argv[i + 1];
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    switch (a) {
      case '--perfetto-url': o.url = need(i); i++; break;
      case '--trace': o.trace = need(i); i++; break;
      case '--expect': o.expect.push(need(i)); i++; break;
      case '--expect-slice': o.expectSlice.push(need(i)); i++; break;
      case '--screenshot': o.screenshot = need(i); i++; break;
      case '--speedscope': o.speedscope = true; break;
      case '--speedscope-trace': o.speedscopeTrace = need(i); i++; break;
      case '--speedscope-screenshot': o.speedscopeScreenshot = need(i); i++; break;
      case '--timeout': o.timeout = Number(need(i)); i++; break;
      case '--strict': o.strict = true; break;
      case '--user-data-dir': o.userDataDir = need(i); i++; break;
      case '--chromium': o.chromium = need(i); i++; break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (!o.url) usage('--perfetto-url is required');
  if (!(o.timeout > 0)) usage('--timeout must be a positive number of seconds');
  return o;
}
function usage(msg) {
  console.error(`${TAG} ${msg}\n(run it through scripts/check-viewer.sh)`);
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));
const cacheDir = process.env.STEPTRACE_VIEWER_CACHE || path.join(os.homedir(), '.cache', 'steptrace-viewer');
const requireFromCache = createRequire(path.join(cacheDir, 'package.json'));
let chromium;
try {
  ({ chromium } = requireFromCache('playwright-core'));
} catch (e) {
  console.error(`${TAG} cannot load playwright-core from ${cacheDir}/node_modules: ${e.message}`);
  process.exit(2);
}

const failures = [];
const fail = (msg) => { failures.push(msg); console.log(TAG, 'FAIL:', msg); };
const strictIssues = [];

// Noise that the vizviewer-bundled Perfetto UI always prints offline; none of
// it means the trace failed to load.
const BENIGN_CONSOLE = [
  /Failed to load resource/i,          // each failed request is logged separately below
  /LiveReload/i,                       // dev-server probe, 404 under vizviewer
  /unsupported syscall/i,              // emscripten warning from the wasm engine
  /ERR_CONNECTION_REFUSED/i,           // probe of the native accelerator on :9001
  /Unrecognized Content-Security-Policy directive 'navigate-to'/,  // Perfetto's CSP, newer Chromium
];
const BENIGN_REQUESTS = [
  /\/live_reload$/,
  /^http:\/\/127\.0\.0\.1:9001\//,     // trace_processor --httpd probe (blocked by us)
  /is_internal_user\.js/,              // Google-internal check, needs the internet
];

// ---------------------------------------------------------------- browser
const userDataDir = opts.userDataDir || fs.mkdtempSync(path.join(os.tmpdir(), 'steptrace-chromium-'));
const ownUserDataDir = !opts.userDataDir;
let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1600, height: 1000 },
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
} catch (e) {
  console.error(`${TAG} could not start Chromium (${opts.chromium}): ${e.message}`);
  process.exit(2);
}

// Keep everything offline: only the local servers may be reached.
const allowedOrigins = new Set([new URL(opts.url).origin]);
// Requests to the local servers are not intercepted at all (interception
// itself makes Chromium report spurious aborts of the streamed trace).
const isLocal = (url) => url.protocol === 'data:' || url.protocol === 'blob:' || allowedOrigins.has(url.origin);
await context.route((url) => !isLocal(url), (route) => {
  const u = route.request().url();
  if (!BENIGN_REQUESTS.some((r) => r.test(u))) warn(`blocked off-host request ${u}`);
  return route.abort('blockedbyclient');
});

function watchPage(page, label) {
  const w = { consoleErrors: [], pageErrors: [], badRequests: [], consoleWarnings: [] };
  page.on('console', (m) => {
    const text = m.text();
    if (m.type() === 'error' && !BENIGN_CONSOLE.some((r) => r.test(text))) w.consoleErrors.push(text);
    if (m.type() === 'warning') w.consoleWarnings.push(text);
  });
  page.on('pageerror', (e) => w.pageErrors.push(String(e && e.stack || e)));
  page.on('requestfailed', (r) => {
    const u = r.url();
    const why = r.failure()?.errorText || '';
    // ERR_ABORTED: the page itself cancelled the request (Perfetto sometimes
    // does so for /localtrace once it has read it); a real failure to get the
    // trace shows up as an error dialog instead.
    if (why === 'net::ERR_ABORTED' || why === 'net::ERR_BLOCKED_BY_CLIENT') return;
    if (!BENIGN_REQUESTS.some((x) => x.test(u))) w.badRequests.push(`${u}: ${why}`);
  });
  page.on('response', (r) => {
    const u = r.url();
    if (r.status() >= 400 && !BENIGN_REQUESTS.some((x) => x.test(u))) w.badRequests.push(`${u}: HTTP ${r.status()}`);
  });
  w.label = label;
  return w;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const contains = (haystack, needle) => haystack.includes(needle);
// The text of Perfetto's dialogs, less the bug-report boilerplate.
const modalText = (modals) => modals.map((m) => m.split('\n').map((l) => l.trim())
  .filter((l) => l && !/^(close|UA:|Referrer:|UI:|File a bug|Please provide any additional)/.test(l))
  .map((l) => `  | ${l}`).join('\n')).join('\n  ---\n');
const short = (s, n = 600) => (s.length > n ? s.slice(0, n) + '…' : s);

// ---------------------------------------------------------------- Perfetto
async function perfettoState(page) {
  return page.evaluate(() => {
    const app = window.app; // set by Perfetto's registerDebugGlobals()
    const trace = app && app.trace;
    const boot = document.getElementById('app_load_failure');
    const bootFailed = !!boot && getComputedStyle(boot).opacity === '1';
    return {
      bootFailed,
      bootText: bootFailed ? boot.innerText : '',
      hasApp: !!app,
      loading: !!(app && app.isLoadingTrace),
      hasTrace: !!trace,
      pending: trace && trace.engine ? trace.engine.numRequestsPending ?? 0 : -1,
      modals: [...document.querySelectorAll('.pf-modal-dialog')].map((d) => d.innerText.trim()),
      titles: [...document.querySelectorAll('.pf-track__title')].map((e) => {
        const full = e.querySelector('.pf-track__title-popup');
        return (full ? full.textContent : e.textContent).trim();
      }),
      emptyWorkspace: /Empty workspace/.test(document.body.innerText),
    };
  });
}

async function perfettoDetails(page) {
  return page.evaluate(async () => {
    const trace = window.app.trace;
    const out = { workspace: [], slices: [], stats: [], queryError: null };
    try {
      out.workspace = (trace.workspace?.flatTracksOrdered ?? []).map((n) => n.name).filter(Boolean);
    } catch (e) { out.queryError = `workspace: ${e}`; }
    const rows = async (sql) => {
      const q = await trace.engine.query(sql);
      const it = q.iter({});
      const cols = q.columns();
      const res = [];
      for (; it.valid(); it.next()) res.push(Object.fromEntries(cols.map((c) => [c, it.get(c)])));
      return res;
    };
    try {
      out.slices = (await rows('select distinct name from slice where name is not null order by name limit 20000')).map((r) => r.name);
      out.sliceCount = (await rows('select count(*) as n from slice'))[0].n;
      out.stats = await rows(
        "select name, idx, severity, source, cast(value as text) as value, description from stats " +
        "where value > 0 and severity in ('error', 'data_loss') order by name");
    } catch (e) { out.queryError = String(e && e.message || e); }
    return out;
  });
}

async function checkPerfetto() {
  const page = await context.newPage();
  const w = watchPage(page, 'perfetto');
  const deadline = t0 + opts.timeout * 1000;
  log(`opening Perfetto UI at ${opts.url}`);
  await page.goto(opts.url, { waitUntil: 'domcontentloaded', timeout: opts.timeout * 1000 });

  // Loaded = Perfetto's app has a current trace, is no longer loading it, the
  // wasm trace processor has no queries in flight, and the track panel shows
  // the same track titles for 4 polls in a row (or says "Empty workspace").
  let loadedAt = null;
  let stable = 0;
  let lastKey = '';
  let st;
  let lastPhase = '';
  for (;;) {
    st = await perfettoState(page);
    const phase = !st.hasApp ? 'booting UI' : st.loading ? 'trace processor loading trace'
      : st.hasTrace ? 'rendering tracks' : 'waiting for trace';
    if (phase !== lastPhase) { log(`[${secs()}] ${phase}`); lastPhase = phase; }
    if (st.bootFailed) { fail(`Perfetto UI failed to start:\n${short(st.bootText)}`); break; }
    if (st.modals.length) { fail(`Perfetto shows a dialog:\n${modalText(st.modals)}`); break; }
    if (st.hasTrace && !st.loading && st.pending === 0) {
      loadedAt ??= Date.now();
      const key = JSON.stringify([st.titles, st.emptyWorkspace]);
      stable = key === lastKey ? stable + 1 : 0;
      lastKey = key;
      if (stable >= 4 && (st.titles.length || st.emptyWorkspace) && Date.now() - loadedAt >= 1000) break;
    } else {
      stable = 0;
    }
    if (Date.now() > deadline) {
      fail(`Perfetto did not finish loading within ${opts.timeout}s (last state: ${phase}; ` +
        `${st.titles.length} track titles)`);
      break;
    }
    await sleep(250);
  }

  let details = null;
  if (!failures.length) {
    log(`[${secs()}] trace loaded: ${st.titles.length} top-level track(s) rendered`);
    // Open every track group so that thread tracks nested under processes are
    // rendered too, then let the UI settle and look again.
    await page.evaluate(() => window.app.trace.commands.runCommand('dev.perfetto.ExpandAllGroups')).catch((e) =>
      warn(`could not expand track groups: ${e.message}`));
    await sleep(750);
    st = await perfettoState(page);
    details = await perfettoDetails(page);
    if (details.queryError) warn(`trace processor query failed: ${details.queryError}`);
    log(`track titles rendered: ${st.titles.map((t) => JSON.stringify(t)).join(', ') || '(none)'}`);
    log(`slices: ${details.sliceCount ?? '?'} (${details.slices.length} distinct names)`);
    for (const s of details.stats) {
      const msg = `trace processor import stat ${s.name}${s.idx != null ? `[${s.idx}]` : ''} = ${s.value} ` +
        `(${s.severity}): ${s.description}`;
      warn(msg);
      strictIssues.push(msg);
    }
    if (st.modals.length) fail(`Perfetto shows a dialog:\n${modalText(st.modals)}`);
    if (!st.titles.length) fail('Perfetto loaded the file but shows no tracks ("Empty workspace"): no events it understood');

    const known = new Set([...st.titles, ...details.workspace]);
    for (const name of opts.expect) {
      if (st.titles.some((t) => contains(t, name))) log(`found track "${name}"`);
      else if ([...known].some((t) => contains(t, name))) log(`found track "${name}" (in the track tree, off screen)`);
      else fail(`expected track name "${name}" not found in Perfetto; tracks are: ${[...known].map((t) => JSON.stringify(t)).join(', ') || '(none)'}`);
    }
    for (const name of opts.expectSlice) {
      if (details.slices.includes(name)) log(`found slice "${name}"`);
      else fail(`expected slice "${name}" not found in Perfetto; slice names are: ${short(details.slices.map((t) => JSON.stringify(t)).join(', '), 400) || '(none)'}`);
    }
  }

  if (opts.screenshot) {
    fs.mkdirSync(path.dirname(path.resolve(opts.screenshot)), { recursive: true });
    await page.screenshot({ path: opts.screenshot });
    log(`Perfetto screenshot: ${opts.screenshot}`);
  }
  report(w);
  return page;
}

function report(w) {
  for (const e of w.pageErrors) fail(`${w.label}: uncaught exception in the page: ${short(e)}`);
  for (const e of w.consoleErrors) {
    warn(`${w.label} console error: ${short(e, 300)}`);
    strictIssues.push(`${w.label} console error: ${short(e, 300)}`);
  }
  for (const r of w.badRequests) {
    warn(`${w.label} request failed: ${r}`);
    strictIssues.push(`${w.label} request failed: ${r}`);
  }
}

// ---------------------------------------------------------------- speedscope
function serveSpeedscope(dist, tracePath) {
  const types = {
    '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm',
    '.json': 'application/json', '.png': 'image/png', '.ico': 'image/x-icon', '.woff2': 'font/woff2',
    '.txt': 'text/plain',
  };
  const server = http.createServer((req, res) => {
    const p = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    let file;
    if (p === '/trace.json') file = tracePath;
    else {
      file = path.join(dist, p === '/' ? 'index.html' : p);
      if (!file.startsWith(dist + path.sep)) file = null;
    }
    if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function checkSpeedscope() {
  let dist;
  try {
    dist = path.join(path.dirname(requireFromCache.resolve('speedscope/package.json')), 'dist', 'release');
  } catch (e) {
    fail(`speedscope is not installed in ${cacheDir}: ${e.message}`);
    return;
  }
  const tracePath = path.resolve(opts.speedscopeTrace || opts.trace);
  const server = await serveSpeedscope(dist, tracePath);
  const origin = `http://127.0.0.1:${server.address().port}`;
  allowedOrigins.add(origin);
  const page = await context.newPage();
  const w = watchPage(page, 'speedscope');
  const before = failures.length;
  try {
    log(`opening speedscope at ${origin}/`);
    await page.goto(`${origin}/index.html#profileURL=${encodeURIComponent('/trace.json')}`, { timeout: opts.timeout * 1000 });
    const deadline = Date.now() + Math.max(30, opts.timeout / 2) * 1000;
    let st;
    for (;;) {
      st = await page.evaluate(() => {
        const text = document.body.innerText;
        // Profile names: the rows of the (hidden) profile selector when there
        // are several, else the title in the middle of the toolbar.
        const rows = [...document.querySelectorAll('tbody tr[title]')].map((r) => r.title);
        const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
        const i = lines.findIndex((l) => /Sandwich$/.test(l));
        const title = i >= 0 && i + 1 < lines.length ? lines[i + 1].replace(/\s*\(\d+\/\d+\)$/, '') : '';
        return {
          error: /Something went wrong/.test(text),
          loaded: /Time Order/.test(text) && document.querySelectorAll('canvas').length > 1,
          text,
          names: rows.length ? rows : title ? [title] : [],
        };
      });
      if (st.error) { fail(`speedscope could not import the trace: ${short(st.text.replace(/\n+/g, ' '), 300)}`); break; }
      if (st.loaded && st.names.length) break;
      if (Date.now() > deadline) { fail('speedscope did not show a profile in time'); break; }
      await sleep(250);
    }
    if (failures.length === before) {
      log(`[${secs()}] speedscope loaded ${st.names.length} profile(s): ${st.names.map((n) => JSON.stringify(n)).join(', ')}`);
      for (const name of opts.expect) {
        if (st.names.some((n) => contains(n, name))) log(`speedscope: found "${name}"`);
        else {
          // Not fatal: speedscope has no process, counter or instant tracks.
          warn(`speedscope: "${name}" not among its profile (thread) names`);
          strictIssues.push(`speedscope: "${name}" not among profile names`);
        }
      }
      const mismatched = w.consoleWarnings.filter((m) => /Tried to end|ts=\d+:/.test(m));
      if (mismatched.length) {
        warn(`speedscope printed ${mismatched.length} import warning(s), e.g.: ${short(mismatched[0], 300)}`);
      }
    }
    if (opts.speedscopeScreenshot) {
      fs.mkdirSync(path.dirname(path.resolve(opts.speedscopeScreenshot)), { recursive: true });
      await page.screenshot({ path: opts.speedscopeScreenshot });
      log(`speedscope screenshot: ${opts.speedscopeScreenshot}`);
    }
  } finally {
    report(w);
    server.close();
  }
}

// ---------------------------------------------------------------- main
let code = 0;
try {
  await checkPerfetto();
  if (opts.speedscope) await checkSpeedscope();
  if (opts.strict && strictIssues.length) fail(`--strict: ${strictIssues.length} warning(s) above`);
  code = failures.length ? 1 : 0;
} catch (e) {
  console.log(TAG, 'FAIL:', `browser check crashed: ${e && e.stack || e}`);
  code = 1;
} finally {
  await context.close().catch(() => {});
  if (ownUserDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
}
log(`${code === 0 ? 'PASS' : 'FAILED'} after ${secs()} in the browser`);
process.exit(code);
