//! Paths in home directories.

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{at, before, find_ignore_case, mask, run_end, run_start, slice};

/// Bytes that end a path component.
fn ends_component(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'/' | b'\\' | b'"' | b'\'' | b'`' | b',' | b';' | b')' | b']' | b'}' | b'>')
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
    named_tilde(text, hits);
    // C:\Users\NAME, C:/Users/NAME, C:\\Users\\NAME
    for users in find_ignore_case(bytes, b"users") {
        let seps_before = users - run_start(bytes, users, |b| b == b'\\' || b == b'/');
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
        hits.push(Hit { start: drive, end, kind: FindingKind::HomePath, excerpt: format!("{prefix}{}", mask(name)) });
    }
}

/// `~user/…`: another user's home directory, as shells expand it; also
/// `~user` alone as the whole label.
fn named_tilde(text: &str, hits: &mut Vec<Hit>) {
    let bytes = text.as_bytes();
    for (start, _) in text.match_indices('~') {
        let first = at(bytes, start + 1);
        if !starts_path(bytes, start) || !(first.is_ascii_alphabetic() || first == b'_') {
            continue;
        }
        let end = run_end(bytes, start + 1, |b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        let next = at(bytes, end);
        let whole = start == 0 && end == bytes.len();
        if !(matches!(next, b'/' | b'\\') || whole) {
            continue;
        }
        let name = slice(text, start + 1, end);
        let more = if whole { "" } else { "/…" };
        hits.push(Hit { start, end, kind: FindingKind::HomePath, excerpt: format!("~{}{more}", mask(name)) });
    }
}

#[cfg(test)]
mod tests {
    use crate::labels::check::{assert_excerpts, assert_kinds};
    use crate::labels::FindingKind::HomePath;

    #[test]
    fn home_paths_are_found() {
        assert_kinds(&[
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
            ("~alice/datasets/train.csv", &[HomePath]),
            ("data=~bob.smith/x", &[HomePath]),
            ("~carol", &[HomePath]),
            (r"~dave\x", &[HomePath]),
        ]);
    }

    #[test]
    fn tildes_that_are_not_home_directories_are_not_flagged() {
        for label in ["~1.5 ms", "about ~half of it", "x~y/z", "~-/x", "~+/x", "a ~b"] {
            assert_eq!(crate::labels::check::kinds(label), [], "{label:?}");
        }
    }

    #[test]
    fn excerpts_mask_the_user() {
        assert_excerpts(&[
            ("/home/alice/projects/run.py", "/home/al***/…"),
            ("/home/bob", "/home/b***"),
            ("/root/.cache", "/root/***"),
            ("~/data", "~/***"),
            (r"C:\Users\frank\x", r"C:\Users\fr***"),
            ("~alice/data", "~al***/…"),
            ("~bob", "~b***"),
        ]);
    }
}
