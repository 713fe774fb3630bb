//! Network share paths (UNC): `\\server\share\…`, also as JSON escapes
//! leave them in a string (`\\\\server\\share`). Windows device paths
//! (`\\?\C:\…`, `\\.\pipe\…`) and escaped drive paths (`C:\\Users`) are
//! not shares.

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{at, before, mask, run_end, slice};

fn is_host(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'$')
}

/// Bytes that end a share name.
fn ends_share(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'\\' | b'/' | b'"' | b'\'' | b'`' | b',' | b';' | b'*' | b'|' | b'<' | b'>')
}

pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
    let bytes = text.as_bytes();
    for (start, _) in text.match_indices("\\\\") {
        // The start of a run of backslashes, not after a drive's colon or
        // inside a word.
        let b = before(bytes, start);
        if b == b'\\' || b == b':' || b.is_ascii_alphanumeric() || b == b'_' {
            continue;
        }
        let host_start = run_end(bytes, start, |b| b == b'\\');
        if host_start - start > 4 {
            continue;
        }
        let host_end = run_end(bytes, host_start, is_host);
        let host = slice(text, host_start, host_end);
        // `\\d\\w`: a regular expression's escapes, not a host.
        if host.len() < 2 || !at(bytes, host_start).is_ascii_alphanumeric() {
            continue;
        }
        let share_start = run_end(bytes, host_end, |b| b == b'\\');
        if share_start == host_end || share_start - host_end > 2 {
            continue;
        }
        let end = run_end(bytes, share_start, |b| !ends_share(b));
        if end == share_start {
            continue;
        }
        let excerpt = format!("\\\\{}\\…", mask(host));
        hits.push(Hit { start, end, kind: FindingKind::NetworkPath, excerpt });
    }
}

#[cfg(test)]
mod tests {
    use crate::labels::check::{assert_excerpts, assert_kinds, kinds};
    use crate::labels::FindingKind::NetworkPath;

    #[test]
    fn shares_are_found_plain_and_escaped() {
        assert_kinds(&[
            (r"\\fileserver\datasets\train.csv", &[NetworkPath]),
            (r"\\\\fileserver\\datasets\\train.csv", &[NetworkPath]),
            (r"load \\10.0.0.5\share$", &[NetworkPath]),
            (r#"{"path":"\\nas-01.corp.local\home"}"#, &[NetworkPath]),
        ]);
    }

    #[test]
    fn device_paths_drives_and_escapes_are_not_shares() {
        for label in
            [r"\\?\C:\data", r"\\.\pipe\name", r"C:\\data\\x", r"\\d\\w", r"a\\b\c", r"\\server", r"\\\\\\x\\y"]
        {
            assert!(!kinds(label).contains(&NetworkPath), "{label:?}: {:?}", kinds(label));
        }
    }

    #[test]
    fn excerpts_mask_the_host() {
        assert_excerpts(&[(r"\\fileserver\datasets", r"\\fi***\…")]);
    }
}
