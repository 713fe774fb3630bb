//! NVTX ranges for Nsight (feature `nvtx`): steptrace's spans mirrored as ranges, so that
//! `nsys` and `ncu` show the same steps, phases and layers as the Chrome trace.
//!
//! The ranges go through NVIDIA's `nvtx` crate (NVTX 3, compiled in): no NVTX library is
//! loaded at run time. When no tool is attached (`nsys`, `ncu` and CUPTI set
//! `NVTX_INJECTION64_PATH`), every call returns at once, so steptrace's installers add the
//! layer only when that variable is set; the cost with and without a tool is in
//! `docs/benchmarks.md`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use nvtx::domain::{Range, RegisteredString};
use nvtx::{Domain, Payload};
use steptrace::format::names::{LAYER_NAME_CHARS, LAYER_SPAN, STEP_SPAN, TARGET};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The NVTX domain of steptrace's ranges, as Nsight lists it (the name [`NvtxLayer`] gives it).
pub const NVTX_DOMAIN: &str = "steptrace";

/// A `tracing` layer that mirrors steptrace's spans (target `steptrace`) as NVTX ranges in
/// the domain [`NVTX_DOMAIN`], in every step, recorded or not (Nsight chooses its own
/// window):
/// - a step is the range `ProfilerStep` with the step number as its payload;
/// - a layer span ([`steptrace::layer`]) is named by its layer, as in the trace (`conv1`);
/// - every other span by its name (`forward`, `backward`, `data.load`, ...).
///
/// Ranges are start/end ranges, so a span entered on one thread and left on another is
/// still one range. Other targets' spans are not mirrored.
///
/// [`install_profiler`](crate::backend::install_profiler) and the Learner wrapper add it
/// when steptrace-burn is built with its `nvtx` feature and a tool is attached
/// (`NVTX_INJECTION64_PATH` is set: with none, every range would return at once, and steptrace's own spans
/// are cheaper kept around tracing, see
/// [`Profiler::record_own_spans_directly`](steptrace::Profiler::record_own_spans_directly)).
/// A program that builds its own subscriber adds it next to steptrace's layer:
///
/// ```no_run
/// # fn docs() -> Result<(), steptrace::Error> {
/// use tracing_subscriber::layer::SubscriberExt;
/// let builder = steptrace::Profiler::builder("wait=1,warmup=1,active=3".parse()?);
/// let (layer, profiler) = builder.build_global::<tracing_subscriber::Registry>()?;
/// let subscriber = tracing_subscriber::registry().with(layer).with(steptrace_burn::NvtxLayer);
/// # drop((subscriber, profiler));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NvtxLayer;

/// Whether an NVTX tool is attached to this process: `nsys`, `ncu` and CUPTI name their
/// injection library in `NVTX_INJECTION64_PATH` before it starts.
pub(crate) fn tool_attached() -> bool {
    std::env::var_os("NVTX_INJECTION64_PATH").is_some_and(|path| !path.is_empty())
}

fn domain() -> &'static Domain {
    static DOMAIN: OnceLock<Domain> = OnceLock::new();
    DOMAIN.get_or_init(|| Domain::new(c"steptrace"))
}

/// What a mirrored span's ranges are called, registered once per span.
struct Named {
    message: RegisteredString<'static>,
    step: Option<u64>,
}

/// The ranges of a span that is entered now (more than one when it is entered again before
/// it is left).
#[derive(Default)]
struct Open(Vec<Range<'static>>);

/// The fields the range's name comes from: a layer's `name`, a step's `step`.
#[derive(Default)]
struct Fields {
    name: Option<String>,
    step: Option<u64>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "name" {
            self.name = Some(value.to_owned());
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "step" {
            self.step = Some(value);
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "step" {
            self.step = u64::try_from(value).ok();
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "name" && self.name.is_none() {
            self.name = Some(format!("{value:?}"));
        }
    }
}

/// The range name of a steptrace span called `span` with a `name` field `layer`: a layer
/// span goes by its layer's name (control characters dropped, at most
/// [`LAYER_NAME_CHARS`] characters), any other span by its own name.
pub(crate) fn range_name(span: &str, layer: Option<&str>) -> String {
    match layer {
        Some(name) if span == LAYER_SPAN => {
            let clean: String = name.chars().filter(|c| !c.is_control()).take(LAYER_NAME_CHARS).collect();
            if clean.is_empty() {
                LAYER_SPAN.to_owned()
            } else {
                clean
            }
        }
        _ => span.to_owned(),
    }
}

/// The registered string of a span's range name, registered once per name and thread: the
/// domain's own registry takes a lock and allocates on every call.
fn registered(span: &'static str, layer: Option<&str>) -> RegisteredString<'static> {
    thread_local! {
        static NAMES: RefCell<HashMap<String, RegisteredString<'static>>> = RefCell::new(HashMap::new());
    }
    let key: &str = match layer {
        Some(name) if span == LAYER_SPAN => name,
        _ => span,
    };
    NAMES.with(|names| {
        if let Some(found) = names.borrow().get(key) {
            return *found;
        }
        let message = domain().register_string(nvtx::Str::from_string_lossy(range_name(span, layer)));
        names.borrow_mut().insert(key.to_owned(), message);
        message
    })
}

impl<S> Layer<S> for NvtxLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if meta.target() != TARGET {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let step = if meta.name() == STEP_SPAN { fields.step } else { None };
        let message = registered(meta.name(), fields.name.as_deref());
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Named { message, step });
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let Some(&mut Named { message, step }) = extensions.get_mut::<Named>() else { return };
        let mut attributes = domain().event_attributes_builder().message(message);
        if let Some(step) = step {
            attributes = attributes.payload(Payload::Uint64(step));
        }
        let range = domain().range(attributes.build());
        match extensions.get_mut::<Open>() {
            Some(open) => open.0.push(range),
            None => extensions.insert(Open(vec![range])),
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        // Dropping the range ends it.
        let range = span.extensions_mut().get_mut::<Open>().and_then(|open| open.0.pop());
        drop(range);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_span_is_named_by_its_layer_and_others_by_their_own_name() {
        assert_eq!(range_name(LAYER_SPAN, Some("encoder.layer2")), "encoder.layer2");
        assert_eq!(range_name(LAYER_SPAN, Some("a\nb")), "ab");
        assert_eq!(range_name(LAYER_SPAN, Some("\n")), LAYER_SPAN);
        assert_eq!(range_name(LAYER_SPAN, None), LAYER_SPAN);
        assert_eq!(range_name("forward", Some("ignored")), "forward");
        let long = "x".repeat(LAYER_NAME_CHARS + 10);
        assert_eq!(range_name(LAYER_SPAN, Some(&long)).chars().count(), LAYER_NAME_CHARS);
    }
}
