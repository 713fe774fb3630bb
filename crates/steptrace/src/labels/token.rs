//! Credentials: tokens, keys, passwords, secrets in URLs.

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{at, before, find_ignore_case, mask, prefix, run_end, run_start, runs, slice};

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

/// Where a token may start in `word`: at 0 and after each `_` or `-`.
fn segment_starts(word: &str) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0).chain(
        word.bytes().enumerate().filter(|(i, b)| matches!(b, b'_' | b'-') && i + 1 < word.len()).map(|(i, _)| i + 1),
    )
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
        // A token may follow a prefix of its own (`key_AKIA…`, `extra_sk_live_…`): it
        // starts at the word's start or after any `_` or `-` in it.
        for at in segment_starts(word) {
            let rest = &word[at..];
            let segment = rest.find(['_', '-']).unwrap_or(rest.len());
            aws(&rest[..segment], start + at, start + at + segment, hits);
            prefixed(rest, start + at, end, hits);
        }
    }
    for (start, end) in runs(bytes, |b| is_token_char(b) || b == b'.') {
        let run = slice(text, start, end);
        let first = run.find('.').unwrap_or(run.len());
        // A JWT behind a prefix (`id_eyJ…`) starts where its `eyJ` does.
        let at = segment_starts(&run[..first]).find(|&at| run[at..].starts_with("eyJ")).unwrap_or(0);
        jwt(&run[at..], start + at, end, hits);
    }
    for (start, end) in runs(bytes, |b| b.is_ascii_alphanumeric()) {
        hex(slice(text, start, end), start, end, hits);
    }
    for (start, end) in runs(bytes, |b| is_token_char(b) || matches!(b, b'+' | b'/')) {
        let end = end + bytes.get(end..).map_or(0, |rest| rest.iter().take(2).take_while(|&&b| b == b'=').count());
        base64(slice(text, start, end), start, end, hits);
    }
    assignments(text, bytes, hits);
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
            let excerpt = format!("{scheme}://{}:***@", mask(user));
            hits.push(Hit { start: scheme_start, end: pass_end + 1, kind: FindingKind::Token, excerpt });
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::labels::check::{assert_excerpts, assert_kinds};
    use crate::labels::FindingKind::Token;

    #[test]
    fn credentials_are_found() {
        assert_kinds(&[
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
            ("dGhpcyBpcyBhIHNlY3JldCB0b2tlbiAxMjM0NTY3ODkw==", &[Token]),
            ("postgres://admin:pa55w0rd@db.internal:5432/app", &[Token]),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n", &[Token]),
        ]);
    }

    #[test]
    fn tokens_behind_a_prefix_of_their_own_are_found() {
        assert_kinds(&[
            ("key_AKIAIOSFODNN7EXAMPLE", &[Token]),
            ("aws-AKIAIOSFODNN7EXAMPLE_backup", &[Token]),
            ("extra_sk_live_4eC39HqLyjWDarjtT1zdp7dc", &[Token]),
            ("my-ghp_1234567890abcdefghijABCDEFGHIJ123456", &[Token]),
            ("id_eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", &[Token]),
            // Not at a boundary, or not shaped like the token: nothing.
            ("xAKIAIOSFODNN7EXAMPLE", &[]),
            ("key_AKIAIOSFODNN7EXAMPLEX", &[]),
            ("task-learn_rate", &[]),
            ("my_hf_transformers_model_loader_function", &[]),
        ]);
        let clean =
            crate::labels::redact_label("key_AKIAIOSFODNN7EXAMPLE extra_sk_live_4eC39HqLyjWDarjtT1zdp7dc").unwrap();
        assert_eq!(clean, "key_[*** redacted token or secret ***] extra_[*** redacted token or secret ***]");
    }

    #[test]
    fn excerpts_mask_the_credential() {
        assert_excerpts(&[
            ("password=hunter2", "password=***"),
            ("Authorization: Bearer abcdef0123456789", "Authorization=***"),
            ("Bearer abcdef0123456789", "Bearer ***"),
            ("AKIAIOSFODNN7EXAMPLE", "AKIA***"),
            ("ghp_1234567890abcdefghijABCDEFGHIJ123456", "ghp_***"),
            ("postgres://admin:pa55w0rd@db", "postgres://ad***:***@"),
            ("mongodb+srv://user:hunter2@cluster0.example.net", "mongodb+srv://us***:***@"),
            ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN *** PRIVATE KEY-----"),
            ("key_AKIAIOSFODNN7EXAMPLE", "AKIA***"),
            ("extra_sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_***"),
            ("3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c", "3f2a*** (40 hex digits)"),
        ]);
    }
}
