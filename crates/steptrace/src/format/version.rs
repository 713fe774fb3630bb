//! The format tag and its check.

use std::fmt;
use std::str::FromStr;

/// The name part of the format tag.
pub const FORMAT_NAME: &str = "steptrace-chrome-trace";
/// The major version this crate writes and reads. Readers accept files of
/// this major version and older; a newer one means fields this crate does
/// not know may change what the file means.
pub const FORMAT_MAJOR: u32 = 1;

/// A parsed format tag, `steptrace-chrome-trace/MAJOR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatVersion {
    /// The major version.
    pub major: u32,
}

impl FormatVersion {
    /// The version this crate writes.
    pub const CURRENT: FormatVersion = FormatVersion { major: FORMAT_MAJOR };
}

impl fmt::Display for FormatVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{FORMAT_NAME}/{}", self.major)
    }
}

impl FromStr for FormatVersion {
    type Err = VersionError;

    fn from_str(tag: &str) -> Result<Self, Self::Err> {
        let unknown = || VersionError::Unreadable { found: tag.to_owned() };
        let major = tag.strip_prefix(FORMAT_NAME).and_then(|rest| rest.strip_prefix('/')).ok_or_else(unknown)?;
        let major = major.split('.').next().unwrap_or_default();
        Ok(FormatVersion { major: major.parse().map_err(|_| unknown())? })
    }
}

/// A format tag this crate cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// The file was written by a newer steptrace.
    #[error(
        "this trace is in format {found}, newer than {supported}, the newest this steptrace reads: \
         upgrade steptrace to read it"
    )]
    Newer {
        /// The file's version.
        found: FormatVersion,
        /// The newest version this crate reads.
        supported: FormatVersion,
    },
    /// The tag names steptrace but cannot be parsed.
    #[error("unreadable steptrace format tag `{found}` (expected `{FORMAT_NAME}/N`)")]
    Unreadable {
        /// The tag as written.
        found: String,
    },
}

/// Checks a file's `metadata.format` tag.
///
/// Returns `Ok(None)` for a tag that is not steptrace's (a foreign trace is
/// read as it is), `Ok(Some(version))` for a version this crate reads.
///
/// # Errors
///
/// [`VersionError::Newer`] for a newer major version, and
/// [`VersionError::Unreadable`] for a steptrace tag that does not parse.
///
/// ```
/// use steptrace::format::{check_version, FormatVersion, VersionError};
/// assert_eq!(check_version("steptrace-chrome-trace/1"), Ok(Some(FormatVersion { major: 1 })));
/// assert_eq!(check_version("kineto"), Ok(None));
/// let err = check_version("steptrace-chrome-trace/2").unwrap_err();
/// assert!(matches!(err, VersionError::Newer { .. }));
/// assert!(err.to_string().contains("steptrace-chrome-trace/2"));
/// assert!(err.to_string().contains("steptrace-chrome-trace/1"));
/// ```
pub fn check_version(tag: &str) -> Result<Option<FormatVersion>, VersionError> {
    if !tag.starts_with("steptrace") {
        return Ok(None);
    }
    let version: FormatVersion = tag.parse()?;
    if version.major > FORMAT_MAJOR {
        return Err(VersionError::Newer { found: version, supported: FormatVersion::CURRENT });
    }
    Ok(Some(version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_compare() {
        assert_eq!(FormatVersion::CURRENT.to_string(), "steptrace-chrome-trace/1");
        assert_eq!(check_version("steptrace-chrome-trace/0"), Ok(Some(FormatVersion { major: 0 })));
        assert_eq!(check_version("steptrace-chrome-trace/1.3"), Ok(Some(FormatVersion { major: 1 })));
        assert!(matches!(check_version("steptrace-chrome-trace/x"), Err(VersionError::Unreadable { .. })));
        assert!(matches!(check_version("steptrace-json"), Err(VersionError::Unreadable { .. })));
        assert!(matches!(
            check_version("steptrace-chrome-trace/12"),
            Err(VersionError::Newer { found: FormatVersion { major: 12 }, .. })
        ));
        assert_eq!(check_version(""), Ok(None));
    }
}
