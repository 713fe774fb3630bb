//! The crate's error type: every CUPTI failure, with the call and the code.

use std::fmt;

use cudarc::cupti::sys::CUptiResult;

/// A `CUptiResult` error code, as a number and CUPTI's name for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultCode {
    /// The numeric value of the `CUptiResult`.
    pub value: u32,
    /// CUPTI's name, such as `CUPTI_ERROR_INVALID_PARAMETER`.
    pub name: String,
}

impl ResultCode {
    pub(crate) fn from_result(result: CUptiResult) -> Self {
        Self { value: result as u32, name: format!("{result:?}") }
    }
}

impl fmt::Display for ResultCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.value)
    }
}

/// Everything that can go wrong when talking to CUPTI.
///
/// No CUPTI call in this crate panics or returns a bare string: each failure names the call
/// (`cuptiActivityEnable`, ...) and, where CUPTI returned one, the code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CuptiError {
    /// No `libcupti` could be loaded under any of the names cudarc tries.
    #[error(
        "libcupti.so not found on the loader path (tried {tried}); add the folder holding \
         libcupti.so (CUDA's lib64, or extras/CUPTI/lib64) to LD_LIBRARY_PATH"
    )]
    LibraryNotFound {
        /// The file names that were tried, comma-separated.
        tried: String,
    },
    /// `libcupti` loaded but lacks a function this crate calls.
    #[error("libcupti was loaded but has no symbol {symbol} (a CUPTI older than this crate needs)")]
    MissingSymbol {
        /// The missing function.
        symbol: &'static str,
    },
    /// Another CUPTI client (Nsight Systems, PyTorch's profiler, ...) holds the callback API.
    #[error(
        "another CUPTI client is subscribed ({call} returned \
         CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
    )]
    OtherSubscriber {
        /// The call that was refused.
        call: &'static str,
    },
    /// A CUPTI call returned an error code.
    #[error("CUPTI error {code} from {call}")]
    Call {
        /// The CUPTI function.
        call: &'static str,
        /// What it returned.
        code: ResultCode,
    },
    /// cudarc's loader or a CUPTI wrapper panicked; the panic was caught.
    #[error("{call} panicked: {message}")]
    Panicked {
        /// What was being done.
        call: &'static str,
        /// The panic message.
        message: String,
    },
    /// A [`Collector`](crate::Collector) is already running in this process.
    #[error("a steptrace CUPTI collector is already running in this process (CUPTI is process-wide)")]
    AlreadyStarted,
    /// The collector could not start because CUPTI is not usable here.
    #[error("CUPTI is not available: {0}")]
    Unavailable(Box<CuptiError>),
    /// A [`CollectorConfig`](crate::CollectorConfig) value is out of range.
    #[error("invalid collector configuration: {0}")]
    InvalidConfig(&'static str),
    /// A collector method was called in the wrong state.
    #[error("{call}: {reason}")]
    State {
        /// The method.
        call: &'static str,
        /// Why it is not valid now.
        reason: &'static str,
    },
}

impl CuptiError {
    /// Converts a `CUptiResult` from `call` into `Ok` or the matching error.
    pub(crate) fn check(call: &'static str, result: CUptiResult) -> Result<(), CuptiError> {
        match result {
            CUptiResult::CUPTI_SUCCESS => Ok(()),
            CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => Err(CuptiError::OtherSubscriber { call }),
            other => Err(CuptiError::Call { call, code: ResultCode::from_result(other) }),
        }
    }

    /// The underlying cause, looking through [`CuptiError::Unavailable`].
    pub fn root(&self) -> &CuptiError {
        match self {
            CuptiError::Unavailable(inner) => inner.root(),
            other => other,
        }
    }

    /// The message of a caught panic payload.
    pub(crate) fn from_panic(call: &'static str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_owned()
        };
        CuptiError::Panicked { call, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_is_ok_and_errors_name_call_and_code() {
        assert_eq!(CuptiError::check("cuptiX", CUptiResult::CUPTI_SUCCESS), Ok(()));
        let err = CuptiError::check("cuptiActivityEnable", CUptiResult::CUPTI_ERROR_INVALID_KIND).unwrap_err();
        assert_eq!(err.to_string(), "CUPTI error CUPTI_ERROR_INVALID_KIND (21) from cuptiActivityEnable");
    }

    #[test]
    fn multiple_subscribers_becomes_other_subscriber() {
        let err = CuptiError::check("cuptiSubscribe", CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            .unwrap_err();
        assert_eq!(err, CuptiError::OtherSubscriber { call: "cuptiSubscribe" });
        assert!(err.to_string().starts_with("another CUPTI client is subscribed"));
    }

    #[test]
    fn root_looks_through_unavailable() {
        let inner = CuptiError::MissingSymbol { symbol: "cuptiGetVersion" };
        let outer = CuptiError::Unavailable(Box::new(inner.clone()));
        assert_eq!(outer.root(), &inner);
        assert!(outer.to_string().contains("no symbol cuptiGetVersion"));
    }

    #[test]
    fn panic_payloads_keep_their_message() {
        let payload: Box<dyn std::any::Any + Send> = Box::new(String::from("boom"));
        let err = CuptiError::from_panic("loading libcupti", payload.as_ref());
        assert_eq!(err.to_string(), "loading libcupti panicked: boom");
    }
}
