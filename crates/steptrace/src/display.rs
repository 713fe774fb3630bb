//! Printing what a trace holds: names, keys and values come from files
//! anyone may have written, so nothing of them reaches a terminal as is.
//!
//! - [`escape`] writes control characters as visible escapes: ESC as
//!   `\x1b`, BEL as `\x07`, a newline as `\n`, C1 controls and the
//!   bidirectional overrides that reorder a line as `\u{9b}`, `\u{202e}`.
//!   A name can then neither clear the screen, set the window title (OSC),
//!   ring the bell, nor forge a line of the report.
//! - [`label`] also cuts a long label, saying how long it was:
//!   `aaaa… (52428800 bytes)`.
//! - [`block`] escapes a whole text made of lines (a rendered report), as
//!   a last guard: every control character but the newline.
//!
//! JSON output needs none of this: serde escapes control characters.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The most characters [`label`] keeps of a label by default.
pub const LABEL_CHARS: usize = 120;

/// Whether `c` must not reach a terminal as is: a C0 or C1 control
/// character, DEL, a line or paragraph separator, or a bidirectional
/// formatting character.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `text` with every control character written as a visible escape;
/// borrowed when there is none.
///
/// # Examples
///
/// ```
/// use steptrace::display::escape;
///
/// assert_eq!(escape("train.step"), "train.step");
/// assert_eq!(escape("a\u{1b}[2Jb\u{7}"), "a\\x1b[2Jb\\x07");
/// assert_eq!(escape("x\ny\u{9b}\u{202e}"), "x\\ny\\u{9b}\\u{202e}");
/// ```
#[must_use]
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_but(text, |_| false)
}

/// `text` with every control character but the newline escaped: for a
/// whole rendered text, whose lines are its own.
///
/// # Examples
///
/// ```
/// use steptrace::display::block;
///
/// assert_eq!(block("a\n\u{1b}]0;title\u{7}\n"), "a\n\\x1b]0;title\\x07\n");
/// ```
#[must_use]
pub fn block(text: &str) -> Cow<'_, str> {
    escape_but(text, |c| c == '\n')
}

fn escape_but(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| is_unsafe(c) && !keep(c);
    let Some(first) = text.find(unsafe_char) else { return Cow::Borrowed(text) };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if unsafe_char(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` escaped, and cut after `max` characters with its length in
/// bytes: `aaaa… (52428800 bytes)`.
///
/// # Examples
///
/// ```
/// use steptrace::display::label;
///
/// assert_eq!(label("forward", 20), "forward");
/// assert_eq!(label(&"a".repeat(1000), 4), "aaaa… (1000 bytes)");
/// assert_eq!(label("\u{1b}[2J", 2), "\\x1b[… (4 bytes)");
/// ```
#[must_use]
pub fn label(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", escape(&text[..cut]), text.len())),
        None => escape(text),
    }
}

/// The most characters [`line`] keeps of a text.
pub const LINE_CHARS: usize = 200;

/// A text from a trace or a cache file (a device's name, when its limits were measured, how)
/// as one line: escaped, so that a newline cannot forge a line of a report, and cut after
/// [`LINE_CHARS`] characters.
///
/// # Examples
///
/// ```
/// use steptrace::display::line;
///
/// assert_eq!(line("NVIDIA H200"), "NVIDIA H200");
/// assert_eq!(line("H200\n== Hypotheses"), "H200\\n== Hypotheses");
/// assert!(line(&"x".repeat(10_000_000)).ends_with("… (10000000 bytes)"));
/// ```
#[must_use]
pub fn line(text: &str) -> String {
    label(text, LINE_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_character_is_escaped() {
        for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            let shown = escape(&c.to_string()).into_owned();
            assert!(shown.starts_with('\\') && shown.chars().all(|c| !c.is_control()), "{c:?} -> {shown:?}");
        }
        assert_eq!(escape("ok é ✓ 漢字"), "ok é ✓ 漢字");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("\u{2066}x\u{2069}\u{2028}"), "\\u{2066}x\\u{2069}\\u{2028}");
    }

    #[test]
    fn labels_are_cut_on_character_boundaries() {
        assert_eq!(label("ééé", 2), "éé… (6 bytes)");
        assert_eq!(label("abc", 3), "abc");
        let huge = "a".repeat(52_428_800);
        let shown = label(&huge, LABEL_CHARS);
        assert!(shown.ends_with("… (52428800 bytes)") && shown.len() < 200, "{}", shown.len());
    }
}
