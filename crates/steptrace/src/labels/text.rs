//! Byte-level helpers shared by the detectors.

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

/// The number ASCII `digits` make (other bytes count as digits of their
/// own value; large runs saturate).
pub(super) fn number(digits: &[u8]) -> u64 {
    digits.iter().fold(0u64, |n, &d| n.saturating_mul(10).saturating_add(u64::from(d.wrapping_sub(b'0'))))
}

/// Whether a number may start at `i`: not inside a word, nor after a
/// decimal point (`0.4532…`).
pub(super) fn starts_number(bytes: &[u8], i: usize) -> bool {
    let b = before(bytes, i);
    let decimal = b == b'.' && i >= 2 && before(bytes, i - 1).is_ascii_digit();
    !(b.is_ascii_alphanumeric() || b == b'_' || decimal)
}

/// Whether a number may end at `end`: not inside a word, nor before a
/// decimal point.
pub(super) fn ends_number(bytes: &[u8], end: usize) -> bool {
    let b = at(bytes, end);
    let decimal = b == b'.' && at(bytes, end + 1).is_ascii_digit();
    !(b.is_ascii_alphanumeric() || b == b'_' || decimal)
}

/// A run of ASCII digits, `start..end`, and the separator that joins it to
/// the next run, if one does.
#[derive(Clone, Copy, Debug)]
pub(super) struct DigitRun {
    pub(super) start: usize,
    pub(super) end: usize,
    /// The byte between this run and the next, when it is one of the
    /// separators and the only byte between them.
    pub(super) joint: Option<u8>,
}

impl DigitRun {
    pub(super) fn len(&self) -> usize {
        self.end - self.start
    }
}

/// The runs of ASCII digits in `bytes`, in order, each joined to the next
/// when a single byte of `separators` lies between them (`4111 1111`,
/// `123-45`).
pub(super) fn digit_runs(bytes: &[u8], separators: &[u8]) -> Vec<DigitRun> {
    let mut out: Vec<DigitRun> = Vec::new();
    for (start, end) in runs(bytes, |b| b.is_ascii_digit()) {
        if let Some(prev) = out.last_mut() {
            let between = at(bytes, prev.end);
            if start == prev.end + 1 && separators.contains(&between) {
                prev.joint = Some(between);
            }
        }
        out.push(DigitRun { start, end, joint: None });
    }
    out
}

/// The digits of `runs`, one after another.
pub(super) fn digits_of(bytes: &[u8], runs: &[DigitRun]) -> Vec<u8> {
    runs.iter().flat_map(|r| bytes.get(r.start..r.end).unwrap_or_default().iter().copied()).collect()
}
