//! Payment card numbers: 13 to 19 digits, in one run or in groups
//! separated by spaces or dashes (`4111 1111 1111 1111`,
//! `3782-822463-10005`), whose issuer prefix fits their length and whose
//! last digit is the Luhn check digit. Also JSON numbers of that shape
//! ([`is_card_value`]), except under the keys of a trace's own figures
//! (`ts`, `dur`, `pid`, times and durations by name).
//!
//! The Luhn check passes one number in ten; with the issuer prefixes it
//! keeps ordinary large numbers quiet: timestamps (`1714567890123451` µs,
//! which start with 1), durations, sizes, decimals (`0.4532015112830366`).
//! A grouped number is looked for anywhere in a run of groups (`order 12
//! 4111 1111 1111 1111 exp 12 25`), one separator throughout.

use serde_json::Number;

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{digit_runs, digits_of, ends_number, number, starts_number, DigitRun};

/// Most groups a grouped card number is written in (`4-4-4-4-3`).
const MAX_GROUPS: usize = 5;

/// Whether `digits` (ASCII digits) end with their Luhn check digit.
pub(super) fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, &d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d.wrapping_sub(b'0'));
        if v > 9 {
            return false;
        }
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// Whether an issuer gives out numbers of this prefix and length: Visa,
/// Mastercard, American Express, Discover, JCB, Diners Club, UnionPay,
/// Maestro, Mir.
fn issued(digits: &[u8]) -> bool {
    let n = digits.len();
    let lead = |k: usize| number(digits.get(..k).unwrap_or(digits));
    let (p2, p3, p4) = (lead(2), lead(3), lead(4));
    let long = (16..=19).contains(&n);
    match digits.first() {
        Some(b'4') => matches!(n, 13 | 16 | 19),
        Some(b'2') => (n == 16 && (2221..=2720).contains(&p4)) || (long && (2200..=2204).contains(&p4)),
        Some(b'5') => (n == 16 && (51..=55).contains(&p2)) || ((13..=19).contains(&n) && matches!(p2, 50 | 56..=58)),
        Some(b'3') => {
            (n == 15 && matches!(p2, 34 | 37))
                || (long && (3528..=3589).contains(&p4))
                || ((14..=19).contains(&n) && ((300..=305).contains(&p3) || matches!(p2, 36 | 38 | 39)))
        }
        Some(b'6') => {
            (long && (p4 == 6011 || (644..=649).contains(&p3) || matches!(p2, 62 | 65)))
                || ((13..=19).contains(&n) && matches!(p4, 6304 | 6759 | 6761..=6763))
        }
        _ => false,
    }
}

/// Whether `digits` is a card number: 13 to 19 digits, an issuer's
/// prefix for that length, and a valid Luhn check digit.
pub(super) fn is_card(digits: &[u8]) -> bool {
    (13..=19).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) && issued(digits) && luhn(digits)
}

/// Whether a JSON number is a card number written as a number.
fn is_card_number(number: &Number) -> bool {
    // Fewer than 13 digits: no card (and no string to build).
    number.as_u64().filter(|&n| n >= 1_000_000_000_000).is_some_and(|n| is_card(n.to_string().as_bytes()))
}

/// The fields of a trace event that the format defines as numbers: at an
/// event's top level, never card numbers.
const EVENT_FIELDS: &[&str] = &["ts", "dur", "tts", "tdur", "pid", "tid", "id", "id2", "bind_id"];

/// Whether numbers under `key`, anywhere, are a trace's own figures,
/// never card numbers: profilers' ids (`correlation`, `External id`),
/// times and durations by name (`baseTimeNanoseconds`, `epoch_unix_ms`,
/// `start_us`, `gpu_ts`), and seeds, hashes, sizes and counts (a random
/// 64-bit seed has the shape of a 19-digit card about one time in a
/// hundred). A 13-digit duration in ns starting with 4 passes Luhn's
/// check one time in ten.
fn is_figure_key(key: &str) -> bool {
    const PROFILER_KEYS: &[&str] =
        &["correlation", "external id", "ev idx", "python id", "python parent id", "addr", "stream", "device"];
    // Whole words of a key (`start_ts`, `baseTimeNanoseconds`, `numBytes`), not parts of words (`account`).
    const WORDS: &[&str] = &[
        "ts",
        "dur",
        "time",
        "timestamp",
        "duration",
        "elapsed",
        "latency",
        "epoch",
        "seed",
        "hash",
        "size",
        "bytes",
        "count",
        "parameters",
        "ns",
        "us",
        "ms",
        "nanoseconds",
        "microseconds",
        "milliseconds",
        "seconds",
    ];
    PROFILER_KEYS.iter().any(|f| key.eq_ignore_ascii_case(f)) || words(key).iter().any(|w| WORDS.contains(&w.as_str()))
}

/// The words of a key, lowercase: split at anything but letters and digits,
/// and where a lowercase letter meets an uppercase one (`baseTimeNs`).
fn words(key: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        let boundary = !c.is_alphanumeric() || (prev_lower && c.is_uppercase());
        if boundary && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase();
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Whether a JSON number found under `key` (the nearest object key above
/// it, if any) is a card number: one by [`is_card`], neither one of an
/// event's own fields (`event_field`: at the event's top level, under one
/// of [`EVENT_FIELDS`]) nor under the key of one of a trace's figures.
pub(super) fn is_card_value(key: Option<&str>, event_field: bool, number: &Number) -> bool {
    let figure = key.is_some_and(|k| is_figure_key(k) || (event_field && EVENT_FIELDS.contains(&k)));
    !figure && is_card_number(number)
}

fn excerpt(digits: &[u8]) -> String {
    let first = char::from(digits.first().copied().unwrap_or(b'?'));
    format!("{first}*** ({} digits)", digits.len())
}

/// Whether `runs` (joined one to the next) are laid out as a card number
/// is written in groups: 4 digits first, then groups of 3 to 6, the last
/// of 1 to 6.
fn laid_out(runs: &[DigitRun]) -> bool {
    let Some((last, head)) = runs.split_last() else { return false };
    !head.is_empty()
        && head.first().is_some_and(|r| r.len() == 4)
        && head.iter().skip(1).all(|r| (3..=6).contains(&r.len()))
        && (1..=6).contains(&last.len())
}

/// The longest card number that the first runs of `runs` make: one run
/// alone, or up to [`MAX_GROUPS`] joined by one separator throughout; how
/// many runs it takes, and its digits.
fn card_at(bytes: &[u8], runs: &[DigitRun]) -> Option<(usize, Vec<u8>)> {
    let first = runs.first()?;
    if !starts_number(bytes, first.start) {
        return None;
    }
    let joined = runs.iter().take(MAX_GROUPS - 1).take_while(|r| r.joint.is_some() && r.joint == first.joint).count();
    (1..=joined + 1).rev().find_map(|n| {
        let window = runs.get(..n)?;
        if !((n == 1 || laid_out(window)) && ends_number(bytes, window.last()?.end)) {
            return None;
        }
        let digits = digits_of(bytes, window);
        is_card(&digits).then_some((n, digits))
    })
}

pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
    let bytes = text.as_bytes();
    let runs = digit_runs(bytes, b" -");
    let mut a = 0;
    while let Some(rest) = runs.get(a..).filter(|r| !r.is_empty()) {
        match card_at(bytes, rest) {
            Some((n, digits)) => {
                if let (Some(first), Some(last)) = (rest.first(), rest.get(n - 1)) {
                    let shown = excerpt(&digits);
                    hits.push(Hit { start: first.start, end: last.end, kind: FindingKind::Card, excerpt: shown });
                }
                a += n;
            }
            None => a += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::check::{assert_excerpts, assert_kinds, kinds};
    use crate::labels::FindingKind::Card;

    #[test]
    fn the_luhn_check_and_the_issuers() {
        assert!(luhn(b"4111111111111111") && luhn(b"79927398713") && !luhn(b"4111111111111112"));
        assert!(is_card(b"4111111111111111") && is_card(b"378282246310005") && is_card(b"5555555555554444"));
        assert!(is_card(b"6011111111111117") && is_card(b"3530111333300000") && is_card(b"2223003122003222"));
        assert!(is_card(b"36227206271667") && is_card(b"4222222222222"));
        // Luhn-valid, but no issuer gives such numbers: a timestamp in µs.
        assert!(luhn(b"1714567890123451") && !is_card(b"1714567890123451"));
        assert!(!is_card(b"411111111111111") && !is_card(b"41111111111111111111"));
    }

    #[test]
    fn card_numbers_are_found_alone_and_grouped() {
        assert_kinds(&[
            ("4111111111111111", &[Card]),
            ("card=4111 1111 1111 1111", &[Card]),
            ("paid with 5555-5555-5555-4444 yesterday", &[Card]),
            ("amex 3782 822463 10005", &[Card]),
            ("4222222222222", &[Card]),
            ("pan:6011111111111117;", &[Card]),
            ("4111111111111111 12 25", &[Card]),
            ("[\"4111111111111111\"]", &[Card]),
            // Numbers before or after a grouped card do not hide it.
            ("order 12 4111 1111 1111 1111", &[Card]),
            ("qty 3 5555-5555-5555-4444", &[Card]),
            ("4111 1111 1111 1111 123", &[Card]),
            ("2024 4111 1111 1111 1111 exp 12 25", &[Card]),
            ("cards 4111111111111111, 5555555555554444", &[Card, Card]),
        ]);
    }

    #[test]
    fn ordinary_numbers_are_not_cards() {
        for label in [
            "ts 1714567890123451",
            "0.4111111111111111",
            "4111111111111111.5",
            "4111111111111112",
            "id4111111111111111",
            "0x4111111111111111",
            "4111 1111 1111 1112",
            "1 2 3 4 5 6 7 8 9 10 11 12 13",
            "4111-1111 1111-1111",
            "dur=123456789012347",
            "2024-05-01 12:30:45",
            // Timestamps in µs and ns, and 13 to 19 digit runs starting with 1, 7, 8 or 9.
            "ts=1733140000123456",
            "baseTimeNanoseconds=1733140000123456789",
            "9223372036854775807",
            "8000000000000002",
            // Kernel names, shapes, hex addresses, ids.
            "ampere_sgemm_128x64_tn",
            "shape 64x128",
            "[4096 4096 4096 4096]",
            "[5120 5120 5120 5120]",
            "0x7f3a2b1c4d5e",
            "ptr 0x00007f4111111111111111",
            "123e4567-e89b-12d3-a456-426614174000",
            "void gemm_kernel<4111111111111111ul>()",
            "sm_90a",
        ] {
            assert!(!kinds(label).contains(&Card), "{label:?}: {:?}", kinds(label));
        }
    }

    #[test]
    fn a_traces_own_figures_are_never_cards() {
        let number = |n: u64| serde_json::Number::from(n);
        // Luhn-valid, 13 digits from 4: a Visa shape, and a duration in ns of 68 minutes.
        assert!(luhn(b"4111111111119") && is_card(b"4111111111119"));
        for key in EVENT_FIELDS {
            assert!(!is_card_value(Some(key), true, &number(4_111_111_111_119)), "{key}");
        }
        // Under another key, `id` is any id.
        assert!(is_card_value(Some("id"), false, &number(4_111_111_111_119)));
        for key in [
            "ts",
            "dur",
            "baseTimeNanoseconds",
            "epoch_unix_ms",
            "start_us",
            "Duration",
            "External id",
            "seed",
            "gpu_ts",
            "numBytes",
        ] {
            assert!(!is_card_value(Some(key), false, &number(4_111_111_111_119)), "{key}");
        }
        let others = ["card", "pan", "account", "card_id", "msisdn", "tsukuba"];
        for key in [None].into_iter().chain(others.map(Some)) {
            assert!(is_card_value(key, false, &number(4_111_111_111_119)), "{key:?}");
        }
        // Ordinary large numbers under any key.
        for n in [1_733_140_000_123_456, 1_733_140_000_123_456_789, 4_111_111_111_111, 94_371_234_567_890, u64::MAX] {
            assert!(!is_card_value(Some("value"), false, &number(n)), "{n}");
        }
    }

    #[test]
    fn numbers_are_checked_as_json_numbers() {
        let number = |n: u64| serde_json::Number::from(n);
        assert!(is_card_number(&number(4_111_111_111_111_111)));
        assert!(!is_card_number(&number(1_714_567_890_123_452)));
        assert!(!is_card_number(&serde_json::Number::from_f64(4.111_111_111_111_111e15).unwrap()));
    }

    #[test]
    fn excerpts_show_the_first_digit_only() {
        assert_excerpts(&[("4111 1111 1111 1111", "4*** (16 digits)"), ("378282246310005", "3*** (15 digits)")]);
    }
}
