//! Checking one label: [`check_label`], the detectors it runs, how their
//! hits are merged into findings, and the fast path that skips most labels.

use super::finding::{Finding, FindingKind};
use super::{card, email, home, iban, input, national, pem, token, unc};

/// Checks one label, returning what it seems to leak, in order of position
/// (empty when the label looks clean).
///
/// # Examples
///
/// ```
/// use steptrace::hygiene::{check_label, FindingKind};
///
/// assert!(check_label("cubecl_runtime::client::launch_inner").is_empty());
/// assert!(check_label("ProfilerStep#12").is_empty());
///
/// let findings = check_label("load /home/alice/data.csv for alice@example.org");
/// let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
/// assert_eq!(kinds, [FindingKind::HomePath, FindingKind::Email]);
/// assert_eq!(findings[1].excerpt, "al***@***.org");
/// assert!(!findings[0].excerpt.contains("alice"));
/// ```
#[must_use]
pub fn check_label(text: &str) -> Vec<Finding> {
    check(text, Checks::ALL)
}

/// Which families of checks to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Checks {
    /// Natural-language text (`input::find_prose`).
    pub(super) prose: bool,
    /// Lists of numbers (`input::find_numbers`).
    pub(super) numbers: bool,
}

impl Checks {
    /// Every check.
    pub(super) const ALL: Checks = Checks { prose: true, numbers: true };
    /// For diagnostics (`partial_reason`, `backend`, ...): prose by design,
    /// so the natural-language check is skipped.
    pub(super) const DIAGNOSTIC: Checks = Checks { prose: false, numbers: true };
    /// For strings written by the tool itself (the run manifest): not taken
    /// from the input, so no input-content check runs.
    pub(super) const TOOL: Checks = Checks { prose: false, numbers: false };

    /// Whether running `self` runs every check of `other`.
    pub(super) fn covers(self, other: Checks) -> bool {
        (self.prose || !other.prose) && (self.numbers || !other.numbers)
    }

    /// The checks of `self` and of `other`.
    pub(super) fn with(self, other: Checks) -> Checks {
        Checks { prose: self.prose || other.prose, numbers: self.numbers || other.numbers }
    }
}

/// A finding and the byte range of the text it covers.
pub(super) struct Hit {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) kind: FindingKind,
    pub(super) excerpt: String,
}

/// Whether `text` is too short and plain for any check to fire: under 16
/// bytes (the shortest JWT-like run), with fewer than 9 digits (a social
/// security number has 9, a card number 13, an IBAN 13 or more), and
/// without the separators that addresses, paths, lists and assignments
/// need. Most labels are.
fn trivially_clean(text: &str) -> bool {
    text.len() < 16
        && text.bytes().filter(u8::is_ascii_digit).count() < 9
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'#' | b'-' | b'<' | b'>' | b'(' | b')'))
}

/// The findings of `checks` in `text`, in order of position.
pub(super) fn check(text: &str, checks: Checks) -> Vec<Finding> {
    let hits = hits(text, checks);
    // One finding per stretch of text and kind: hits are sorted by start,
    // so a hit overlaps an earlier one of its kind if it starts before the
    // furthest end seen for that kind.
    let mut reach: Vec<(FindingKind, usize)> = Vec::new();
    let mut findings = Vec::new();
    for hit in hits {
        match reach.iter_mut().find(|(kind, _)| *kind == hit.kind) {
            Some((_, end)) if hit.start < *end => *end = (*end).max(hit.end),
            Some((_, end)) => {
                *end = hit.end;
                findings.push(Finding { kind: hit.kind, excerpt: clip(hit.excerpt) });
            }
            None => {
                reach.push((hit.kind, hit.end));
                findings.push(Finding { kind: hit.kind, excerpt: clip(hit.excerpt) });
            }
        }
    }
    findings
}

/// Every hit in `text`, sorted by start.
pub(super) fn hits(text: &str, checks: Checks) -> Vec<Hit> {
    if trivially_clean(text) {
        return Vec::new();
    }
    let mut hits = Vec::new();
    email::find(text, &mut hits);
    token::find(text, &mut hits);
    pem::find(text, &mut hits);
    home::find(text, &mut hits);
    unc::find(text, &mut hits);
    card::find(text, &mut hits);
    national::find(text, &mut hits);
    iban::find(text, &mut hits);
    if checks.numbers {
        input::find_numbers(text, &mut hits);
    }
    if checks.prose {
        input::find_prose(text, &mut hits);
    }
    // An address inside a credential (`password=a@b.org`,
    // `https://user:pass@host.org`) is part of that credential.
    let mut tokens: Vec<(usize, usize)> =
        hits.iter().filter(|h| h.kind == FindingKind::Token).map(|h| (h.start, h.end)).collect();
    tokens.sort_unstable();
    // reach[i]: the furthest end among the first i + 1 tokens.
    let reach: Vec<usize> = tokens
        .iter()
        .scan(0, |furthest, &(_, end)| {
            *furthest = end.max(*furthest);
            Some(*furthest)
        })
        .collect();
    hits.retain(|h| {
        let starting_before = tokens.partition_point(|&(start, _)| start < h.end);
        let inside_token = starting_before > 0 && reach.get(starting_before - 1).is_some_and(|&end| end > h.start);
        h.kind != FindingKind::Email || !inside_token
    });
    hits.sort_by_key(|hit| (hit.start, hit.kind));
    hits
}

/// Excerpts are kept to 64 characters.
fn clip(excerpt: String) -> String {
    match excerpt.char_indices().nth(63) {
        Some((cut, _)) => format!("{}…", &excerpt[..cut]),
        None => excerpt,
    }
}

/// The kinds of what [`check_label`] finds in `text`.
#[cfg(test)]
pub(super) fn kinds(text: &str) -> Vec<FindingKind> {
    check_label(text).into_iter().map(|f| f.kind).collect()
}

/// Asserts what [`check_label`] finds in each label, by kind.
#[cfg(test)]
#[track_caller]
pub(super) fn assert_kinds(cases: &[(&str, &[FindingKind])]) {
    for &(label, expected) in cases {
        assert_eq!(kinds(label), expected, "{label:?}: {:?}", check_label(label));
    }
}

/// Asserts the excerpt of the first finding in each label.
#[cfg(test)]
#[track_caller]
pub(super) fn assert_excerpts(cases: &[(&str, &str)]) {
    for &(label, excerpt) in cases {
        let findings = check_label(label);
        assert_eq!(findings.first().map(|f| f.excerpt.as_str()), Some(excerpt), "{label:?}: {findings:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_labels_are_clean() {
        let clean = [
            "ProfilerStep#12",
            "train.step",
            "transfer.h2d",
            "cubecl_runtime::client::launch_inner",
            "burn_fusion::stream::execution::ExecutionMode",
            "kernel.name",
            "fusion<cubecl<cuda>>",
            "FusionBackend<CubeBackend<CudaRuntime, f32, i32, u8>>",
            "0x7f3a2b1c4d5e6f70",
            "7f3a2b1c4d5e6f70",
            "deadbeef",
            "0.21.0",
            "v1.2.3-rc.1",
            "1.85",
            "wait=1,warmup=1,active=2,repeat=2",
            "skip_first=10,wait=1,warmup=1,active=3,repeat=0",
            "linux",
            "macos",
            "windows",
            "x86_64",
            "aarch64",
            "steptrace 0.1.0",
            "steptrace-chrome-trace/1",
            "wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)",
            "cuda:0",
            "wgpu<vulkan>",
            "ndarray",
            "/usr/local/cuda/include",
            "/usr/local/cuda-12.4/targets/x86_64-linux/include/cuda_runtime.h",
            "/opt/home/shared/data",
            "/homework/report",
            "/mnt/data/Users/list",
            "-----BEGIN CERTIFICATE-----",
            "/home",
            "/root",
            "~",
            "shape=[32, 128, 768]",
            "[1, 3, 224, 224]",
            "strides=[150528, 50176, 224, 1]",
            "max_tokens=512",
            "num_tokens: 1024",
            "tokenizer=bpe",
            "pad_token=<pad>",
            "eos_token=</s>",
            "password_length=12",
            "require_password=false",
            "password=***",
            "api_key=${API_KEY}",
            "token: <redacted>",
            "user@host",
            "model@v2",
            "torch@2.1.0",
            "@torch.no_grad",
            "123e4567-e89b-12d3-a456-426614174000",
            "Float32MatmulTiling2DConfigV3Autotune",
            "MatmulTuneKeyCubeFusionOptimizationV2x86",
            "layers.0.attention.query.weight",
            "aten::convolution",
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            "Memcpy HtoD (Pageable -> Device)",
            "ampere_sgemm_128x64_tn",
            "the profiler finished inside the cycle: 1 of 2 active steps recorded",
            "2024-05-01T12:30:45.123Z",
            "epoch 3 step 120 loss 0.4312 lr 0.0003",
            "http://localhost:8080/metrics",
            "mask-rcnn",
            "hf_transformers_model_loader_function",
            "sk-learn",
            "Bearer",
            "bearer token missing",
            "ts=1714567890123456",
            "1714567890123451",
            "loss 0.4532015112830366",
            "dur 123456789012347",
            "baseTimeNanoseconds 1714567890123456789",
            "call 555-123-4567",
            "2024-05-01",
            "v123-45-6789",
            "SM90ABCDEFGHIJKLMNOPQRSTUVW",
            "DE89",
            r"\\?\C:\data",
            r"C:\\Program Files\\x",
            "~1.5 ms",
            // A trace's own numbers, quoted in a label.
            r#""ts": 1733140000123456, "dur": 4111111111111"#,
            "correlation 4111111 external id 5555555",
            "MatMul 4096x4096x4096",
            "shape 64x128",
            "0x7f4111111111",
            "",
        ];
        for label in clean {
            assert_eq!(check_label(label), [], "{label:?}");
        }
    }

    #[test]
    fn findings_of_several_detectors_combine() {
        use FindingKind::*;
        // An address inside a credential is part of the credential.
        assert_kinds(&[
            ("password=alice@example.org", &[Token]),
            ("mail alice@example.org from /home/alice/inbox", &[Email, HomePath]),
        ]);
    }

    #[test]
    fn fewer_checks_find_less() {
        let prose = "The quick brown fox jumps over the lazy dog and then runs into the forest";
        let numbers = "tokens=[101, 2054, 2003, 1996, 3007, 1997, 2605, 102]";
        let both = format!("{prose} {numbers} /home/alice/x");
        let found = |text: &str, checks| check(text, checks).into_iter().map(|f| f.kind).collect::<Vec<_>>();
        assert_eq!(found(prose, Checks::ALL), [FindingKind::InputContent]);
        assert_eq!(found(prose, Checks::DIAGNOSTIC), []);
        assert_eq!(found(numbers, Checks::DIAGNOSTIC), [FindingKind::InputContent]);
        assert_eq!(found(numbers, Checks::TOOL), []);
        assert_eq!(found(&both, Checks::TOOL), [FindingKind::HomePath]);
        assert!(Checks::ALL.covers(Checks::DIAGNOSTIC) && Checks::DIAGNOSTIC.covers(Checks::TOOL));
        assert!(!Checks::TOOL.covers(Checks::DIAGNOSTIC) && !Checks::DIAGNOSTIC.covers(Checks::ALL));
    }

    #[test]
    fn excerpts_never_trigger_findings_themselves() {
        let labels = [
            "alice@example.org",
            "password=hunter2",
            "Bearer abcdef0123456789",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
            "/home/alice/projects/run.py",
            "/Users/erin/x",
            "/root/.cache",
            "~/data",
            r"C:\Users\frank\x",
            "postgres://admin:pa55w0rd@db",
            "-----BEGIN EC PRIVATE KEY-----",
            "3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c",
            "dGhpcyBpcyBhIHNlY3JldCB0b2tlbiAxMjM0NTY3ODkw==",
            "[0.12, 0.5, 0.33, 0.91, -0.2, 1e-3, 0.07, 0.66]",
            "The quick brown fox jumps over the lazy dog and then runs into the forest",
            "4111 1111 1111 1111",
            "123-45-6789",
            "DE89 3704 0044 0532 0130 00",
            r"\\fileserver\share",
            "~alice/x",
        ];
        for label in labels {
            let findings = check_label(label);
            assert!(!findings.is_empty(), "{label:?}");
            for finding in findings {
                let warning = format!("name looks like {:?}: {}", finding.kind, finding.excerpt);
                assert_eq!(check_label(&warning), [], "{warning:?}");
            }
        }
    }

    fn fragment() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("alice@example.org".to_owned()),
            Just("password=hunter2".to_owned()),
            Just("Bearer abcdef0123456789".to_owned()),
            Just("AKIAIOSFODNN7EXAMPLE".to_owned()),
            Just("/home/bob/x".to_owned()),
            Just("C:\\Users\\carol".to_owned()),
            Just("~/data".to_owned()),
            Just("https://u:p@h.io".to_owned()),
            Just("3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c".to_owned()),
            Just("1, 2, 3, 4, 5, 6, 7, 8".to_owned()),
            Just("4111-1111-1111-1111".to_owned()),
            Just("5555555555554444".to_owned()),
            Just("078-05-1120".to_owned()),
            Just("GB82 WEST 1234 5698 7654 32".to_owned()),
            Just("\\\\nas\\share".to_owned()),
            Just("~bob/x".to_owned()),
            Just("the cat and the dog went to the park with a ball".to_owned()),
            "[ -~]{0,12}",
            any::<String>(),
        ]
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_checked_without_panicking(text in proptest::prelude::any::<String>()) {
            let _ = check_label(&text);
        }

        #[test]
        fn excerpts_are_short_and_masked(parts in proptest::collection::vec(fragment(), 1..5), glue in "[ ,;=:/]") {
            let text = parts.join(&glue);
            for finding in check_label(&text) {
                proptest::prop_assert!(finding.excerpt.chars().count() <= 64, "{:?}", finding);
                let warning = format!("label looks like {:?}: {}", finding.kind, finding.excerpt);
                proptest::prop_assert_eq!(check_label(&warning), vec![], "{}", warning);
            }
        }
    }

    #[test]
    fn the_fast_path_only_skips_what_no_check_could_flag() {
        assert!(trivially_clean("ProfilerStep#12"));
        assert!(trivially_clean("launch_inner"));
        // The shortest labels each check can flag are not skipped.
        for label in [
            "a@b.co",
            "~/x",
            "/root/x",
            "pwd:x",
            "1 2 3 4 5 6 7 8",
            "eyJhbGciOi.eyJz.",
            "s=1",
            "123-45-6789",
            "4222222222222",
            "NO9386011117947",
        ] {
            assert!(!trivially_clean(label), "{label}");
        }
        assert_eq!(kinds("eyJhbGciOi.eyJz."), [FindingKind::Token]);
        assert_eq!(kinds("123-45-6789"), [FindingKind::NationalId]);
        assert_eq!(kinds("4222222222222"), [FindingKind::Card]);
        assert_eq!(kinds("NO9386011117947"), [FindingKind::Iban]);
    }

    #[test]
    fn several_findings_come_in_text_order_without_duplicates() {
        let findings = check_label("x@example.com y@example.com password=Bearer abcdefghijkl");
        let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::Email, FindingKind::Email, FindingKind::Token]);
        assert_eq!(findings[2].to_string(), "token or secret: password=***");
    }

    #[test]
    fn odd_input_does_not_panic() {
        let odd = [
            "@",
            "@@@",
            "a@",
            "@b.c",
            ":",
            "::",
            "=",
            "==",
            "://",
            "://a:@",
            "~/",
            "/home/",
            "/home/*",
            "C:",
            "c:\\users",
            "\\\\users\\\\",
            "é@é.é",
            "ü/home/ü",
            "0x",
            "eyJ..",
            "...",
            "-",
            "1e",
            "[",
            "ǅǅǅ=ǅǅǅ password=ǅǅǅ",
        ];
        for text in odd {
            let _ = check_label(text);
        }
        let long = "a".repeat(100_000) + "@" + &"b.".repeat(50_000) + "com";
        assert_eq!(kinds(&long), [FindingKind::Email]);
        let _ = check_label(&"password=".repeat(20_000));
        let _ = check_label(&"1, ".repeat(50_000));
    }
}
