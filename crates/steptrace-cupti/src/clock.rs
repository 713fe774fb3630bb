//! From CUPTI's clock to the host's `Instant`.
//!
//! CUPTI timestamps are nanoseconds on CUPTI's own clock. A [`ClockPair`] reads
//! `cuptiGetTimestamp` between two `Instant::now()` calls and takes the midpoint; the
//! bracket width bounds the error of that pairing. [`ClockMap::fit`] takes the pairs read
//! at a window's open and close and fits an offset and a rate (drift) through them.

use std::time::{Duration, Instant};

use crate::error::CuptiError;
use crate::ffi::Lib;

/// One simultaneous reading of the host clock and CUPTI's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockPair {
    /// Host time: the midpoint of the bracket around the CUPTI reading.
    pub host: Instant,
    /// `cuptiGetTimestamp`, ns.
    pub cupti_ns: u64,
    /// Width of the bracket (the two `Instant::now()` calls); the pairing is off by at most
    /// half of it.
    pub bracket: Duration,
}

impl ClockPair {
    /// Builds a pair from known values (for tests and replays).
    pub fn new(host: Instant, cupti_ns: u64, bracket: Duration) -> Self {
        Self { host, cupti_ns, bracket }
    }

    /// Reads both clocks: the best (narrowest bracket) of three readings.
    pub fn sample() -> Result<ClockPair, CuptiError> {
        Self::sample_from(Lib::load()?)
    }

    pub(crate) fn sample_from(lib: Lib) -> Result<ClockPair, CuptiError> {
        Self::sample_with(|| lib.timestamp())
    }

    /// [`ClockPair::sample`] with any CUPTI-clock reader.
    pub(crate) fn sample_with<E>(mut read: impl FnMut() -> Result<u64, E>) -> Result<ClockPair, E> {
        let mut read_pair = || -> Result<ClockPair, E> {
            let before = Instant::now();
            let cupti_ns = read()?;
            let after = Instant::now();
            let bracket = after - before;
            Ok(ClockPair { host: before + bracket / 2, cupti_ns, bracket })
        };
        let mut best = read_pair()?;
        for _ in 0..2 {
            let pair = read_pair()?;
            if pair.bracket < best.bracket {
                best = pair;
            }
        }
        Ok(best)
    }

    /// Half the bracket: the largest possible error of this pairing.
    pub fn uncertainty(&self) -> Duration {
        self.bracket / 2
    }
}

/// A linear map from CUPTI ns to host time: `host = open.host + (cupti - open.cupti) * rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockMap {
    anchor: ClockPair,
    rate: f64,
    fitted: bool,
    uncertainty: Duration,
    rate_uncertainty: f64,
}

impl ClockMap {
    /// Fits offset and rate through two pairs, normally read at a window's open and close.
    ///
    /// If the pairs do not span time on both clocks (same reading, or `close` not after
    /// `open` on either clock), the map falls back to [`ClockMap::offset_only`] at `open`:
    /// rate 1, and [`ClockMap::is_fitted`] is false.
    pub fn fit(open: ClockPair, close: ClockPair) -> ClockMap {
        let spans = close.cupti_ns > open.cupti_ns && close.host > open.host;
        if !spans {
            let mut map = ClockMap::offset_only(open);
            map.uncertainty = open.uncertainty().max(close.uncertainty());
            return map;
        }
        let host_span = (close.host - open.host).as_nanos() as f64;
        let cupti_span = (close.cupti_ns - open.cupti_ns) as f64;
        let pairing = (open.uncertainty() + close.uncertainty()).as_nanos() as f64;
        ClockMap {
            anchor: open,
            rate: host_span / cupti_span,
            fitted: true,
            uncertainty: open.uncertainty().max(close.uncertainty()),
            rate_uncertainty: pairing / cupti_span,
        }
    }

    /// A map from one pair, assuming both clocks run at the same rate.
    pub fn offset_only(pair: ClockPair) -> ClockMap {
        ClockMap { anchor: pair, rate: 1.0, fitted: false, uncertainty: pair.uncertainty(), rate_uncertainty: 0.0 }
    }

    /// Host ns per CUPTI ns.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// How much faster the host clock ran than CUPTI's, in parts per million.
    pub fn drift_ppm(&self) -> f64 {
        (self.rate - 1.0) * 1e6
    }

    /// The bound on [`ClockMap::drift_ppm`]'s error that comes from the pairings' brackets.
    pub fn drift_uncertainty_ppm(&self) -> f64 {
        self.rate_uncertainty * 1e6
    }

    /// Whether a rate was fitted (false: offset only).
    pub fn is_fitted(&self) -> bool {
        self.fitted
    }

    /// The larger of the two pairings' errors: between the pairs, a mapped time is off by
    /// about this much (plus drift beyond a straight line).
    pub fn uncertainty(&self) -> Duration {
        self.uncertainty
    }

    /// Signed host ns from `origin` to the host time of `cupti_ns`.
    pub fn offset_from(&self, origin: Instant, cupti_ns: u64) -> i128 {
        let anchor_from_origin = signed_ns(self.anchor.host, origin);
        let cupti_delta = i128::from(cupti_ns) - i128::from(self.anchor.cupti_ns);
        anchor_from_origin + (cupti_delta as f64 * self.rate).round() as i128
    }

    /// The host `Instant` of `cupti_ns`; `None` if it is not representable.
    pub fn to_instant(&self, cupti_ns: u64) -> Option<Instant> {
        let offset = self.offset_from(self.anchor.host, cupti_ns);
        let magnitude = Duration::from_nanos(u64::try_from(offset.unsigned_abs()).ok()?);
        if offset >= 0 {
            self.anchor.host.checked_add(magnitude)
        } else {
            self.anchor.host.checked_sub(magnitude)
        }
    }

    /// The CUPTI ns of a host `Instant` (the inverse of [`ClockMap::to_instant`]); `None`
    /// before CUPTI's zero.
    pub fn to_cupti_ns(&self, host: Instant) -> Option<u64> {
        let host_delta = signed_ns(host, self.anchor.host) as f64;
        let cupti = i128::from(self.anchor.cupti_ns) + (host_delta / self.rate).round() as i128;
        u64::try_from(cupti).ok()
    }

    /// Time from `origin` to `cupti_ns` on the host clock; `None` if it is before `origin`.
    pub fn since(&self, origin: Instant, cupti_ns: u64) -> Option<Duration> {
        let offset = self.offset_from(origin, cupti_ns);
        let ns = u64::try_from(offset).ok()?;
        Some(Duration::from_nanos(ns))
    }

    /// The host-clock length of a CUPTI interval (`end_ns` before `start_ns` gives zero).
    pub fn duration(&self, start_ns: u64, end_ns: u64) -> Duration {
        let cupti = end_ns.saturating_sub(start_ns) as f64;
        Duration::from_nanos((cupti * self.rate).round() as u64)
    }
}

/// `a - b` in signed nanoseconds.
fn signed_ns(a: Instant, b: Instant) -> i128 {
    if a >= b {
        (a - b).as_nanos() as i128
    } else {
        -((b - a).as_nanos() as i128)
    }
}

#[cfg(test)]
#[path = "clock_tests.rs"]
mod tests;
