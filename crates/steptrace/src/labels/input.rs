//! Content of the program's input: prose and lists of numbers.

use super::check::Hit;
use super::finding::FindingKind;
use super::text::{at, before, mask, prefix, slice};

/// Common English function words.
const FUNCTION_WORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "from", "by", "as", "is", "are",
    "was", "were", "be", "been", "it", "its", "this", "that", "these", "those", "i", "you", "he", "she", "we", "they",
    "me", "him", "her", "us", "them", "my", "your", "his", "our", "their", "what", "which", "who", "when", "where",
    "why", "how", "do", "does", "did", "have", "has", "had", "will", "would", "can", "could", "should", "there",
    "then", "than", "so", "if", "very", "just", "about", "into", "over", "after", "before",
];

/// Long natural-language text.
pub(super) fn find_prose(text: &str, hits: &mut Vec<Hit>) {
    if text.chars().count() <= 48 {
        return;
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() < 8 {
        return;
    }
    let plain: Vec<String> = words
        .iter()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_alphabetic() || c == '\'' || c == '-'))
        .map(str::to_lowercase)
        .collect();
    if plain.len() * 10 < words.len() * 7 {
        return;
    }
    let mut function_words: Vec<&str> =
        plain.iter().map(String::as_str).filter(|w| FUNCTION_WORDS.contains(w)).collect();
    function_words.sort_unstable();
    function_words.dedup();
    if function_words.len() >= 3 {
        // The first plain word, masked: the text may hold anything.
        let first = mask(prefix(plain.first().map_or("", String::as_str), 12));
        let excerpt = format!("\"{first} …\" ({} words)", words.len());
        hits.push(Hit { start: 0, end: text.len(), kind: FindingKind::InputContent, excerpt });
    }
}

fn is_separator(b: u8) -> bool {
    matches!(b, b',' | b';' | b' ' | b'\t' | b'\n' | b'\r')
}

/// The end of the number starting at `i`, if one does: digits with an
/// optional sign, fraction and exponent, standing alone.
fn number_at(bytes: &[u8], i: usize) -> Option<usize> {
    let stands_alone = |b: u8| b == 0 || is_separator(b) || matches!(b, b'[' | b']' | b'(' | b')' | b'{' | b'}');
    if !stands_alone(before(bytes, i)) {
        return None;
    }
    let mut j = i;
    if matches!(at(bytes, j), b'-' | b'+') {
        j += 1;
    }
    let digits_start = j;
    while at(bytes, j).is_ascii_digit() || at(bytes, j) == b'.' {
        j += 1;
    }
    if !bytes.get(digits_start..j).is_some_and(|d| d.iter().any(u8::is_ascii_digit)) {
        return None;
    }
    if matches!(at(bytes, j), b'e' | b'E') {
        let mut k = j + 1;
        if matches!(at(bytes, k), b'-' | b'+') {
            k += 1;
        }
        if at(bytes, k).is_ascii_digit() {
            while at(bytes, k).is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    stands_alone(at(bytes, j)).then_some(j)
}

/// A number as an excerpt shows it: as written when short, `***` when it
/// has more than 8 digits (a card number, an account, an identifier).
pub(super) fn shown_number(number: &str) -> &str {
    if number.bytes().filter(u8::is_ascii_digit).count() > 8 {
        "***"
    } else {
        number
    }
}

/// Lists of 8 numbers or more: `[0.12, 0.5, 0.33, …]`, `1 2 3 4 5 6 7 8`.
pub(super) fn find_numbers(text: &str, hits: &mut Vec<Hit>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let Some(first_end) = number_at(bytes, i) else {
            i += 1;
            continue;
        };
        let start = i;
        let mut numbers = vec![(i, first_end)];
        let mut end = first_end;
        loop {
            let mut next = end;
            while next < bytes.len() && is_separator(at(bytes, next)) {
                next += 1;
            }
            match (next > end).then(|| number_at(bytes, next)).flatten() {
                Some(e) => {
                    numbers.push((next, e));
                    end = e;
                }
                None => break,
            }
        }
        if numbers.len() >= 8 {
            let shown: Vec<&str> = numbers.iter().take(2).map(|&(s, e)| shown_number(slice(text, s, e))).collect();
            let excerpt = format!("[{}, …] ({} numbers)", shown.join(", "), numbers.len());
            hits.push(Hit { start, end, kind: FindingKind::InputContent, excerpt });
        }
        i = end.max(i + 1);
    }
}

#[cfg(test)]
mod tests {
    use crate::labels::check::{assert_excerpts, assert_kinds};
    use crate::labels::FindingKind::InputContent;

    #[test]
    fn input_content_is_found() {
        assert_kinds(&[
            ("The quick brown fox jumps over the lazy dog and then runs into the forest", &[InputContent]),
            ("I really loved this movie, the acting was great and I would watch it again!", &[InputContent]),
            ("embedding [0.12, 0.5, 0.33, 0.91, -0.2, 1e-3, 0.07, 0.66, ...]", &[InputContent]),
            ("tokens=[101, 2054, 2003, 1996, 3007, 1997, 2605, 102]", &[InputContent]),
            ("1 2 3 4 5 6 7 8 9", &[InputContent]),
        ]);
    }

    #[test]
    fn excerpts_show_only_the_start() {
        assert_excerpts(&[
            ("[0.12, 0.5, 0.33, 0.91, -0.2, 1e-3, 0.07, 0.66]", "[0.12, 0.5, …] (8 numbers)"),
            ("[12345678901, 7, 3, 4, 5, 6, 7, 8]", "[***, 7, …] (8 numbers)"),
            ("The quick brown fox jumps over the lazy dog and then runs into the forest", "\"t*** …\" (15 words)"),
        ]);
    }
}
