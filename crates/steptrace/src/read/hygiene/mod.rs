//! Label hygiene: flags span names, argument keys and values, thread names
//! and metadata strings that look like secrets, private paths or input
//! content.
//!
//! Traces get shared: attached to issues, uploaded to viewers. A label that
//! carries an e-mail address, an API key, a home directory or a sample of
//! the training data leaks it. [`check_label`] inspects one string;
//! [`scan_trace`] inspects every string of a parsed trace, in every field
//! of every event whether steptrace reads it or not, and says where each
//! finding is; [`redact_trace`] replaces what it flags. Both it and the trace sink, which checks each file as it
//! finalises it, feed one [`LabelScanner`]: it reports each offending string
//! once, at its first location, counts every occurrence (as many as a
//! redaction replaces), and bounds the memory it spends.
//!
//! The checks are heuristics, tuned to stay quiet on ordinary labels
//! (`ProfilerStep#12`, `cubecl_runtime::client::launch_inner`,
//! `fusion<cubecl<cuda>>`, `0x7f3a2b1c`, `wait=1,warmup=1,active=2`):
//!
//! - [`FindingKind::Email`]: `local@domain.tld` with an alphabetic TLD.
//! - [`FindingKind::Token`]: `Bearer` tokens; AWS-style key ids
//!   (`AKIA…`, `ASIA…`); well-known token prefixes (`ghp_`, `github_pat_`,
//!   `glpat-`, `hf_`, `sk-`, `xoxb-`, `AIza`, …), also behind a prefix of
//!   their own (`key_AKIA…`, `extra_sk_live_…`: a token may start after any
//!   `_` or `-`); private keys in PEM form, the whole block from its
//!   `-----BEGIN … PRIVATE KEY-----` line to its end line (or, in an array
//!   of lines, every item up to the end line), and key bodies of 64- or
//!   76-character base64 lines without their header; JWTs (`eyJ….….…`) and
//!   other `a.b.c` runs of three long mixed segments; hex runs of 32 digits
//!   or more; base64 runs of 32 characters or more that mix cases and
//!   digits like random text does; `password=…`, `api_key: …` and similar
//!   assignments; credentials in URLs (`https://user:pass@host`).
//! - [`FindingKind::HomePath`]: `/home/USER`, `/Users/USER`, `/root/…`,
//!   `~/...`, `~USER/...`, `C:\Users\USER` (not generic paths such as
//!   `/usr/local/cuda/include`).
//! - [`FindingKind::NetworkPath`]: network shares, `\\server\share\…`,
//!   also JSON-escaped (`\\\\server\\share`); not device paths
//!   (`\\?\C:\…`, `\\.\pipe\…`).
//! - [`FindingKind::Card`]: payment card numbers, 13 to 19 digits in one
//!   run or in groups separated by spaces or dashes, as strings or as JSON
//!   numbers, with an issuer's prefix for their length and a valid Luhn
//!   check digit (so that timestamps and other large numbers stay quiet);
//!   a JSON number under the key of one of the trace's own figures (`ts`,
//!   `dur`, `pid`, `id`, a time, a duration, a seed, a size) is none.
//! - [`FindingKind::NationalId`]: US social security numbers,
//!   `ddd-dd-dddd`, but not the numbers never issued (area 000, 666 or
//!   900–999, group 00, serial 0000).
//! - [`FindingKind::Iban`]: IBANs, compact or in groups of four, of a
//!   known country's length, with valid mod-97 check digits.
//! - [`FindingKind::InputContent`]: natural-language text (more than 48
//!   characters, at least 8 words, mostly plain words, with several common
//!   English function words), and lists of 8 numbers or more (`[0.12, 0.5,
//!   0.33, …]`); in [`scan_trace`], also JSON arrays of 16 numbers or more
//!   in any field of an event (not in the metadata, where numbers are
//!   settings). steptrace's own descriptions are never input content: the
//!   metadata's `device_activity` (`kinds`, `source`, ...) and a device
//!   event's `timing` and `attribution` arguments; the same words elsewhere
//!   are.
//!
//! Each [`Finding`] carries a short excerpt with the sensitive part masked
//! (`al***@***.org`, `password=***`, `/home/al***/…`), so that findings can
//! be logged, or written to a trace's metadata, without leaking what they
//! flag; excerpts never trigger a finding themselves.
//!
//! One file per detector: `email`, `token`, `pem`, `home`, `unc`, `card`,
//! `national`, `iban`, `input` (over the byte helpers of `text`); `check`
//! runs them on one label; `walk` visits every string of a trace (and every
//! number that is a card number), for `scan` (which collects findings,
//! located by `location`) and for `redact` (which replaces them).

mod card;
mod check;
mod email;
mod finding;
mod home;
mod iban;
mod input;
mod location;
mod national;
mod pem;
mod redact;
mod scan;
mod text;
mod token;
mod unc;
mod walk;

pub use check::check_label;
pub use finding::{Finding, FindingKind, LocatedFinding};
pub use redact::{redact_label, redact_trace, redact_trace_value};
pub(crate) use redact::Redaction;
pub use scan::{scan_trace, LabelScanner, ScanSource};
