//! Private keys in PEM form, whole: from `-----BEGIN … PRIVATE KEY-----` (or `… PRIVATE
//! KEY BLOCK-----`) to the end of its `-----END …-----` line (to the end of the text when
//! the block is cut there), so that no line of the block survives a redaction, the short
//! last line of its body included; and bodies without their header: a line of 64 or 76
//! base64 characters (the widths of PEM and MIME) followed by more base64 lines.

use super::check::Hit;
use super::finding::FindingKind;
use super::text::prefix;

const BEGIN: &str = "-----BEGIN ";
const END: &str = "-----END ";
const DASHES: &str = "-----";

/// What a PEM private key's finding shows.
const EXCERPT: &str = "-----BEGIN *** PRIVATE KEY-----";

pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
    private_keys(text, hits);
    bodies(text, hits);
}

/// The end of the `-----BEGIN … PRIVATE KEY-----` header that starts at `start`, if one
/// does (on one line; an excerpt of ours, `***`, is none; a certificate is none).
fn header_end(text: &str, start: usize) -> Option<usize> {
    let label_start = start + BEGIN.len();
    let rest = text.get(label_start..)?;
    let label_len = rest.find(DASHES)?;
    let label = &rest[..label_len];
    let private = label.contains("PRIVATE KEY") && !label.contains("***") && !label.contains(['\n', '\r']);
    private.then_some(label_start + label_len + DASHES.len())
}

/// Each private key block, whole.
fn private_keys(text: &str, hits: &mut Vec<Hit>) {
    let mut from = 0;
    while let Some(i) = text.get(from..).and_then(|rest| rest.find(BEGIN)) {
        let start = from + i;
        let Some(body) = header_end(text, start) else {
            from = start + BEGIN.len();
            continue;
        };
        let end = match text[body..].find(END) {
            Some(j) => {
                let end_line = body + j + END.len();
                text[end_line..].find(DASHES).map_or(text.len(), |k| end_line + k + DASHES.len())
            }
            None => text.len(),
        };
        hits.push(Hit { start, end, kind: FindingKind::Token, excerpt: EXCERPT.to_owned() });
        from = end;
    }
}

/// Whether `text` opens a private key block that it does not close: the items that follow
/// it (in an array of lines) are part of the key.
pub(super) fn opens_block(text: &str) -> bool {
    let Some(last) = text.rfind(BEGIN) else { return false };
    header_end(text, last).is_some_and(|body| !text[body..].contains(END))
}

/// Whether `text` holds the end line of a block.
pub(super) fn closes_block(text: &str) -> bool {
    text.contains(END)
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// A key's body without its header: a line of 64 or 76 base64 characters that mixes cases
/// and digits, and the base64 lines that follow it up to the first shorter one.
fn bodies(text: &str, hits: &mut Vec<Hit>) {
    if !text.contains('\n') {
        return;
    }
    // (start, end) of each line, without its line break.
    let mut lines = Vec::new();
    let mut at = 0;
    for line in text.split('\n') {
        let trimmed = line.strip_suffix('\r').unwrap_or(line);
        lines.push((at, at + trimmed.len()));
        at += line.len() + 1;
    }
    let bytes = text.as_bytes();
    let base64 = |(s, e): (usize, usize)| e > s && bytes[s..e].iter().all(|b| is_base64(*b));
    let mut i = 0;
    while i < lines.len() {
        let (start, end) = lines[i];
        let width = end - start;
        let line = &bytes[start..end];
        let mixed = line.iter().any(u8::is_ascii_uppercase)
            && line.iter().any(u8::is_ascii_lowercase)
            && line.iter().any(u8::is_ascii_digit);
        if !(width == 64 || width == 76) || !base64((start, end)) || !mixed {
            i += 1;
            continue;
        }
        let mut last = i;
        while last + 1 < lines.len() && base64(lines[last + 1]) && lines[last + 1].1 - lines[last + 1].0 <= width {
            last += 1;
            if lines[last].1 - lines[last].0 < width {
                break;
            }
        }
        if last > i {
            let excerpt = format!("{}*** (a base64 block of {} lines)", prefix(&text[start..end], 4), last - i + 1);
            hits.push(Hit { start, end: lines[last].1, kind: FindingKind::Token, excerpt });
        }
        i = last + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::{check_label, redact_label};

    const KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\n\
        MIIEowIBAAKCAQEAv3a9Qk2Zp7Xw1Lm4Nc8Rt6Yb0Hd5Jf2Gs9Tu3Ve7AqWxYz1K\n\
        q8Zp3Xv7Lk2Rt9Wm4Yb1Nc6Hd0Jf5Gs8Tu2Ve7Aq8Zp3Xv7Lk2Rt9Wm4Yb1Nc6Hd\n\
        Zm9vYmFy\n\
        -----END RSA PRIVATE KEY-----";

    #[test]
    fn a_private_key_is_redacted_from_its_begin_line_to_its_end_line() {
        for text in [KEY.to_owned(), format!("key: {KEY}\nnext"), KEY.replace('\n', "\r\n")] {
            let clean = redact_label(&text).unwrap();
            for line in ["MIIE", "q8Zp", "Zm9vYmFy", "END RSA", "BEGIN RSA"] {
                assert!(!clean.contains(line), "{line} left in {clean:?}");
            }
            assert!(check_label(&clean).is_empty(), "{clean:?}");
        }
        assert_eq!(
            redact_label(&format!("key: {KEY}\nnext")).unwrap(),
            "key: [*** redacted token or secret ***]\nnext"
        );
        // Cut before its end: to the end of the text.
        assert_eq!(redact_label(&KEY[..80]).unwrap(), "[*** redacted token or secret ***]");
        assert_eq!(check_label(KEY).len(), 1);
    }

    #[test]
    fn a_body_without_its_header_is_redacted_whole() {
        let body = &KEY[32..KEY.len() - 30];
        assert_eq!(body.lines().map(str::len).collect::<Vec<_>>(), [64, 64, 8]);
        assert!(body.starts_with("MIIE") && body.ends_with("Zm9vYmFy"), "{body:?}");
        assert_eq!(redact_label(body).unwrap(), "[*** redacted token or secret ***]");
        // Ordinary text over several lines stays.
        assert!(check_label("step 1\nstep 2\nok").is_empty());
    }

    #[test]
    fn blocks_opened_and_closed_over_several_strings() {
        assert!(opens_block("-----BEGIN EC PRIVATE KEY-----"));
        assert!(!opens_block(KEY));
        assert!(!opens_block("-----BEGIN CERTIFICATE-----"));
        assert!(opens_block("-----BEGIN PGP PRIVATE KEY BLOCK-----"));
        assert!(closes_block("-----END EC PRIVATE KEY-----"));
        assert!(!closes_block("AwEHoUQDQgAE"));
    }

    #[test]
    fn many_headers_cost_linear_time() {
        let text = "-----BEGIN x".repeat(50_000);
        let _ = check_label(&text);
        let text = format!("{}{}", "-----BEGIN A PRIVATE KEY-----\n".repeat(20_000), "x");
        assert_eq!(check_label(&text).len(), 1);
    }
}
