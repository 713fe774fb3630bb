//! Label hygiene: flags span names, argument keys and values, thread names
//! and metadata strings that look like secrets, private paths or input
//! content.
//!
//! Traces get shared: attached to issues, uploaded to viewers. A label that
//! carries an e-mail address, an API key, a home directory or a sample of
//! the training data leaks it. [`check_label`] inspects one string;
//! [`scan_trace`] inspects every label of a parsed trace and says where each
//! finding is.
//!
//! The checks are heuristics, tuned to stay quiet on ordinary labels
//! (`ProfilerStep#12`, `cubecl_runtime::client::launch_inner`,
//! `fusion<cubecl<cuda>>`, `0x7f3a2b1c`, `wait=1,warmup=1,active=2`):
//!
//! - [`FindingKind::Email`]: `local@domain.tld` with an alphabetic TLD.
//! - [`FindingKind::Token`]: `Bearer` tokens; AWS-style key ids
//!   (`AKIA…`, `ASIA…`); well-known token prefixes (`ghp_`, `github_pat_`,
//!   `glpat-`, `hf_`, `sk-`, `xoxb-`, `AIza`, …); JWTs (`eyJ….….…`) and
//!   other `a.b.c` runs of three long mixed segments; hex runs of 32 digits
//!   or more; base64 runs of 32 characters or more that mix cases and
//!   digits like random text does; `password=…`, `api_key: …` and similar
//!   assignments; credentials in URLs (`https://user:pass@host`).
//! - [`FindingKind::HomePath`]: `/home/USER`, `/Users/USER`, `/root/…`,
//!   `~/...`, `C:\Users\USER` (not generic paths such as
//!   `/usr/local/cuda/include`).
//! - [`FindingKind::InputContent`]: natural-language text (more than 48
//!   characters, at least 8 words, mostly plain words, with several common
//!   English function words), and lists of 8 numbers or more (`[0.12, 0.5,
//!   0.33, …]`); in [`scan_trace`], also JSON arrays of 16 numbers or more
//!   in event arguments.
//!
//! Each [`Finding`] carries a short excerpt with the sensitive part masked
//! (`al***@***.org`, `password=***`, `/home/al***/…`), so that findings can
//! be logged, or written to a trace's metadata, without leaking what they
//! flag; excerpts never trigger a finding themselves.

use std::collections::HashSet;
use std::fmt::{self, Write as _};

use serde_json::Value;

use crate::reader::{Trace, TraceEvent, TrackId};

mod redact;

pub use redact::{redact_label, redact_trace_value};

/// What a label seems to leak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FindingKind {
    /// An e-mail address.
    Email,
    /// A credential: a bearer or API token, an access key, a password
    /// assignment, a JWT, a long hex or base64 run.
    Token,
    /// A path inside a user's home directory.
    HomePath,
    /// Content of the program's input: natural-language text or a long list
    /// of numbers.
    InputContent,
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FindingKind::Email => "e-mail address",
            FindingKind::Token => "token or secret",
            FindingKind::HomePath => "home directory path",
            FindingKind::InputContent => "input content",
        })
    }
}

/// Something a label seems to leak.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Finding {
    /// What it seems to be.
    pub kind: FindingKind,
    /// A short excerpt with the sensitive part masked, for example
    /// `al***@***.org`.
    pub excerpt: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.excerpt)
    }
}

/// A [`Finding`] and where in a trace it was found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocatedFinding {
    /// Where: `event 12 name`, `event 12 cat`, `event 3 args.user`,
    /// `event 3 args.user (key)`, `thread name tid 4`, `process name pid
    /// 1`, `metadata.manifest.data_path`, ...
    pub location: String,
    /// What was found.
    pub finding: Finding,
}

impl fmt::Display for LocatedFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.finding)
    }
}

/// Checks one label, returning what it seems to leak, in order of position
/// (empty when the label looks clean).
///
/// # Examples
///
/// ```
/// use steptrace::hygiene::{check_label, FindingKind};
///
/// assert!(check_label("cubecl_runtime::client::launch_inner").is_empty());
/// assert!(check_label("ProfilerStep#12").is_empty());
///
/// let findings = check_label("load /home/alice/data.csv for alice@example.org");
/// let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
/// assert_eq!(kinds, [FindingKind::HomePath, FindingKind::Email]);
/// assert_eq!(findings[1].excerpt, "al***@***.org");
/// assert!(!findings[0].excerpt.contains("alice"));
/// ```
#[must_use]
pub fn check_label(text: &str) -> Vec<Finding> {
    check(text, Checks::ALL)
}

/// Which families of checks to run.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Checks {
    prose: bool,
}

impl Checks {
    const ALL: Checks = Checks { prose: true };
}

/// A finding and the byte range of the text it covers.
struct Hit {
    start: usize,
    end: usize,
    kind: FindingKind,
    excerpt: String,
}

/// Whether `text` is too short and plain for any check to fire: under 16
/// bytes (the shortest JWT-like run), and without the separators that
/// addresses, paths, lists and assignments need. Most labels are.
fn trivially_clean(text: &str) -> bool {
    text.len() < 16
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'#' | b'-' | b'<' | b'>' | b'(' | b')'))
}

fn check(text: &str, checks: Checks) -> Vec<Finding> {
    let hits = hits(text, checks);
    // One finding per stretch of text and kind: hits are sorted by start,
    // so a hit overlaps an earlier one of its kind if it starts before the
    // furthest end seen for that kind.
    let mut reach: Vec<(FindingKind, usize)> = Vec::new();
    let mut findings = Vec::new();
    for hit in hits {
        match reach.iter_mut().find(|(kind, _)| *kind == hit.kind) {
            Some((_, end)) if hit.start < *end => *end = (*end).max(hit.end),
            Some((_, end)) => {
                *end = hit.end;
                findings.push(Finding { kind: hit.kind, excerpt: clip(hit.excerpt) });
            }
            None => {
                reach.push((hit.kind, hit.end));
                findings.push(Finding { kind: hit.kind, excerpt: clip(hit.excerpt) });
            }
        }
    }
    findings
}

/// Every hit in `text`, sorted by start.
fn hits(text: &str, checks: Checks) -> Vec<Hit> {
    if trivially_clean(text) {
        return Vec::new();
    }
    let mut hits = Vec::new();
    email::find(text, &mut hits);
    token::find(text, &mut hits);
    home::find(text, &mut hits);
    input::find_numbers(text, &mut hits);
    if checks.prose {
        input::find_prose(text, &mut hits);
    }
    // An address inside a credential (`password=a@b.org`,
    // `https://user:pass@host.org`) is part of that credential.
    let mut tokens: Vec<(usize, usize)> =
        hits.iter().filter(|h| h.kind == FindingKind::Token).map(|h| (h.start, h.end)).collect();
    tokens.sort_unstable();
    // reach[i]: the furthest end among the first i + 1 tokens.
    let reach: Vec<usize> = tokens
        .iter()
        .scan(0, |furthest, &(_, end)| {
            *furthest = end.max(*furthest);
            Some(*furthest)
        })
        .collect();
    hits.retain(|h| {
        let starting_before = tokens.partition_point(|&(start, _)| start < h.end);
        let inside_token = starting_before > 0 && reach.get(starting_before - 1).is_some_and(|&end| end > h.start);
        h.kind != FindingKind::Email || !inside_token
    });
    hits.sort_by_key(|hit| (hit.start, hit.kind));
    hits
}

/// Excerpts are kept to 64 characters.
fn clip(excerpt: String) -> String {
    match excerpt.char_indices().nth(63) {
        Some((cut, _)) => format!("{}…", &excerpt[..cut]),
        None => excerpt,
    }
}

/// Byte-level helpers shared by the detectors.
mod text {
    /// The byte at `i`, or 0 outside the text.
    pub(super) fn at(bytes: &[u8], i: usize) -> u8 {
        bytes.get(i).copied().unwrap_or(0)
    }

    /// The byte before `i`, or 0 at the start.
    pub(super) fn before(bytes: &[u8], i: usize) -> u8 {
        i.checked_sub(1).map_or(0, |j| at(bytes, j))
    }

    /// The end of the run of bytes matching `pred` that starts at `start`.
    pub(super) fn run_end(bytes: &[u8], start: usize, pred: impl Fn(u8) -> bool) -> usize {
        let mut end = start;
        while end < bytes.len() && pred(at(bytes, end)) {
            end += 1;
        }
        end
    }

    /// The start of the run of bytes matching `pred` that ends at `end`.
    pub(super) fn run_start(bytes: &[u8], end: usize, pred: impl Fn(u8) -> bool) -> usize {
        let mut start = end;
        while start > 0 && pred(before(bytes, start)) {
            start -= 1;
        }
        start
    }

    /// `text[start..end]`, or `""` if that is not a valid range.
    pub(super) fn slice(text: &str, start: usize, end: usize) -> &str {
        text.get(start..end).unwrap_or("")
    }

    /// The first `n` characters of `s`.
    pub(super) fn prefix(s: &str, n: usize) -> &str {
        s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
    }

    /// Maximal runs of bytes matching `pred`, as `(start, end)` ranges.
    pub(super) fn runs(bytes: &[u8], pred: impl Fn(u8) -> bool) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if pred(at(bytes, i)) {
                let end = run_end(bytes, i, &pred);
                out.push((i, end));
                i = end;
            } else {
                i += 1;
            }
        }
        out
    }

    /// Finds `needle` in `haystack` ignoring ASCII case; `needle` must be
    /// lowercase.
    pub(super) fn find_ignore_case(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
        if needle.is_empty() || haystack.len() < needle.len() {
            return Vec::new();
        }
        (0..=haystack.len() - needle.len())
            .filter(|&i| haystack.get(i..i + needle.len()).is_some_and(|w| w.eq_ignore_ascii_case(needle)))
            .collect()
    }

    /// A masked form of a user name or similar: its first two characters.
    pub(super) fn mask(s: &str) -> String {
        let keep = if s.chars().count() > 3 { 2 } else { 1 };
        format!("{}***", prefix(s, keep))
    }
}

/// `local@domain.tld`.
mod email {
    use super::text::{at, run_end, run_start, slice};
    use super::{FindingKind, Hit};

    fn is_local(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
    }

    fn is_domain(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')
    }

    pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
        let bytes = text.as_bytes();
        for (at_sign, _) in text.match_indices('@') {
            let mut start = run_start(bytes, at_sign, is_local);
            while start < at_sign && at(bytes, start) == b'.' {
                start += 1;
            }
            let mut end = run_end(bytes, at_sign + 1, is_domain);
            while end > at_sign + 1 && matches!(at(bytes, end - 1), b'.' | b'-') {
                end -= 1;
            }
            let local = slice(text, start, at_sign);
            let domain = slice(text, at_sign + 1, end);
            let labels: Vec<&str> = domain.split('.').collect();
            let tld = labels.last().copied().unwrap_or("");
            let valid = !local.is_empty()
                && labels.len() >= 2
                && labels.iter().all(|label| !label.is_empty())
                && (2..=24).contains(&tld.len())
                && tld.bytes().all(|b| b.is_ascii_alphabetic());
            if valid {
                let shown = super::text::prefix(local, if local.len() > 3 { 2 } else { 1 });
                let excerpt = format!("{shown}***@***.{tld}");
                hits.push(Hit { start, end, kind: FindingKind::Email, excerpt });
            }
        }
    }
}

/// Credentials.
mod token {
    use super::text::{at, before, find_ignore_case, prefix, run_end, run_start, runs, slice};
    use super::{FindingKind, Hit};

    /// Prefixes of well-known API tokens.
    const PREFIXES: &[&str] = &[
        "github_pat_",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "glpat-",
        "hf_",
        "sk-",
        "sk_live_",
        "sk_test_",
        "rk_live_",
        "pk_live_",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xoxr-",
        "xoxs-",
        "AIza",
        "npm_",
        "pypi-",
        "dop_v1_",
    ];

    /// Prefixes of AWS access key ids.
    const AWS: &[&str] = &["AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "ABIA", "ACCA"];

    /// Names (as suffixes of an identifier) whose value is a secret.
    const SECRET_KEYS: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "secret",
        "apikey",
        "api_key",
        "api-key",
        "access_key",
        "accesskey",
        "secret_key",
        "private_key",
        "privatekey",
        "credential",
        "credentials",
        "authorization",
    ];

    /// Names whose value is a secret when it looks like one.
    const TOKEN_KEYS: &[&str] = &["token", "bearer", "session_id", "sessionid", "cookie"];

    fn is_token_char(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')
    }

    fn counts(s: &str) -> (usize, usize, usize) {
        let upper = s.bytes().filter(u8::is_ascii_uppercase).count();
        let lower = s.bytes().filter(u8::is_ascii_lowercase).count();
        let digit = s.bytes().filter(u8::is_ascii_digit).count();
        (upper, lower, digit)
    }

    pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
        let bytes = text.as_bytes();
        bearer(text, bytes, hits);
        for (start, end) in runs(bytes, is_token_char) {
            let word = slice(text, start, end);
            aws(word, start, end, hits);
            prefixed(word, start, end, hits);
        }
        for (start, end) in runs(bytes, |b| is_token_char(b) || b == b'.') {
            jwt(slice(text, start, end), start, end, hits);
        }
        for (start, end) in runs(bytes, |b| b.is_ascii_alphanumeric()) {
            hex(slice(text, start, end), start, end, hits);
        }
        for (start, end) in runs(bytes, |b| is_token_char(b) || matches!(b, b'+' | b'/')) {
            let end = end + bytes.get(end..).map_or(0, |rest| rest.iter().take(2).take_while(|&&b| b == b'=').count());
            base64(slice(text, start, end), start, end, hits);
        }
        assignments(text, bytes, hits);
        private_keys(text, hits);
        url_credentials(text, bytes, hits);
    }

    /// `Bearer <token>`, in any case.
    fn bearer(text: &str, bytes: &[u8], hits: &mut Vec<Hit>) {
        for start in find_ignore_case(bytes, b"bearer") {
            if before(bytes, start).is_ascii_alphanumeric() {
                continue;
            }
            let gap = run_end(bytes, start + 6, |b| matches!(b, b' ' | b'\t' | b':' | b'='));
            if gap == start + 6 {
                continue;
            }
            let end = run_end(bytes, gap, |b| b.is_ascii_alphanumeric() || b"._~+/=-".contains(&b));
            if end - gap >= 8 {
                let shown = slice(text, start, start + 6);
                hits.push(Hit { start, end, kind: FindingKind::Token, excerpt: format!("{shown} ***") });
            }
        }
    }

    /// `AKIA` and 16 uppercase letters or digits.
    fn aws(word: &str, start: usize, end: usize, hits: &mut Vec<Hit>) {
        let shaped = word.len() == 20 && word.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        if shaped && AWS.iter().any(|p| word.starts_with(p)) {
            hits.push(Hit { start, end, kind: FindingKind::Token, excerpt: format!("{}***", prefix(word, 4)) });
        }
    }

    /// `ghp_…`, `sk-…` and other well-known prefixes, followed by 20
    /// characters or more that mix letters and digits (or cases).
    fn prefixed(word: &str, start: usize, end: usize, hits: &mut Vec<Hit>) {
        for p in PREFIXES {
            let Some(rest) = word.strip_prefix(p) else { continue };
            let (upper, lower, digit) = counts(rest);
            let separators = rest.bytes().filter(|b| matches!(b, b'_' | b'-')).count();
            let mixed = (digit > 0 && upper + lower > 0) || (upper > 0 && lower > 0);
            if rest.len() >= 20 && mixed && separators <= 3 {
                hits.push(Hit { start, end, kind: FindingKind::Token, excerpt: format!("{p}***") });
                return;
            }
        }
    }

    /// `eyJ….eyJ….sig` (a JWT), or three long segments that each mix
    /// letters and digits.
    fn jwt(run: &str, start: usize, end: usize, hits: &mut Vec<Hit>) {
        let parts: Vec<&str> = run.split('.').collect();
        let [a, b, c] = parts.as_slice() else { return };
        let jwt = a.starts_with("eyJ") && a.len() >= 10 && b.len() >= 4;
        let random = [a, b, c].iter().all(|part| {
            let (upper, lower, digit) = counts(part);
            part.len() >= 16 && digit > 0 && upper > 0 && lower > 0
        });
        if jwt || random {
            let excerpt = format!("{}***.***.***", prefix(a, 3));
            hits.push(Hit { start, end, kind: FindingKind::Token, excerpt });
        }
    }

    /// 32 hex digits or more, with both digits and letters.
    fn hex(word: &str, start: usize, end: usize, hits: &mut Vec<Hit>) {
        let digits = word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")).unwrap_or(word);
        let all_hex = digits.bytes().all(|b| b.is_ascii_hexdigit());
        let has_digit = digits.bytes().any(|b| b.is_ascii_digit());
        let has_letter = digits.bytes().any(|b| b.is_ascii_alphabetic());
        if digits.len() >= 32 && all_hex && has_digit && has_letter {
            let excerpt = format!("{}*** ({} hex digits)", prefix(digits, 4), digits.len());
            hits.push(Hit { start, end, kind: FindingKind::Token, excerpt });
        }
    }

    /// 32 base64 characters or more that look random: both cases and
    /// digits, frequent switches between them, few lowercase words (which
    /// identifiers such as `Float32MatmulTiling2DConfig` are made of).
    fn base64(run: &str, start: usize, end: usize, hits: &mut Vec<Hit>) {
        let body = run.trim_end_matches('=');
        if body.len() < 32 {
            return;
        }
        let (upper, lower, digit) = counts(body);
        if upper < 2 || lower < 2 || digit < 1 {
            return;
        }
        let class = |b: u8| match b {
            b'A'..=b'Z' => 0,
            b'a'..=b'z' => 1,
            b'0'..=b'9' => 2,
            _ => 3,
        };
        let alnum: Vec<u8> = body.bytes().filter(u8::is_ascii_alphanumeric).collect();
        let switches = alnum.windows(2).filter(|w| class(w[0]) != class(w[1])).count();
        let switch_rate = switches as f64 / (alnum.len().saturating_sub(1).max(1)) as f64;
        // Share of the run in lowercase stretches of 3 letters or more:
        // high for identifiers made of words, low for random text.
        let in_words: usize =
            runs(body.as_bytes(), |b| b.is_ascii_lowercase()).into_iter().map(|(s, e)| e - s).filter(|&n| n >= 3).sum();
        let word_share = in_words as f64 / body.len() as f64;
        if (switch_rate >= 0.45 && word_share <= 0.45) || (switch_rate >= 0.3 && word_share <= 0.2) {
            let excerpt = format!("{}*** ({} characters)", prefix(body, 4), body.len());
            hits.push(Hit { start, end, kind: FindingKind::Token, excerpt });
        }
    }

    /// Whether `value`, assigned to a secret-sounding name, is a
    /// placeholder rather than a secret (or already masked, `***`).
    fn is_placeholder(value: &str) -> bool {
        let lower = value.to_ascii_lowercase();
        let trimmed = lower.trim_matches(|c| matches!(c, '<' | '>' | '[' | ']' | '(' | ')'));
        matches!(
            trimmed,
            "" | "true"
                | "false"
                | "none"
                | "null"
                | "nil"
                | "redacted"
                | "hidden"
                | "masked"
                | "unset"
                | "empty"
                | "required"
                | "optional"
        ) || value.contains("***")
            || value.starts_with('$')
            || value.starts_with("{{")
            || value.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '•' | '.' | '#' | '?'))
    }

    /// Whether `value` under the name `key` is a secret; `None` when `key`
    /// does not sound secret.
    pub(super) fn secret_assignment(key: &str, value: &str) -> Option<bool> {
        let key = key.to_ascii_lowercase();
        let value = value.trim();
        if SECRET_KEYS.iter().any(|k| key.ends_with(k)) {
            return Some(value.chars().count() >= 3 && !is_placeholder(value));
        }
        if TOKEN_KEYS.iter().any(|k| key.ends_with(k)) {
            let (upper, lower, digit) = counts(value);
            let long = value.len() >= 16 || (value.len() >= 8 && digit > 0 && upper + lower > 0);
            let one_word = !value.contains(char::is_whitespace);
            return Some(long && one_word && !is_placeholder(value) && !value.starts_with('<'));
        }
        None
    }

    /// `password=…`, `api_key: "…"`, `"token": "…"`.
    fn assignments(text: &str, bytes: &[u8], hits: &mut Vec<Hit>) {
        let is_key = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
        for (sep, _) in text.match_indices(['=', ':']) {
            if at(bytes, sep) == b':' && (at(bytes, sep + 1) == b':' || before(bytes, sep) == b':') {
                continue;
            }
            let mut key_end = run_start(bytes, sep, |b| b == b' ');
            if matches!(before(bytes, key_end), b'"' | b'\'') {
                key_end -= 1;
            }
            let key_start = run_start(bytes, key_end, is_key);
            let key = slice(text, key_start, key_end);
            if key.is_empty() {
                continue;
            }
            let mut value_start = run_end(bytes, sep + 1, |b| b == b' ');
            let quote = at(bytes, value_start);
            if matches!(quote, b'"' | b'\'') {
                value_start += 1;
            }
            let mut value_end = value_start;
            while value_end < bytes.len() && value_end - value_start < 256 {
                let b = at(bytes, value_end);
                if b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b',' | b';' | b'&' | b')' | b'}' | b']') {
                    break;
                }
                value_end += 1;
            }
            let value = slice(text, value_start, value_end);
            if secret_assignment(key, value) == Some(true) {
                let excerpt = format!("{}=***", prefix(key, 32));
                hits.push(Hit { start: key_start, end: value_end, kind: FindingKind::Token, excerpt });
            }
        }
    }

    /// `-----BEGIN RSA PRIVATE KEY-----` and the like.
    fn private_keys(text: &str, hits: &mut Vec<Hit>) {
        for (start, _) in text.match_indices("-----BEGIN ") {
            let header_end = text.get(start..).and_then(|rest| rest.get(11..)?.find("-----")).map(|i| start + 11 + i);
            let Some(header_end) = header_end else { continue };
            let header = slice(text, start, header_end);
            // `***` is an excerpt of ours, already masked.
            if header.ends_with("PRIVATE KEY") && !header.contains("***") {
                let excerpt = "-----BEGIN *** PRIVATE KEY-----".to_owned();
                hits.push(Hit { start, end: header_end + 5, kind: FindingKind::Token, excerpt });
            }
        }
    }

    /// `scheme://user:password@host`.
    fn url_credentials(text: &str, bytes: &[u8], hits: &mut Vec<Hit>) {
        let is_user = |b: u8| !(b.is_ascii_whitespace() || matches!(b, b'/' | b'@' | b':' | b'"' | b'\''));
        for (scheme_end, _) in text.match_indices("://") {
            let user_start = scheme_end + 3;
            let user_end = run_end(bytes, user_start, is_user);
            if user_end == user_start || at(bytes, user_end) != b':' || user_end - user_start > 256 {
                continue;
            }
            let pass_end = run_end(bytes, user_end + 1, |b| is_user(b) || b == b':');
            let password = slice(text, user_end + 1, pass_end);
            // `***` is an excerpt of ours, already masked.
            let masked = password.bytes().all(|b| b == b'*');
            if !password.is_empty() && !masked && at(bytes, pass_end) == b'@' && pass_end - user_end <= 256 {
                let scheme_start =
                    run_start(bytes, scheme_end, |b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
                let scheme = slice(text, scheme_start, scheme_end);
                let user = slice(text, user_start, user_end);
                let excerpt = format!("{scheme}://{}:***@", super::text::mask(user));
                hits.push(Hit { start: scheme_start, end: pass_end + 1, kind: FindingKind::Token, excerpt });
            }
        }
    }
}

/// Paths in home directories.
mod home {
    use super::text::{at, before, find_ignore_case, mask, run_end, slice};
    use super::{FindingKind, Hit};

    /// Bytes that end a path component.
    fn ends_component(b: u8) -> bool {
        b.is_ascii_whitespace()
            || matches!(b, b'/' | b'\\' | b'"' | b'\'' | b'`' | b',' | b';' | b')' | b']' | b'}' | b'>')
    }

    /// Whether a path may start at `i`: not in the middle of a word or of
    /// another path (`/opt/home/x` is not a home directory).
    fn starts_path(bytes: &[u8], i: usize) -> bool {
        let b = before(bytes, i);
        !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'~' | b'$' | b'\\'))
    }

    /// The user component at `start`, if there is a real one.
    fn user(text: &str, start: usize) -> Option<(&str, usize)> {
        let bytes = text.as_bytes();
        let end = run_end(bytes, start, |b| !ends_component(b));
        let name = slice(text, start, end);
        // `al***` is an excerpt of ours, already masked.
        let real = !name.is_empty() && !name.contains('*') && name != "." && name != "..";
        real.then_some((name, end))
    }

    /// Whether `text` ends with `/mnt/X`, a WSL drive mount.
    fn is_wsl_drive(text: &str) -> bool {
        let bytes = text.as_bytes();
        bytes.len() >= 6
            && bytes.get(bytes.len() - 6..bytes.len() - 1) == Some(b"/mnt/".as_slice())
            && bytes.last().is_some_and(u8::is_ascii_alphabetic)
    }

    pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
        let bytes = text.as_bytes();
        for (dir, exclude) in [("/home/", &["" as &str][..]), ("/Users/", &["Shared", "Public"][..])] {
            for (start, _) in text.match_indices(dir) {
                // `/var/home/USER` (Fedora Atomic), `/mnt/c/Users/USER` (WSL).
                let before_dir = text.get(..start).unwrap_or("");
                let var_home = dir == "/home/" && before_dir.ends_with("/var");
                let wsl = dir == "/Users/" && is_wsl_drive(before_dir);
                if !(starts_path(bytes, start) || var_home || wsl) {
                    continue;
                }
                let Some((name, end)) = user(text, start + dir.len()) else { continue };
                if exclude.contains(&name) {
                    continue;
                }
                let more = if at(bytes, end) == b'/' { "/…" } else { "" };
                let excerpt = format!("{dir}{}{more}", mask(name));
                hits.push(Hit { start, end, kind: FindingKind::HomePath, excerpt });
            }
        }
        for (dir, shown) in [("/root/", "/root/***"), ("~/", "~/***")] {
            for (start, _) in text.match_indices(dir) {
                if starts_path(bytes, start) && user(text, start + dir.len()).is_some() {
                    let end = run_end(bytes, start, |b| !b.is_ascii_whitespace());
                    hits.push(Hit { start, end, kind: FindingKind::HomePath, excerpt: shown.to_owned() });
                }
            }
        }
        // C:\Users\NAME, C:/Users/NAME, C:\\Users\\NAME
        for users in find_ignore_case(bytes, b"users") {
            let seps_before = users - super::text::run_start(bytes, users, |b| b == b'\\' || b == b'/');
            let colon = users - seps_before;
            let drive = colon.wrapping_sub(2);
            let drive_ok = seps_before >= 1
                && before(bytes, colon) == b':'
                && at(bytes, drive).is_ascii_alphabetic()
                && !before(bytes, drive).is_ascii_alphanumeric();
            let after = run_end(bytes, users + 5, |b| b == b'\\' || b == b'/');
            if !drive_ok || after == users + 5 {
                continue;
            }
            let Some((name, end)) = user(text, after) else { continue };
            if matches!(name, "Public" | "Default" | "All Users") {
                continue;
            }
            let prefix = slice(text, drive, after);
            hits.push(Hit {
                start: drive,
                end,
                kind: FindingKind::HomePath,
                excerpt: format!("{prefix}{}", mask(name)),
            });
        }
    }
}

/// Content of the program's input.
mod input {
    use super::text::{at, before, mask, prefix};
    use super::{FindingKind, Hit};

    /// Common English function words.
    const FUNCTION_WORDS: &[&str] = &[
        "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "from", "by", "as", "is",
        "are", "was", "were", "be", "been", "it", "its", "this", "that", "these", "those", "i", "you", "he", "she",
        "we", "they", "me", "him", "her", "us", "them", "my", "your", "his", "our", "their", "what", "which", "who",
        "when", "where", "why", "how", "do", "does", "did", "have", "has", "had", "will", "would", "can", "could",
        "should", "there", "then", "than", "so", "if", "very", "just", "about", "into", "over", "after", "before",
    ];

    /// Long natural-language text.
    pub(super) fn find_prose(text: &str, hits: &mut Vec<Hit>) {
        if text.chars().count() <= 48 {
            return;
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.len() < 8 {
            return;
        }
        let plain: Vec<String> = words
            .iter()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_alphabetic() || c == '\'' || c == '-'))
            .map(str::to_lowercase)
            .collect();
        if plain.len() * 10 < words.len() * 7 {
            return;
        }
        let mut function_words: Vec<&str> =
            plain.iter().map(String::as_str).filter(|w| FUNCTION_WORDS.contains(w)).collect();
        function_words.sort_unstable();
        function_words.dedup();
        if function_words.len() >= 3 {
            // The first plain word, masked: the text may hold anything.
            let first = mask(prefix(plain.first().map_or("", String::as_str), 12));
            let excerpt = format!("\"{first} …\" ({} words)", words.len());
            hits.push(Hit { start: 0, end: text.len(), kind: FindingKind::InputContent, excerpt });
        }
    }

    fn is_separator(b: u8) -> bool {
        matches!(b, b',' | b';' | b' ' | b'\t' | b'\n' | b'\r')
    }

    /// The end of the number starting at `i`, if one does: digits with an
    /// optional sign, fraction and exponent, standing alone.
    fn number_at(bytes: &[u8], i: usize) -> Option<usize> {
        let stands_alone = |b: u8| b == 0 || is_separator(b) || matches!(b, b'[' | b']' | b'(' | b')' | b'{' | b'}');
        if !stands_alone(before(bytes, i)) {
            return None;
        }
        let mut j = i;
        if matches!(at(bytes, j), b'-' | b'+') {
            j += 1;
        }
        let digits_start = j;
        while at(bytes, j).is_ascii_digit() || at(bytes, j) == b'.' {
            j += 1;
        }
        if !bytes.get(digits_start..j).is_some_and(|d| d.iter().any(u8::is_ascii_digit)) {
            return None;
        }
        if matches!(at(bytes, j), b'e' | b'E') {
            let mut k = j + 1;
            if matches!(at(bytes, k), b'-' | b'+') {
                k += 1;
            }
            if at(bytes, k).is_ascii_digit() {
                while at(bytes, k).is_ascii_digit() {
                    k += 1;
                }
                j = k;
            }
        }
        stands_alone(at(bytes, j)).then_some(j)
    }

    /// Lists of 8 numbers or more: `[0.12, 0.5, 0.33, …]`, `1 2 3 4 5 6 7 8`.
    pub(super) fn find_numbers(text: &str, hits: &mut Vec<Hit>) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let Some(first_end) = number_at(bytes, i) else {
                i += 1;
                continue;
            };
            let start = i;
            let mut numbers = vec![(i, first_end)];
            let mut end = first_end;
            loop {
                let mut next = end;
                while next < bytes.len() && is_separator(at(bytes, next)) {
                    next += 1;
                }
                match (next > end).then(|| number_at(bytes, next)).flatten() {
                    Some(e) => {
                        numbers.push((next, e));
                        end = e;
                    }
                    None => break,
                }
            }
            if numbers.len() >= 8 {
                let shown: Vec<&str> = numbers.iter().take(2).map(|&(s, e)| super::text::slice(text, s, e)).collect();
                let excerpt = format!("[{}, …] ({} numbers)", shown.join(", "), numbers.len());
                hits.push(Hit { start, end, kind: FindingKind::InputContent, excerpt });
            }
            i = end.max(i + 1);
        }
    }
}

/// Metadata keys whose values are diagnostics written by tools (ours among
/// them), which read like prose without being input.
const DIAGNOSTIC_KEYS: &[&str] = &[
    "partial_reason",
    "label_warnings",
    "backend",
    "reason",
    "error",
    "errors",
    "warning",
    "warnings",
    "note",
    "notes",
    "message",
    "description",
    "meaning",
];

/// Whether a metadata key names a diagnostic: one of [`DIAGNOSTIC_KEYS`],
/// alone or as a suffix (`fallback_reason`, `sync_meaning`).
fn is_diagnostic(key: &str) -> bool {
    DIAGNOSTIC_KEYS
        .iter()
        .any(|k| key == *k || key.strip_suffix(k).is_some_and(|head| head.ends_with('_') || head.ends_with('.')))
}

/// Arrays of this many numbers or more in event arguments are input
/// content.
const NUMERIC_ARRAY: usize = 16;

/// Where a string sits in a trace.
#[derive(Clone, Copy)]
enum Base<'a> {
    Event(usize),
    ThreadName(Option<&'a TrackId>),
    ProcessName(Option<&'a TrackId>),
    Metadata,
}

/// One step of a path into a JSON value.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Scans every label of a trace: event names, categories, string ids, arg
/// keys and string values (recursively), thread and process names, and the
/// keys and strings of the metadata.
///
/// Each distinct offending string is reported once, at its first location
/// (events in order, then the metadata). In the metadata, the natural-language
/// check is skipped for diagnostic entries (`partial_reason`,
/// `label_warnings`, `backend`, `error`, `reason`, ...), which are prose by
/// design.
///
/// # Examples
///
/// ```
/// use steptrace::hygiene::{scan_trace, FindingKind};
/// use steptrace::reader::parse_trace;
///
/// let trace = parse_trace(br#"{"traceEvents":[
///     {"ph":"X","name":"train.step","ts":0,"dur":5,"args":{"user":"bob@corp.example.com"}},
///     {"ph":"M","name":"thread_name","tid":4,"args":{"name":"/home/bob/run"}}
/// ],"metadata":{"manifest":{"data_path":"~/datasets/private"}}}"#)?;
/// let findings = scan_trace(&trace);
/// let located: Vec<(&str, FindingKind)> =
///     findings.iter().map(|f| (f.location.as_str(), f.finding.kind)).collect();
/// assert_eq!(
///     located,
///     [
///         ("event 0 args.user", FindingKind::Email),
///         ("thread name tid 4", FindingKind::HomePath),
///         ("metadata.manifest.data_path", FindingKind::HomePath),
///     ]
/// );
/// # Ok::<(), steptrace::reader::ReadError>(())
/// ```
#[must_use]
pub fn scan_trace(trace: &Trace) -> Vec<LocatedFinding> {
    let mut scanner = Scanner::default();
    for (index, event) in trace.events.iter().enumerate() {
        scanner.event(index, event);
    }
    let mut path = Vec::new();
    for (key, value) in &trace.metadata {
        path.push(Step::Key(key.as_str()));
        scanner.key(Base::Metadata, &path, key, Checks::ALL);
        scanner.value(Base::Metadata, &mut path, value, Checks::ALL);
        path.pop();
    }
    scanner.found
}

/// Bounds the memory spent remembering strings already checked.
const SEEN_CAP: usize = 1 << 20;

#[derive(Default)]
struct Scanner<'a> {
    seen: HashSet<(&'a str, Checks)>,
    seen_pairs: HashSet<(&'a str, &'a str)>,
    seen_arrays: HashSet<String>,
    found: Vec<LocatedFinding>,
}

impl<'a> Scanner<'a> {
    fn event(&mut self, index: usize, event: &'a TraceEvent) {
        let base = Base::Event(index);
        self.field(base, "name", &event.name);
        if let Some(cat) = &event.cat {
            self.field(base, "cat", cat);
        }
        for (field, id) in [("pid", &event.pid), ("tid", &event.tid), ("id", &event.id)] {
            if let Some(TrackId::Str(id)) = id {
                self.field(base, field, id);
            }
        }
        let Some(args) = &event.args else { return };
        let mut path = vec![Step::Key("args")];
        let Value::Object(map) = args else {
            self.value(base, &mut path, args, Checks::ALL);
            return;
        };
        for (key, value) in map {
            let name_base = match (event.ph.as_str(), event.name.as_str(), key.as_str()) {
                ("M", "thread_name", "name") => Some(Base::ThreadName(event.tid.as_ref())),
                ("M", "process_name", "name") => Some(Base::ProcessName(event.pid.as_ref())),
                _ => None,
            };
            if let (Some(name_base), Value::String(name)) = (name_base, value) {
                self.text(name_base, &[], name, Checks::ALL, false);
                continue;
            }
            path.push(Step::Key(key.as_str()));
            self.key(base, &path, key, Checks::ALL);
            self.value(base, &mut path, value, Checks::ALL);
            path.pop();
        }
    }

    fn field(&mut self, base: Base<'a>, field: &'a str, text: &'a str) {
        self.text(base, &[Step::Key(field)], text, Checks::ALL, false);
    }

    fn key(&mut self, base: Base<'a>, path: &[Step<'a>], key: &'a str, checks: Checks) {
        self.text(base, path, key, checks, true);
    }

    fn value(&mut self, base: Base<'a>, path: &mut Vec<Step<'a>>, value: &'a Value, checks: Checks) {
        match value {
            Value::String(s) => {
                let mut checks = checks;
                if let Some(Step::Key(key)) = path.iter().rev().find(|s| matches!(s, Step::Key(_))) {
                    if matches!(base, Base::Metadata) && is_diagnostic(key) {
                        checks = Checks { prose: false };
                    }
                    self.pair(base, path, key, s);
                }
                self.text(base, path, s, checks, false);
            }
            Value::Array(items) => {
                if !matches!(base, Base::Metadata) {
                    self.numeric_array(base, path, items);
                }
                for (i, item) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    self.value(base, path, item, checks);
                    path.pop();
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    path.push(Step::Key(key.as_str()));
                    self.key(base, path, key, checks);
                    self.value(base, path, item, checks);
                    path.pop();
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// A string value under a secret-sounding key: `"api_key": "..."`.
    fn pair(&mut self, base: Base<'a>, path: &[Step<'a>], key: &'a str, value: &'a str) {
        if token::secret_assignment(key, value) != Some(true) || !self.seen_pairs.insert((key, value)) {
            return;
        }
        let excerpt = format!("{}=***", text::prefix(key, 32));
        self.push(base, path, false, Finding { kind: FindingKind::Token, excerpt });
    }

    fn numeric_array(&mut self, base: Base<'a>, path: &[Step<'a>], items: &[Value]) {
        if items.len() < NUMERIC_ARRAY || !items.iter().all(Value::is_number) {
            return;
        }
        // Once per place in the arguments, not once per event.
        let place = location(Base::Metadata, path, false);
        if !self.seen_arrays.insert(place) {
            return;
        }
        let shown: Vec<String> = items.iter().take(2).map(ToString::to_string).collect();
        let excerpt = format!("[{}, …] ({} numbers)", shown.join(", "), items.len());
        self.push(base, path, false, Finding { kind: FindingKind::InputContent, excerpt });
    }

    fn text(&mut self, base: Base<'a>, path: &[Step<'a>], text: &'a str, checks: Checks, is_key: bool) {
        if text.is_empty() {
            return;
        }
        if self.seen.len() < SEEN_CAP {
            if !self.seen.insert((text, checks)) {
                return;
            }
        } else if self.seen.contains(&(text, checks)) {
            return;
        }
        for finding in check(text, checks) {
            self.push(base, path, is_key, finding);
        }
    }

    fn push(&mut self, base: Base<'a>, path: &[Step<'a>], is_key: bool, finding: Finding) {
        self.found.push(LocatedFinding { location: location(base, path, is_key), finding });
    }
}

/// `event 3 args.user`, `metadata.manifest.data_path`, `thread name tid 4`.
fn location(base: Base<'_>, path: &[Step<'_>], is_key: bool) -> String {
    let mut out = match base {
        Base::Event(index) => format!("event {index}"),
        Base::ThreadName(tid) => format!("thread name tid {}", tid.map_or_else(|| "?".to_owned(), ToString::to_string)),
        Base::ProcessName(pid) => {
            format!("process name pid {}", pid.map_or_else(|| "?".to_owned(), ToString::to_string))
        }
        Base::Metadata => String::new(),
    };
    for (i, step) in path.iter().enumerate() {
        match step {
            Step::Key(key) if i == 0 && !out.is_empty() => {
                out.push(' ');
                out.push_str(key);
            }
            Step::Key(key) if i == 0 => out.push_str(key),
            Step::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Index(index) => {
                let _ = write!(out, "[{index}]");
            }
        }
    }
    if is_key {
        out.push_str(" (key)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_trace;

    fn kinds(text: &str) -> Vec<FindingKind> {
        check_label(text).into_iter().map(|f| f.kind).collect()
    }

    #[test]
    fn ordinary_labels_are_clean() {
        let clean = [
            "ProfilerStep#12",
            "train.step",
            "transfer.h2d",
            "cubecl_runtime::client::launch_inner",
            "burn_fusion::stream::execution::ExecutionMode",
            "kernel.name",
            "fusion<cubecl<cuda>>",
            "FusionBackend<CubeBackend<CudaRuntime, f32, i32, u8>>",
            "0x7f3a2b1c4d5e6f70",
            "7f3a2b1c4d5e6f70",
            "deadbeef",
            "0.21.0",
            "v1.2.3-rc.1",
            "1.85",
            "wait=1,warmup=1,active=2,repeat=2",
            "skip_first=10,wait=1,warmup=1,active=3,repeat=0",
            "linux",
            "macos",
            "windows",
            "x86_64",
            "aarch64",
            "steptrace 0.1.0",
            "steptrace-chrome-trace/1",
            "wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)",
            "cuda:0",
            "wgpu<vulkan>",
            "ndarray",
            "/usr/local/cuda/include",
            "/usr/local/cuda-12.4/targets/x86_64-linux/include/cuda_runtime.h",
            "/opt/home/shared/data",
            "/homework/report",
            "/mnt/data/Users/list",
            "-----BEGIN CERTIFICATE-----",
            "/home",
            "/root",
            "~",
            "shape=[32, 128, 768]",
            "[1, 3, 224, 224]",
            "strides=[150528, 50176, 224, 1]",
            "max_tokens=512",
            "num_tokens: 1024",
            "tokenizer=bpe",
            "pad_token=<pad>",
            "eos_token=</s>",
            "password_length=12",
            "require_password=false",
            "password=***",
            "api_key=${API_KEY}",
            "token: <redacted>",
            "user@host",
            "model@v2",
            "torch@2.1.0",
            "@torch.no_grad",
            "123e4567-e89b-12d3-a456-426614174000",
            "Float32MatmulTiling2DConfigV3Autotune",
            "MatmulTuneKeyCubeFusionOptimizationV2x86",
            "layers.0.attention.query.weight",
            "aten::convolution",
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            "Memcpy HtoD (Pageable -> Device)",
            "ampere_sgemm_128x64_tn",
            "the profiler finished inside the cycle: 1 of 2 active steps recorded",
            "2024-05-01T12:30:45.123Z",
            "epoch 3 step 120 loss 0.4312 lr 0.0003",
            "http://localhost:8080/metrics",
            "mask-rcnn",
            "hf_transformers_model_loader_function",
            "sk-learn",
            "Bearer",
            "bearer token missing",
            "",
        ];
        for label in clean {
            assert_eq!(check_label(label), [], "{label:?}");
        }
    }

    #[test]
    fn secrets_paths_and_content_are_found() {
        use FindingKind::*;
        let cases: &[(&str, &[FindingKind])] = &[
            ("alice@example.org", &[Email]),
            ("contact: bob.smith+ml@research.lab.co.uk.", &[Email]),
            ("Authorization: Bearer abcdef0123456789", &[Token]),
            ("bearer:eyJhbGciOiJIUzI1NiJ9", &[Token]),
            ("AKIAIOSFODNN7EXAMPLE", &[Token]),
            ("key=ASIAY34FZKBOKMUTVV7A", &[Token]),
            ("ghp_1234567890abcdefghijABCDEFGHIJ123456", &[Token]),
            ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678", &[Token]),
            ("sk-proj-4f9Kx2Lm8Qp1Zr7Tv3Wy6Bn0", &[Token]),
            ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", &[Token]),
            ("password=hunter2", &[Token]),
            ("db.password: s3cr3t!", &[Token]),
            (r#"{"api_key": "abc123def456"}"#, &[Token]),
            ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", &[Token]),
            ("access_token=ya29a0AfH6SMBx7abc", &[Token]),
            ("https://example.com/x?session_token=Zx81Yq0p2rt6&user=1", &[Token]),
            ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", &[Token]),
            ("sha 3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c", &[Token]),
            ("0x3f2a9b1c4d5e6f708192a3b4c5d6e7f8", &[Token]),
            ("blob wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", &[Token]),
            ("q8Zp3/Xv7Lk2+Rt9Wm4Yb1Nc6Hd0Jf5Gs8Tu2Ve7A", &[Token]),
            ("password=alice@example.org", &[Token]),
            ("dGhpcyBpcyBhIHNlY3JldCB0b2tlbiAxMjM0NTY3ODkw==", &[Token]),
            ("postgres://admin:pa55w0rd@db.internal:5432/app", &[Token]),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n", &[Token]),
            ("/mnt/c/Users/ivan/data", &[HomePath]),
            ("/home/alice/projects/run.py", &[HomePath]),
            ("loading /home/bob", &[HomePath]),
            ("file:///home/carol/x.json", &[HomePath]),
            ("/var/home/dave/data", &[HomePath]),
            ("/root/.cache/huggingface", &[HomePath]),
            ("/Users/erin/Library/data.csv", &[HomePath]),
            (r"C:\Users\frank\Documents\train.csv", &[HomePath]),
            (r"c:\\users\\grace\\x", &[HomePath]),
            ("C:/Users/heidi/x", &[HomePath]),
            ("data_path=~/datasets/private", &[HomePath]),
            ("The quick brown fox jumps over the lazy dog and then runs into the forest", &[InputContent]),
            ("I really loved this movie, the acting was great and I would watch it again!", &[InputContent]),
            ("embedding [0.12, 0.5, 0.33, 0.91, -0.2, 1e-3, 0.07, 0.66, ...]", &[InputContent]),
            ("tokens=[101, 2054, 2003, 1996, 3007, 1997, 2605, 102]", &[InputContent]),
            ("1 2 3 4 5 6 7 8 9", &[InputContent]),
            ("mail alice@example.org from /home/alice/inbox", &[Email, HomePath]),
        ];
        for &(label, expected) in cases {
            assert_eq!(kinds(label), expected, "{label:?}: {:?}", check_label(label));
        }
    }

    #[test]
    fn excerpts_mask_the_secret() {
        let cases = [
            ("alice@example.org", "al***@***.org"),
            ("al@example.org", "a***@***.org"),
            ("password=hunter2", "password=***"),
            ("Authorization: Bearer abcdef0123456789", "Authorization=***"),
            ("Bearer abcdef0123456789", "Bearer ***"),
            ("AKIAIOSFODNN7EXAMPLE", "AKIA***"),
            ("ghp_1234567890abcdefghijABCDEFGHIJ123456", "ghp_***"),
            ("/home/alice/projects/run.py", "/home/al***/…"),
            ("/home/bob", "/home/b***"),
            ("/root/.cache", "/root/***"),
            ("~/data", "~/***"),
            (r"C:\Users\frank\x", r"C:\Users\fr***"),
            ("postgres://admin:pa55w0rd@db", "postgres://ad***:***@"),
            ("mongodb+srv://user:hunter2@cluster0.example.net", "mongodb+srv://us***:***@"),
            ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN *** PRIVATE KEY-----"),
            ("3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c", "3f2a*** (40 hex digits)"),
            ("[0.12, 0.5, 0.33, 0.91, -0.2, 1e-3, 0.07, 0.66]", "[0.12, 0.5, …] (8 numbers)"),
            ("The quick brown fox jumps over the lazy dog and then runs into the forest", "\"t*** …\" (15 words)"),
        ];
        for (label, excerpt) in cases {
            let findings = check_label(label);
            assert_eq!(findings.first().map(|f| f.excerpt.as_str()), Some(excerpt), "{label:?}: {findings:?}");
        }
    }

    #[test]
    fn excerpts_never_trigger_findings_themselves() {
        let labels = [
            "alice@example.org",
            "password=hunter2",
            "Bearer abcdef0123456789",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
            "/home/alice/projects/run.py",
            "/Users/erin/x",
            "/root/.cache",
            "~/data",
            r"C:\Users\frank\x",
            "postgres://admin:pa55w0rd@db",
            "-----BEGIN EC PRIVATE KEY-----",
            "3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c",
            "dGhpcyBpcyBhIHNlY3JldCB0b2tlbiAxMjM0NTY3ODkw==",
            "[0.12, 0.5, 0.33, 0.91, -0.2, 1e-3, 0.07, 0.66]",
            "The quick brown fox jumps over the lazy dog and then runs into the forest",
        ];
        for label in labels {
            let findings = check_label(label);
            assert!(!findings.is_empty(), "{label:?}");
            for finding in findings {
                let warning = format!("name looks like {:?}: {}", finding.kind, finding.excerpt);
                assert_eq!(check_label(&warning), [], "{warning:?}");
            }
        }
    }

    fn fragment() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("alice@example.org".to_owned()),
            Just("password=hunter2".to_owned()),
            Just("Bearer abcdef0123456789".to_owned()),
            Just("AKIAIOSFODNN7EXAMPLE".to_owned()),
            Just("/home/bob/x".to_owned()),
            Just("C:\\Users\\carol".to_owned()),
            Just("~/data".to_owned()),
            Just("https://u:p@h.io".to_owned()),
            Just("3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c".to_owned()),
            Just("1, 2, 3, 4, 5, 6, 7, 8".to_owned()),
            Just("the cat and the dog went to the park with a ball".to_owned()),
            "[ -~]{0,12}",
            any::<String>(),
        ]
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_checked_without_panicking(text in proptest::prelude::any::<String>()) {
            let _ = check_label(&text);
        }

        #[test]
        fn excerpts_are_short_and_masked(parts in proptest::collection::vec(fragment(), 1..5), glue in "[ ,;=:/]") {
            let text = parts.join(&glue);
            for finding in check_label(&text) {
                proptest::prop_assert!(finding.excerpt.chars().count() <= 64, "{:?}", finding);
                let warning = format!("label looks like {:?}: {}", finding.kind, finding.excerpt);
                proptest::prop_assert_eq!(check_label(&warning), vec![], "{}", warning);
            }
        }
    }

    #[test]
    fn the_fast_path_only_skips_what_no_check_could_flag() {
        assert!(trivially_clean("ProfilerStep#12"));
        assert!(trivially_clean("launch_inner"));
        // The shortest labels each check can flag are not skipped.
        for label in ["a@b.co", "~/x", "/root/x", "pwd:x", "1 2 3 4 5 6 7 8", "eyJhbGciOi.eyJz.", "s=1"] {
            assert!(!trivially_clean(label), "{label}");
        }
        assert_eq!(kinds("eyJhbGciOi.eyJz."), [FindingKind::Token]);
    }

    #[test]
    fn several_findings_come_in_text_order_without_duplicates() {
        let findings = check_label("x@example.com y@example.com password=Bearer abcdefghijkl");
        let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::Email, FindingKind::Email, FindingKind::Token]);
        assert_eq!(findings[2].to_string(), "token or secret: password=***");
    }

    #[test]
    fn odd_input_does_not_panic() {
        let odd = [
            "@",
            "@@@",
            "a@",
            "@b.c",
            ":",
            "::",
            "=",
            "==",
            "://",
            "://a:@",
            "~/",
            "/home/",
            "/home/*",
            "C:",
            "c:\\users",
            "\\\\users\\\\",
            "é@é.é",
            "ü/home/ü",
            "0x",
            "eyJ..",
            "...",
            "-",
            "1e",
            "[",
            "ǅǅǅ=ǅǅǅ password=ǅǅǅ",
        ];
        for text in odd {
            let _ = check_label(text);
        }
        let long = "a".repeat(100_000) + "@" + &"b.".repeat(50_000) + "com";
        assert_eq!(kinds(&long), [FindingKind::Email]);
        let _ = check_label(&"password=".repeat(20_000));
        let _ = check_label(&"1, ".repeat(50_000));
    }

    #[test]
    fn scan_trace_locates_findings() {
        let json = r#"{"traceEvents":[
            {"ph":"M","name":"process_name","pid":1,"args":{"name":"steptrace: worker-0"}},
            {"ph":"M","name":"thread_name","pid":1,"tid":4,"args":{"name":"/home/alice/worker"}},
            {"ph":"B","name":"load alice@example.org","cat":"io","pid":1,"tid":4,"ts":1,
             "args":{"user":"bob@example.com","nested":{"list":["ok","/Users/carol/x"]},"api_key":"zzz123",
                     "/root/secret.txt":1,"embedding":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2,1.3,1.4,1.5,1.6]}},
            {"ph":"E","name":"load alice@example.org","pid":1,"tid":"/home/dan/t","ts":2,
             "args":{"embedding":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2,1.3,1.4,1.5,1.6]}}
        ],
        "metadata":{"manifest":{"data_path":"/home/erin/data","backend":"wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)"},
                    "partial_reason":"the profiler finished early because the user pressed the stop button in the window",
                    "steps":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18],
                    "label_warnings":["name looks like Email: al***@***.org"]},
        "otherData":{"note":"see ~/notes.txt"}}"#;
        let trace = parse_trace(json.as_bytes()).unwrap();
        let mut found: Vec<(String, FindingKind)> =
            scan_trace(&trace).into_iter().map(|f| (f.location, f.finding.kind)).collect();
        // Arguments come in the order of the JSON map, which depends on
        // serde_json's features.
        found.sort();
        let expected = [
            ("event 2 args./root/secret.txt (key)", FindingKind::HomePath),
            ("event 2 args.api_key", FindingKind::Token),
            ("event 2 args.embedding", FindingKind::InputContent),
            ("event 2 args.nested.list[1]", FindingKind::HomePath),
            ("event 2 args.user", FindingKind::Email),
            ("event 2 name", FindingKind::Email),
            ("event 3 tid", FindingKind::HomePath),
            ("metadata.manifest.data_path", FindingKind::HomePath),
            ("otherData.note", FindingKind::HomePath),
            ("thread name tid 4", FindingKind::HomePath),
        ];
        let expected: Vec<(String, FindingKind)> = expected.iter().map(|&(l, k)| (l.to_owned(), k)).collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn scan_trace_reports_each_string_once_and_masks_it() {
        let events: Vec<String> = (0..50)
            .map(|i| format!(r#"{{"ph":"X","name":"user alice@example.org","ts":{i},"dur":1,"args":{{"step":{i}}}}}"#))
            .collect();
        let json = format!("[{}]", events.join(","));
        let trace = parse_trace(json.as_bytes()).unwrap();
        let found = scan_trace(&trace);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].location, "event 0 name");
        assert_eq!(found[0].to_string(), "event 0 name: e-mail address: al***@***.org");
    }

    #[test]
    fn scan_trace_of_a_clean_trace_is_empty() {
        let json = r#"{"traceEvents":[
            {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"steptrace: worker-0"}},
            {"ph":"M","name":"steptrace_segment","pid":1,"tid":0,"args":{"worker":"worker-0","cycle":0,
              "schedule":"wait=1,warmup=1,active=2,repeat=2","steptrace_version":"0.1.0","manifest":{"model":"mlp"}}},
            {"ph":"B","name":"ProfilerStep#2","cat":"steptrace","pid":1,"tid":1,"ts":10,"args":{"step":2}},
            {"ph":"X","name":"cubecl_runtime::client::launch_inner","pid":1,"tid":1,"ts":11,"dur":3,
             "args":{"kernel.name":"fusion<cubecl<cuda>>","shape":"[32, 128, 768]"}},
            {"ph":"E","name":"ProfilerStep#2","pid":1,"tid":1,"ts":20,"args":{"steptrace.clipped":"end"}}
        ],"displayTimeUnit":"ms","metadata":{
            "steptrace_version":"0.1.0","format":"steptrace-chrome-trace/1","host_os":"linux","host_arch":"x86_64",
            "schedule":{"text":"wait=1,warmup=1,active=2,repeat=2","wait":1},
            "steps":[2,3],"expected_steps":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20],
            "partial":true,"partial_reason":"the profiler finished inside the cycle: 1 of 2 active steps recorded",
            "clock":{"ts_unit":"us","epoch_unix_ms":1714567890123},
            "label_warnings":["name looks like Email: al***@***.org","args.path looks like HomePath: /home/al***/…"],
            "manifest":{"model":"mlp","backend":"wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)"}}}"#;
        let trace = parse_trace(json.as_bytes()).unwrap();
        assert_eq!(scan_trace(&trace), []);
    }

    #[test]
    fn location_formats() {
        let tid = TrackId::Num(4);
        assert_eq!(location(Base::Event(3), &[Step::Key("args"), Step::Key("user")], false), "event 3 args.user");
        assert_eq!(location(Base::Event(3), &[Step::Key("args"), Step::Key("user")], true), "event 3 args.user (key)");
        assert_eq!(location(Base::Metadata, &[Step::Key("a"), Step::Index(2), Step::Key("b")], false), "a[2].b");
        assert_eq!(location(Base::ThreadName(Some(&tid)), &[], false), "thread name tid 4");
        assert_eq!(location(Base::ProcessName(None), &[], false), "process name pid ?");
    }
}
