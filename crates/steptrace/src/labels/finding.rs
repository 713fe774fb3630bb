//! What a check finds: its kind, a masked excerpt, and where it was found.

use std::fmt;

/// What a label seems to leak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FindingKind {
    /// An e-mail address.
    Email,
    /// A credential: a bearer or API token, an access key, a password
    /// assignment, a JWT, a long hex or base64 run.
    Token,
    /// A path inside a user's home directory (`/home/USER`, `~USER/`, ...).
    HomePath,
    /// A path on a network share (`\\server\share\…`).
    NetworkPath,
    /// A payment card number (issuer prefix, length and Luhn check digit).
    Card,
    /// A national identifier: a US social security number.
    NationalId,
    /// A bank account number: an IBAN with valid check digits.
    Iban,
    /// Content of the program's input: natural-language text or a long list
    /// of numbers.
    InputContent,
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FindingKind::Email => "e-mail address",
            FindingKind::Token => "token or secret",
            FindingKind::HomePath => "home directory path",
            FindingKind::NetworkPath => "network share path",
            FindingKind::Card => "payment card number",
            FindingKind::NationalId => "national identifier",
            FindingKind::Iban => "bank account number (IBAN)",
            FindingKind::InputContent => "input content",
        })
    }
}

/// Something a label seems to leak.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Finding {
    /// What it seems to be.
    pub kind: FindingKind,
    /// A short excerpt with the sensitive part masked, for example
    /// `al***@***.org`.
    pub excerpt: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.excerpt)
    }
}

/// A [`Finding`] and where in a trace it was found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocatedFinding {
    /// Where: `event 12 name`, `event 12 cat`, `event 3 args.user`,
    /// `event 3 args.user (key)`, `thread name tid 4`, `process name pid
    /// 1`, `metadata.manifest.data_path`, ... from [`scan_trace`](crate::read::hygiene::scan_trace); `name`,
    /// `argument key`, the argument's key, `manifest.data_path`, ... from
    /// the trace sink's checks (see [`LabelScanner`]).
    ///
    /// [`scan_trace`]: crate::read::hygiene::scan_trace
    /// [`LabelScanner`]: super::LabelScanner
    pub location: String,
    /// What was found.
    pub finding: Finding,
}

impl fmt::Display for LocatedFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.finding)
    }
}
