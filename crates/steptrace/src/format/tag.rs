//! The thread-tag codec.
//!
//! tracing-chrome numbers threads itself, per Chrome layer, and a thread
//! keeps the number its first layer gave it. steptrace wants ids unique in
//! the process, so while collecting it appends its own thread id to each
//! event's category, behind a separator that no target contains:
//! `steptrace` becomes `steptrace\u{1f}7`. The finaliser reads the id back
//! ([`split`]), writes it as the event's `tid` and removes the tag.

/// Separates a target from steptrace's thread id in a tagged category.
pub const SEPARATOR: char = '\u{1f}';
/// [`SEPARATOR`] as serde_json escapes it inside a JSON string.
pub const SEPARATOR_ESCAPED: &str = "\\u001f";

/// The tagged category of `target` on thread `thread`.
///
/// ```
/// use steptrace::format::tag;
/// let cat = tag::encode("steptrace", 7);
/// assert_eq!(tag::split(&cat), Some(("steptrace", 7)));
/// assert_eq!(tag::split("steptrace"), None);
/// ```
#[must_use]
pub fn encode(target: &str, thread: u64) -> String {
    format!("{target}{SEPARATOR}{thread}")
}

/// Splits a tagged category into its target and thread id.
#[must_use]
pub fn split(cat: &str) -> Option<(&str, u64)> {
    let (target, id) = cat.rsplit_once(SEPARATOR)?;
    Some((target, id.parse().ok()?))
}

/// The end of a tag that starts at `at` in an escaped JSON line: the
/// escaped separator and the digits after it.
#[must_use]
pub fn escaped_tag_end(text: &[u8], at: usize) -> usize {
    let digits = at + SEPARATOR_ESCAPED.len();
    digits + text.get(digits..).map_or(0, |rest| rest.iter().take_while(|b| b.is_ascii_digit()).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_survive_targets_with_colons() {
        assert_eq!(split(&encode("steptrace::counter", 12)), Some(("steptrace::counter", 12)));
        assert_eq!(split("a\u{1f}x"), None);
        let line = br#"{"cat":"steptrace\u001f42","tid":3}"#;
        let at = line.windows(SEPARATOR_ESCAPED.len()).position(|w| w == SEPARATOR_ESCAPED.as_bytes()).unwrap();
        assert_eq!(&line[escaped_tag_end(line, at)..escaped_tag_end(line, at) + 1], b"\"");
    }
}
