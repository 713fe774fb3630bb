//! Phase spans for a `TrainStep` of your own: [`forward`], [`loss`] and [`backward`].
//!
//! burn-train calls your `TrainStep::step` inside its loop, so its parts are not in any span
//! unless you put them there. With them, a report splits the step's host time by phase, and
//! kernel attribution knows which kernels are the forward pass: a layer without a
//! [`layer`](crate::layer) span is then named after the parameters it reads, as in a
//! [`Session`](crate::Session).
//!
//! ```
//! # use burn::prelude::*;
//! # use burn::nn::{Linear, LinearConfig};
//! # let device = Device::flex().autodiff();
//! # let linear: Linear = LinearConfig::new(2, 2).init(&device);
//! # let x = Tensor::<2>::zeros([4, 2], &device);
//! use steptrace_burn::learner;
//! let logits = learner::forward(|| linear.forward(x));
//! let loss = learner::loss(|| logits.mean());
//! let grads = learner::backward(|| loss.backward());
//! # drop(grads);
//! ```

use steptrace::format::names::{BACKWARD, FORWARD, LOSS};

/// Runs `f` in a `forward` span.
pub fn forward<T>(f: impl FnOnce() -> T) -> T {
    let out = {
        let _span = steptrace::own_span!(FORWARD);
        f()
    };
    super::watch::reached(FORWARD);
    out
}

/// Runs `f` in a `loss` span.
pub fn loss<T>(f: impl FnOnce() -> T) -> T {
    let out = {
        let _span = steptrace::own_span!(LOSS);
        f()
    };
    super::watch::reached(LOSS);
    out
}

/// Runs `f` in a `backward` span.
pub fn backward<T>(f: impl FnOnce() -> T) -> T {
    let out = {
        let _span = steptrace::own_span!(BACKWARD);
        f()
    };
    super::watch::reached(BACKWARD);
    out
}
