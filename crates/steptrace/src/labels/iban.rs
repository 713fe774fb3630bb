//! Bank account numbers: IBANs (`DE89370400440532013000`, or in groups of
//! four, `DE89 3704 0044 0532 0130 00`): a country code, two check digits
//! and the account, as long as that country's IBANs are, with the mod-97
//! check of ISO 13616.

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{at, before};

/// IBAN lengths by country.
#[rustfmt::skip]
const LENGTHS: &[(&str, usize)] = &[
    ("AD", 24), ("AE", 23), ("AL", 28), ("AT", 20), ("AZ", 28), ("BA", 20), ("BE", 16), ("BG", 22), ("BH", 22),
    ("BI", 27), ("BR", 29), ("BY", 28), ("CH", 21), ("CR", 22), ("CY", 28), ("CZ", 24), ("DE", 22), ("DJ", 27),
    ("DK", 18), ("DO", 28), ("EE", 20), ("EG", 29), ("ES", 24), ("FI", 18), ("FK", 18), ("FO", 18), ("FR", 27),
    ("GB", 22), ("GE", 22), ("GI", 23), ("GL", 18), ("GR", 27), ("GT", 28), ("HR", 21), ("HU", 28), ("IE", 22),
    ("IL", 23), ("IQ", 23), ("IS", 26), ("IT", 27), ("JO", 30), ("KW", 30), ("KZ", 20), ("LB", 28), ("LC", 32),
    ("LI", 21), ("LT", 20), ("LU", 20), ("LV", 21), ("LY", 25), ("MC", 27), ("MD", 24), ("ME", 22), ("MK", 19),
    ("MN", 20), ("MR", 27), ("MT", 31), ("MU", 30), ("NI", 28), ("NL", 18), ("NO", 15), ("OM", 23), ("PK", 24),
    ("PL", 28), ("PS", 29), ("QA", 29), ("RO", 24), ("RS", 22), ("RU", 33), ("SA", 24), ("SC", 31), ("SD", 18),
    ("SE", 24), ("SI", 19), ("SK", 24), ("SM", 27), ("SO", 23), ("ST", 25), ("SV", 28), ("TL", 23), ("TN", 24),
    ("TR", 26), ("UA", 29), ("VA", 22), ("VG", 24), ("XK", 20), ("YE", 30),
];

fn is_part(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

/// Whether `iban` (uppercase letters and digits) passes the mod-97 check:
/// the first four characters moved to the end, letters as 10 to 35, the
/// number modulo 97 is 1.
pub(super) fn mod97(iban: &[u8]) -> bool {
    let (head, tail) = iban.split_at(4.min(iban.len()));
    let mut rest = 0u32;
    for &b in tail.iter().chain(head) {
        let v = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        rest = (rest * if v >= 10 { 100 } else { 10 } + v) % 97;
    }
    rest == 1
}

pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
    let bytes = text.as_bytes();
    for i in 0..bytes.len().saturating_sub(14) {
        let country = [at(bytes, i), at(bytes, i + 1)];
        let head = country.iter().all(u8::is_ascii_uppercase)
            && at(bytes, i + 2).is_ascii_digit()
            && at(bytes, i + 3).is_ascii_digit();
        let b = before(bytes, i);
        if !head || b.is_ascii_alphanumeric() || b == b'_' {
            continue;
        }
        let Some(&(_, len)) = LENGTHS.iter().find(|(code, _)| code.as_bytes() == country) else { continue };
        // Its characters, with single spaces between groups of four.
        let mut chars: Vec<u8> = Vec::with_capacity(len);
        let mut j = i;
        let mut end = i;
        while chars.len() < len {
            let c = at(bytes, j);
            if is_part(c) {
                chars.push(c);
                j += 1;
                end = j;
            } else if c == b' ' && chars.len().is_multiple_of(4) && j > i && is_part(at(bytes, j + 1)) {
                j += 1;
            } else {
                break;
            }
        }
        let after = at(bytes, end);
        if chars.len() < len || after.is_ascii_alphanumeric() || after == b'_' || !mod97(&chars) {
            continue;
        }
        let excerpt = format!("{}*** ({len} characters)", String::from_utf8_lossy(&country));
        hits.push(Hit { start: i, end, kind: FindingKind::Iban, excerpt });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::check::{assert_excerpts, assert_kinds, kinds};
    use crate::labels::FindingKind::Iban;

    #[test]
    fn the_check_digits() {
        assert!(mod97(b"DE89370400440532013000") && mod97(b"GB82WEST12345698765432") && mod97(b"NO9386011117947"));
        assert!(!mod97(b"DE89370400440532013001") && !mod97(b"DE"));
    }

    #[test]
    fn ibans_are_found_compact_and_grouped() {
        assert_kinds(&[
            ("DE89370400440532013000", &[Iban]),
            ("iban=DE89 3704 0044 0532 0130 00;", &[Iban]),
            ("pay GB82 WEST 1234 5698 7654 32 now", &[Iban]),
            ("NO9386011117947", &[Iban]),
            ("\"FR1420041010050500013M02606\"", &[Iban]),
            ("BE68 5390 0754 7034 2024", &[Iban]),
        ]);
    }

    #[test]
    fn look_alikes_are_not_ibans() {
        for label in [
            "DE89370400440532013001",
            "DE8937040044053201300",
            "XDE89370400440532013000",
            "DE893704004405320130001",
            "de89370400440532013000",
            "SM90ABCDEFGHIJKLMNOPQRSTUVW",
            "GB82 WEST 1234 5698 7654 33",
        ] {
            assert!(!kinds(label).contains(&Iban), "{label:?}: {:?}", kinds(label));
        }
    }

    #[test]
    fn excerpts_show_the_country_only() {
        assert_excerpts(&[("DE89 3704 0044 0532 0130 00", "DE*** (22 characters)")]);
    }
}
