//! Can CUPTI be used in this process? Answered without a CUDA device and without panicking.

use std::fmt;

use crate::collector;
use crate::error::CuptiError;
use crate::ffi::{guarded, Lib};

/// The state of CUPTI's callback API, which launch records use by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackApi {
    /// A subscription was taken and released: the collector can subscribe.
    Free,
    /// This crate's own [`Collector`](crate::Collector) holds the subscription now.
    HeldByCollector,
    /// Subscribing failed, usually because another CUPTI client is subscribed
    /// ([`CuptiError::OtherSubscriber`]). Kernel, copy and memset records still work.
    Blocked(CuptiError),
    /// Not checked, because libcupti itself is not usable.
    Unknown,
}

/// What [`probe`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// `cuptiGetVersion`, when libcupti loaded.
    pub version: Option<u32>,
    /// Why CUPTI cannot be used; `None` when it can.
    pub error: Option<CuptiError>,
    /// Whether launch records can come from the callback API.
    pub callback_api: CallbackApi,
}

impl Probe {
    /// True when libcupti loaded, has every function this crate calls, and answered.
    pub fn is_available(&self) -> bool {
        self.error.is_none()
    }

    /// A human reason when CUPTI is not available (or when the callback API is blocked),
    /// e.g. "libcupti.so not found on the loader path (...)".
    pub fn reason(&self) -> Option<String> {
        match (&self.error, &self.callback_api) {
            (Some(e), _) => Some(e.to_string()),
            (None, CallbackApi::Blocked(e)) => Some(format!("launch records unavailable: {e}")),
            _ => None,
        }
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.error, self.version) {
            (Some(e), _) => write!(f, "CUPTI not available: {e}"),
            (None, version) => {
                write!(f, "CUPTI available (cuptiGetVersion = {})", version.unwrap_or(0))?;
                match &self.callback_api {
                    CallbackApi::Free => write!(f, "; callback API free"),
                    CallbackApi::HeldByCollector => {
                        write!(f, "; callback API held by our collector")
                    }
                    CallbackApi::Blocked(e) => write!(f, "; callback API blocked: {e}"),
                    CallbackApi::Unknown => Ok(()),
                }
            }
        }
    }
}

/// Checks that libcupti loads (before any cudarc CUPTI call, since cudarc's loader panics
/// on a missing library), that it has every function this crate calls, and its version;
/// then whether the callback API can be subscribed to. Needs no CUDA device.
pub fn probe() -> Probe {
    let lib = match Lib::load() {
        Ok(lib) => lib,
        Err(error) => return Probe { version: None, error: Some(error), callback_api: CallbackApi::Unknown },
    };
    let callback_api = if collector::is_active() {
        CallbackApi::HeldByCollector
    } else {
        let checked = guarded("probing cuptiSubscribe", || {
            let handle = lib.subscribe(None)?;
            lib.unsubscribe(handle)
        });
        match checked {
            Ok(()) => CallbackApi::Free,
            Err(e) => CallbackApi::Blocked(e),
        }
    };
    Probe { version: Some(lib.version()), error: None, callback_api }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_display() {
        let missing = Probe {
            version: None,
            error: Some(CuptiError::LibraryNotFound { tried: "libcupti.so".into() }),
            callback_api: CallbackApi::Unknown,
        };
        assert!(!missing.is_available());
        assert!(missing.reason().unwrap().starts_with("libcupti.so not found on the loader path"));
        assert!(missing.to_string().starts_with("CUPTI not available: libcupti.so not found"));

        let blocked = Probe {
            version: Some(130001),
            error: None,
            callback_api: CallbackApi::Blocked(CuptiError::OtherSubscriber { call: "cuptiSubscribe" }),
        };
        assert!(blocked.is_available());
        assert!(blocked.reason().unwrap().contains("another CUPTI client is subscribed"));
        assert!(blocked.to_string().starts_with("CUPTI available (cuptiGetVersion = 130001)"));

        let free = Probe { version: Some(18), error: None, callback_api: CallbackApi::Free };
        assert_eq!(free.reason(), None);
        assert_eq!(free.to_string(), "CUPTI available (cuptiGetVersion = 18); callback API free");
    }
}
