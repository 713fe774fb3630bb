//! National identifiers: US social security numbers, `ddd-dd-dddd`, but
//! not the numbers the SSA never issues (area 000, 666 or 900–999, group
//! 00, serial 0000).

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{digit_runs, ends_number, number, starts_number, DigitRun};

pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
    let bytes = text.as_bytes();
    // Runs of digits joined by dashes: an SSN is a whole chain of three
    // (`1-123-45-6789` and `123-45-6789-01` are other numbers).
    let runs = digit_runs(bytes, b"-");
    for (k, window) in runs.windows(3).enumerate() {
        let [area, group, serial] = window else { continue };
        let lengths = (area.len(), group.len(), serial.len());
        let shaped = lengths == (3, 2, 4) && area.joint.is_some() && group.joint.is_some();
        let after_another = k.checked_sub(1).and_then(|p| runs.get(p)).is_some_and(|p| p.joint.is_some());
        let chained = after_another || serial.joint.is_some();
        if !shaped || chained || !starts_number(bytes, area.start) || !ends_number(bytes, serial.end) {
            continue;
        }
        let value = |r: &DigitRun| number(bytes.get(r.start..r.end).unwrap_or_default());
        let (area_n, group_n, serial_n) = (value(area), value(group), value(serial));
        if area_n == 0 || area_n == 666 || area_n >= 900 || group_n == 0 || serial_n == 0 {
            continue;
        }
        let excerpt = "***-**-**** (SSN)".to_owned();
        hits.push(Hit { start: area.start, end: serial.end, kind: FindingKind::NationalId, excerpt });
    }
}

#[cfg(test)]
mod tests {
    use crate::labels::check::{assert_excerpts, assert_kinds, kinds};
    use crate::labels::FindingKind::NationalId;

    #[test]
    fn social_security_numbers_are_found() {
        assert_kinds(&[
            ("123-45-6789", &[NationalId]),
            ("ssn=078-05-1120", &[NationalId]),
            ("patient 219-09-9999, admitted", &[NationalId]),
            ("ids 12 123-45-6789", &[NationalId]),
            ("(123-45-6789)", &[NationalId]),
        ]);
    }

    #[test]
    fn impossible_numbers_and_other_shapes_are_not() {
        for label in [
            "000-12-3456",
            "666-12-3456",
            "912-34-5678",
            "123-00-4567",
            "123-45-0000",
            "1-123-45-6789",
            "123-45-6789-01",
            "x123-45-6789",
            "123-45-67890",
            "2024-05-01",
            "555-123-4567",
            "123456789",
            "123-45-6789.5",
            "0.123-45-6789",
            "123_45_6789",
            "128 64 1024",
        ] {
            assert!(!kinds(label).contains(&NationalId), "{label:?}: {:?}", kinds(label));
        }
    }

    #[test]
    fn excerpts_hide_every_digit() {
        assert_excerpts(&[("123-45-6789", "***-**-**** (SSN)")]);
    }
}
