//! The distinct labels (name and arguments, as written) of a partial file's events.
//!
//! A training window repeats a few dozen labels for hundreds of thousands of events. The first
//! pass gives each event the id of its label here; the second pass then scans each label once
//! for hygiene and edits the lines that share one as bytes, without parsing them again.

use std::borrow::Cow;
use std::collections::HashMap;

/// No entry: the second pass parses the line itself (counters, whose values change at every
/// sample, and lines past [`MAX_LABELS`]).
pub(super) const NO_LABEL: u32 = u32::MAX;

/// Most distinct labels a table keeps.
const MAX_LABELS: usize = 1 << 16;
/// Most bytes of label text a table keeps (each label's text is held twice: as its key and as
/// its entry), whatever the arguments' length.
const MAX_LABEL_BYTES: usize = 16 << 20;

/// A label's name and arguments, as raw JSON text.
type Label = (Option<Box<str>>, Option<Box<str>>);

/// Distinct `(name, args)` pairs, each kept as raw JSON text.
#[derive(Default)]
pub(super) struct LabelTable {
    ids: HashMap<Box<[u8]>, u32, foldhash::fast::RandomState>,
    entries: Vec<Label>,
    /// The key being looked up (reused: no allocation for a label already kept).
    key: Vec<u8>,
    /// Bytes of label text held.
    bytes: usize,
}

impl LabelTable {
    /// The id of the label `(name, args)` (raw JSON text), added if new; [`NO_LABEL`] once the
    /// table is full.
    pub(super) fn id(&mut self, name: Option<&str>, args: Option<&str>) -> u32 {
        self.key.clear();
        push_part(&mut self.key, name);
        push_part(&mut self.key, args);
        if let Some(&id) = self.ids.get(&self.key[..]) {
            return id;
        }
        if self.entries.len() >= MAX_LABELS || self.bytes + 2 * self.key.len() > MAX_LABEL_BYTES {
            return NO_LABEL;
        }
        self.bytes += 2 * self.key.len();
        let id = self.entries.len() as u32;
        self.ids.insert(self.key.clone().into_boxed_slice(), id);
        self.entries.push((name.map(Into::into), args.map(Into::into)));
        id
    }

    /// Moves `other`'s labels into this table: for each id of `other`, its id here.
    pub(super) fn absorb(&mut self, other: LabelTable) -> Vec<u32> {
        other.entries.into_iter().map(|(name, args)| self.id(name.as_deref(), args.as_deref())).collect()
    }

    /// The name of label `id`, unescaped.
    pub(super) fn name(&self, id: u32) -> Option<Cow<'_, str>> {
        self.entries.get(id as usize)?.0.as_deref().and_then(super::lines::unescape)
    }

    /// The arguments of label `id` as written (`None`: none, or empty).
    pub(super) fn raw_args(&self, id: u32) -> Option<&str> {
        self.entries.get(id as usize)?.1.as_deref().filter(|raw| *raw != "{}")
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Appends one part of a key: absent, or present with its text. Raw JSON text holds no NUL
/// byte (JSON escapes it), so the separator is unambiguous.
fn push_part(key: &mut Vec<u8>, part: Option<&str>) {
    match part {
        None => key.push(0),
        Some(text) => {
            key.push(1);
            key.extend_from_slice(text.as_bytes());
            key.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_labels_share_an_id_and_absent_differs_from_empty() {
        let mut t = LabelTable::default();
        let a = t.id(Some(r#""forward""#), None);
        assert_eq!(t.id(Some(r#""forward""#), None), a);
        let b = t.id(Some(r#""forward""#), Some("{}"));
        let c = t.id(None, Some(r#""forward""#));
        assert!(a != b && b != c && a != c);
        assert_eq!(t.name(a).as_deref(), Some("forward"));
        assert_eq!(t.raw_args(b), None, "empty args read as none");
        assert_eq!(t.name(NO_LABEL), None);
    }

    #[test]
    fn absorbing_maps_ids_and_keeps_names() {
        let mut one = LabelTable::default();
        let x = one.id(Some(r#""x""#), Some(r#"{"k":1}"#));
        let mut two = LabelTable::default();
        let y = two.id(Some(r#""y \"q\"""#), None);
        let x2 = two.id(Some(r#""x""#), Some(r#"{"k":1}"#));
        let map = one.absorb(two);
        assert_eq!(map[x2 as usize], x);
        assert_eq!(one.name(map[y as usize]).as_deref(), Some(r#"y "q""#));
        assert_eq!(one.raw_args(x), Some(r#"{"k":1}"#));
        assert_eq!(one.len(), 2);
    }

    #[test]
    fn a_full_table_answers_no_label() {
        let mut t = LabelTable::default();
        for i in 0..MAX_LABELS {
            assert_ne!(t.id(Some(&format!("\"n{i}\"")), None), NO_LABEL);
        }
        assert_eq!(t.id(Some(r#""one more""#), None), NO_LABEL);
        // One it already holds still has its id.
        assert_eq!(t.id(Some(r#""n7""#), None), 7);
    }

    #[test]
    fn long_arguments_fill_the_table_by_bytes() {
        let mut t = LabelTable::default();
        let args = |i: usize| format!(r#"{{"k":"{i}{}"}}"#, "x".repeat(1 << 20));
        let kept = (0..16).take_while(|&i| t.id(Some(r#""n""#), Some(&args(i))) != NO_LABEL).count();
        assert!((7..=8).contains(&kept), "{kept} labels of 1 MiB kept in 16 MiB (each held twice)");
        assert_eq!(t.id(Some(r#""short""#), None), kept as u32, "a short label still fits");
    }
}
