//! The stamp layer: at each boundary of a steptrace span, the next id of burn-fusion's tensor
//! counter, taken on the thread that crosses it (see [`spans`](super::spans)).

use std::fmt;
use std::sync::Arc;

use steptrace::format::names::{LAYER_NAME_CHARS, LAYER_SPAN, TARGET};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::Label;

/// A `tracing` layer that stamps steptrace's spans for kernel attribution while a window
/// records it; outside one it costs a relaxed atomic load per steptrace span.
///
/// [`install_profiler`](crate::backend::install_profiler) and the Learner wrapper add it. A
/// program that builds its own subscriber adds it next to steptrace's layer:
///
/// ```no_run
/// # fn docs() -> Result<(), steptrace::Error> {
/// use tracing_subscriber::layer::SubscriberExt;
/// let builder = steptrace::Profiler::builder("wait=1,warmup=1,active=3".parse()?);
/// let (layer, profiler) = builder.build_global::<tracing_subscriber::Registry>()?;
/// let subscriber = tracing_subscriber::registry().with(layer).with(steptrace_burn::StampLayer);
/// # drop((subscriber, profiler));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct StampLayer;

/// The name a stamped span goes by in a span path.
struct Stamped(Label);

/// A layer span's `name` field.
#[derive(Default)]
struct NameField(Option<String>);

impl Visit for NameField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "name" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "name" && self.0.is_none() {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

fn clean(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(LAYER_NAME_CHARS).collect()
}

impl<S> Layer<S> for StampLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if meta.target() != TARGET || !super::recording() {
            return;
        }
        let label = if meta.name() == LAYER_SPAN {
            let mut field = NameField::default();
            attrs.record(&mut field);
            Label::Named(Arc::from(field.0.map_or_else(|| LAYER_SPAN.to_owned(), |n| clean(&n))))
        } else {
            Label::Static(meta.name())
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Stamped(label));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        stamp(id, &ctx, true);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        stamp(id, &ctx, false);
    }
}

/// Notes the boundary of a stamped span (one made while recording), entered or left.
fn stamp<S>(id: &Id, ctx: &Context<'_, S>, enter: bool)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    if !super::recording() {
        return;
    }
    let label = ctx.span(id).and_then(|s| s.extensions().get::<Stamped>().map(|l| l.0.clone()));
    if let Some(label) = label {
        super::boundary(label, enter);
    }
}
