//! Label checks shared by the writer and the reader: the detectors, the
//! walk of every string of a trace's JSON, and the [`LabelScanner`]. The
//! trace sink checks each file it finalises with them; the reader's
//! `hygiene` module (the public face of these items, where the checks are
//! described) adds scanning and redacting a parsed trace.
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
pub(crate) use redact::Redaction;
pub use redact::{redact_label, redact_trace_value};
pub use scan::LabelScanner;
