//! `steptrace inspect` and `--redact` as a user runs them: what is flagged,
//! what the sanitised copy keeps (a rank file's layout, gzip for a `.gz`
//! name), and outputs refused before anything is read or printed.

mod common;

use common::{steptrace, text};

/// A rank's file as steptrace writes it, with personal data planted in
/// several places.
const RANK: &str = r#"{"distributedInfo": {"backend": "threads", "rank": 1, "world_size": 2},
"traceEvents":[
{"ph":"X","name":"ProfilerStep#3","pid":1,"tid":1,"ts":1714567890123451,"dur":123456789012347,"args":{"step":3}},
{"ph":"X","name":"pay 4111 1111 1111 1111","pid":1,"tid":1,"ts":1714567890123452,"dur":2,
 "args":{"pan":5555555555554444,"ssn":"078-05-1120","iban":"DE89 3704 0044 0532 0130 00","home":"~alice/data",
         "src":"\\\\fileserver\\finance\\q3.csv","escaped":"\\\\\\\\fileserver\\\\finance","378282246310005":1}}
],
"displayTimeUnit":"ms",
"metadata":{"distributed":{"rank":1,"world_size":2}}}
"#;

const SECRETS: [&str; 7] =
    ["4111 1111", "5555555555554444", "05-1120", "3704 0044", "alice", "fileserver", "378282246310005"];

/// The first match of HTA's rank pattern, `"rank":\s+(\d+)`, on the raw text.
fn hta_rank(text: &str) -> Option<u64> {
    let mut rest = text;
    while let Some(at) = rest.find("\"rank\":") {
        let after = &rest[at + 7..];
        let digits = after.trim_start_matches([' ', '\t', '\n', '\r']);
        if digits.len() < after.len() {
            let n: String = digits.chars().take_while(char::is_ascii_digit).collect();
            if !n.is_empty() {
                return n.parse().ok();
            }
        }
        rest = after;
    }
    None
}

/// The top-level keys of a JSON object, in order (a parser that keeps it
/// is not at hand here: the keys of interest are unique strings).
fn key_order(text: &str, keys: &[&str]) -> Vec<usize> {
    keys.iter().map(|k| text.find(&format!("\"{k}\"")).unwrap_or(usize::MAX)).collect()
}

#[test]
fn personal_numbers_shares_and_named_homes_are_flagged_and_redacted_in_a_rank_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rank1.json"), RANK).unwrap();
    let out = steptrace(&["inspect", "rank1.json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    for kind in [
        "payment card number",
        "national identifier",
        "bank account number (IBAN)",
        "network share path",
        "home directory path",
    ] {
        assert!(stdout.contains(kind), "{kind} missing: {stdout}");
    }
    // What each finding shows of what it flags is masked (a flagged key is
    // named in its location, as the inventory above lists every key).
    let flagged = stdout.split("flagged (").nth(1).unwrap_or("");
    let shown: Vec<&str> = flagged.lines().filter_map(|l| l.split_once(": ").map(|(_, what)| what)).collect();
    assert_eq!(shown.len(), 8, "{flagged}");
    for secret in SECRETS {
        assert!(shown.iter().all(|what| !what.contains(secret)), "{secret} shown: {flagged}");
    }
    // Timestamps and durations are not card numbers.
    assert!(!flagged.contains(" ts:") && !flagged.contains(" dur:"), "{flagged}");

    let out = steptrace(&["inspect", "rank1.json", "--redact", "shared.json"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("8 strings replaced") && stderr.contains("scans clean"), "{stderr}");
    let copy = std::fs::read_to_string(dir.path().join("shared.json")).unwrap();
    for secret in SECRETS {
        assert!(!copy.contains(secret), "{secret} left in {copy}");
    }
    // The layout of the rank file: distributedInfo first, as HTA reads it.
    assert!(copy.starts_with(r#"{"distributedInfo": {"backend": "threads", "rank": 1, "world_size": 2},"#), "{copy}");
    assert_eq!(hta_rank(&copy), Some(1));
    let keys = ["distributedInfo", "traceEvents", "displayTimeUnit", "metadata"];
    let at = key_order(&copy, &keys);
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}: {copy}");
    let again = steptrace(&["inspect", "shared.json"], dir.path());
    assert_eq!(again.status.code(), Some(0), "{:?}", text(&again));
}

#[test]
fn a_gz_output_is_gzip_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rank1.json"), RANK).unwrap();
    let out = steptrace(&["inspect", "rank1.json", "--redact", "shared.json.gz"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(", gzip)") && stderr.contains("scans clean"), "{stderr}");
    let bytes = std::fs::read(dir.path().join("shared.json.gz")).unwrap();
    assert_eq!(bytes[..2], [0x1f, 0x8b], "not gzip");
    assert!(stderr.contains(&format!("{} bytes", bytes.len())), "{stderr}");
    let again = steptrace(&["inspect", "shared.json.gz"], dir.path());
    let (stdout, _) = text(&again);
    assert_eq!(again.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("nothing flagged"), "{stdout}");
}

#[test]
fn an_output_that_exists_or_has_no_folder_is_refused_before_anything_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rank1.json"), RANK).unwrap();
    std::fs::write(dir.path().join("taken.json"), "keep me").unwrap();
    let out = steptrace(&["inspect", "rank1.json", "--redact", "taken.json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "the inventory was printed before refusing: {stdout}");
    assert!(stderr.contains("taken.json already exists: a sanitised copy never overwrites a file"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("taken.json")).unwrap(), "keep me");

    let out = steptrace(&["inspect", "rank1.json", "--redact", "no/such/folder/x.json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("no/such/folder") && stderr.contains("does not exist"), "{stderr}");
    assert!(!dir.path().join("no").exists());
    // A folder for a file, a file for a folder.
    for (path, expected) in [("newdir/", "names no file"), ("rank1.json/x.json", "is not a folder")] {
        let out = steptrace(&["inspect", "rank1.json", "--redact", path], dir.path());
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{path:?}: {stdout}{stderr}");
        assert!(stdout.is_empty() && stderr.contains(expected), "{path:?}: {stdout}{stderr}");
    }
    // The input itself is an output that exists.
    let out = steptrace(&["inspect", "rank1.json", "--redact", "rank1.json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(dir.path().join("rank1.json")).unwrap(), RANK);
}
