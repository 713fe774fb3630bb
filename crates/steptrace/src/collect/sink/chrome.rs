//! The tracing-chrome layer the sink streams through.

use std::io;

use tracing_chrome::{ChromeLayer, ChromeLayerBuilder, EventOrSpan, FlushGuard};
use tracing_core::Subscriber;
use tracing_subscriber::registry::LookupSpan;

use crate::collect::gate::{tagged_category, LayerName, MessageVisitor, StepNumber};
use crate::format::names::{step_name, LAYER_SPAN, STEP_SPAN};

/// The longest event name kept; longer messages are cut.
const MAX_EVENT_NAME: usize = 96;

/// A Chrome layer writing nowhere until the profiler gives it a segment
/// file: no source locations (they hold absolute paths), steptrace's names,
/// and categories tagged with steptrace's thread ids (see
/// [`format::tag`](crate::format::tag)).
pub(crate) fn chrome_layer<S>(include_args: bool) -> (ChromeLayer<S>, FlushGuard)
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    ChromeLayerBuilder::<S>::new()
        .writer(io::sink())
        .include_args(include_args)
        .include_locations(false)
        .name_fn(Box::new(render_name))
        .category_fn(Box::new(|item| {
            tagged_category(match item {
                EventOrSpan::Span(span) => span.metadata().target(),
                EventOrSpan::Event(event) => event.metadata().target(),
            })
        }))
        .build()
}

fn render_name<S>(item: &EventOrSpan<'_, '_, S>) -> String
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    match item {
        EventOrSpan::Span(span) if span.name() == STEP_SPAN => match span.extensions().get::<StepNumber>() {
            Some(StepNumber(n)) => step_name(*n),
            None => span.name().to_owned(),
        },
        EventOrSpan::Span(span) if span.name() == LAYER_SPAN => match span.extensions().get::<LayerName>() {
            Some(LayerName(name)) => name.clone(),
            None => span.name().to_owned(),
        },
        EventOrSpan::Span(span) => span.name().to_owned(),
        EventOrSpan::Event(event) => event_name(event),
    }
}

/// An event's name in the trace. tracing names events "event file:line", which may hold an
/// absolute source path: the message is used instead (else the target), cut to
/// [`MAX_EVENT_NAME`] bytes.
pub(crate) fn event_name(event: &tracing_core::Event<'_>) -> String {
    let mut visitor = MessageVisitor(None);
    event.record(&mut visitor);
    let mut name = visitor.0.unwrap_or_else(|| event.metadata().target().to_owned());
    if name.len() > MAX_EVENT_NAME {
        let cut = (0..=MAX_EVENT_NAME).rev().find(|i| name.is_char_boundary(*i)).unwrap_or(0);
        name.truncate(cut);
    }
    name
}
