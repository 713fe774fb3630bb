//! E-mail addresses: `local@domain.tld`.

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{at, prefix, run_end, run_start, slice};

fn is_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
}

fn is_domain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')
}

pub(super) fn find(text: &str, hits: &mut Vec<Hit>) {
    let bytes = text.as_bytes();
    for (at_sign, _) in text.match_indices('@') {
        let mut start = run_start(bytes, at_sign, is_local);
        while start < at_sign && at(bytes, start) == b'.' {
            start += 1;
        }
        let mut end = run_end(bytes, at_sign + 1, is_domain);
        while end > at_sign + 1 && matches!(at(bytes, end - 1), b'.' | b'-') {
            end -= 1;
        }
        let local = slice(text, start, at_sign);
        let domain = slice(text, at_sign + 1, end);
        let labels: Vec<&str> = domain.split('.').collect();
        let tld = labels.last().copied().unwrap_or("");
        let valid = !local.is_empty()
            && labels.len() >= 2
            && labels.iter().all(|label| !label.is_empty())
            && (2..=24).contains(&tld.len())
            && tld.bytes().all(|b| b.is_ascii_alphabetic());
        if valid {
            let shown = prefix(local, if local.len() > 3 { 2 } else { 1 });
            let excerpt = format!("{shown}***@***.{tld}");
            hits.push(Hit { start, end, kind: FindingKind::Email, excerpt });
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::labels::check::{assert_excerpts, assert_kinds};
    use crate::labels::FindingKind::Email;

    #[test]
    fn addresses_are_found() {
        assert_kinds(&[("alice@example.org", &[Email]), ("contact: bob.smith+ml@research.lab.co.uk.", &[Email])]);
    }

    #[test]
    fn excerpts_mask_the_address() {
        assert_excerpts(&[("alice@example.org", "al***@***.org"), ("al@example.org", "a***@***.org")]);
    }
}
