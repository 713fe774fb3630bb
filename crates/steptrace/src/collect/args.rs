//! A span's or an event's fields as tracing-chrome writes them in `args`, made cheaply on the
//! stepping thread.
//!
//! tracing-chrome records each field with its `Debug` text into a `serde_json::Map` and writes
//! the map: `{"batch":"21","input_bytes":"65536"}`. Building that map costs an allocation per
//! field and per key, and a serialisation, on the thread that makes the span (about a
//! microsecond for a span of three fields). [`Fields`] keeps integers and booleans as they are,
//! formats the rest once, and writes the same text ([`Fields::json`]): the same escapes, the
//! keys in the order the map would give them (sorted, unless serde_json's `preserve_order` is
//! on somewhere in the build, when they keep the order they came in).
//!
//! The visitors that read a step's number, a layer's name and an event's message live here too.

use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Record};

/// One field's value, as `Debug` would write it.
#[derive(Clone, Debug)]
enum Value {
    U64(u64),
    I64(i64),
    Bool(bool),
    /// Any other value's `Debug` text.
    Text(String),
}

/// A span's or event's fields, in the order they were recorded.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    /// Whether no field was recorded.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Calls `f` with each field's name and a value that records as the field did (a text
    /// as its `Debug` text, verbatim).
    pub(crate) fn each(&self, mut f: impl FnMut(&'static str, &dyn tracing_core::field::Value)) {
        for (name, value) in &self.0 {
            match value {
                Value::U64(v) => f(name, v),
                Value::I64(v) => f(name, v),
                Value::Bool(v) => f(name, v),
                Value::Text(text) => f(name, &tracing_core::field::display(text.as_str())),
            }
        }
    }

    fn set(&mut self, name: &'static str, value: Value) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// Appends the fields to `out` as tracing-chrome writes its `args` object.
    pub(crate) fn json(&self, out: &mut String) {
        let mut order = vec![0; self.0.len()];
        write_map(
            out,
            &mut order,
            |at| self.0[at].0,
            |out, at| match &self.0[at].1 {
                Value::U64(v) => {
                    let _ = write!(out, "{v}");
                }
                Value::I64(v) => {
                    let _ = write!(out, "{v}");
                }
                Value::Bool(v) => out.push_str(if *v { "true" } else { "false" }),
                Value::Text(text) => escaped_inner(out, text),
            },
        );
    }

    /// The `args` text of these fields.
    pub(crate) fn to_json(&self) -> String {
        let mut out = String::with_capacity(16 + 24 * self.0.len());
        self.json(&mut out);
        out
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), Value::U64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), Value::I64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), Value::Bool(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set(field.name(), Value::Text(format!("{value:?}")));
    }
}

/// Writes integer fields to `out` as [`Fields::json`] writes the same fields recorded in this
/// order, without a `Fields` (the direct path's spans with fields: `own_span!(NAME, batch = i)`).
pub(crate) fn u64_json(out: &mut String, fields: &[(&'static str, u64)]) {
    let mut order = [0usize; MAX_U64_FIELDS];
    let order = &mut order[..fields.len().min(MAX_U64_FIELDS)];
    write_map(
        out,
        order,
        |at| fields[at].0,
        |out, at| {
            let _ = write!(out, "{}", fields[at].1);
        },
    );
}

/// A direct span's integer fields, in the order the span names them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IntFields {
    values: [(&'static str, u64); MAX_U64_FIELDS],
    len: u8,
}

impl IntFields {
    pub(crate) fn of(fields: &[(&'static str, u64)]) -> IntFields {
        let mut out = IntFields::default();
        for (slot, field) in out.values.iter_mut().zip(fields) {
            *slot = *field;
            out.len += 1;
        }
        out
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(crate) fn as_slice(&self) -> &[(&'static str, u64)] {
        &self.values[..usize::from(self.len)]
    }
}

/// Writes an `args` object as serde_json writes tracing-chrome's map of texts: each key with
/// the value `value` writes inside its quotes, keys in the map's order (sorted, unless
/// `preserve_order`). `order` holds as many slots as there are keys, `name` names each.
fn write_map(
    out: &mut String,
    order: &mut [usize],
    name: impl Fn(usize) -> &'static str,
    mut value: impl FnMut(&mut String, usize),
) {
    for (i, at) in order.iter_mut().enumerate() {
        *at = i;
    }
    if map_sorts_keys() {
        order.sort_unstable_by_key(|at| name(*at));
    }
    out.push('{');
    for (i, &at) in order.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        escaped(out, name(at));
        out.push_str(":\"");
        value(out, at);
        out.push('"');
    }
    out.push('}');
}

/// The most integer fields a direct span carries.
pub(crate) const MAX_U64_FIELDS: usize = 4;

/// Whether serde_json's map (tracing-chrome's `args`) sorts its keys: it does unless its
/// `preserve_order` feature is on in this build.
fn map_sorts_keys() -> bool {
    static SORTS: OnceLock<bool> = OnceLock::new();
    *SORTS.get_or_init(|| {
        let mut map = serde_json::Map::new();
        map.insert("b".to_owned(), serde_json::Value::Null);
        map.insert("a".to_owned(), serde_json::Value::Null);
        map.keys().next().is_some_and(|k| k == "a")
    })
}

/// `text` as a JSON string, quotes included.
fn escaped(out: &mut String, text: &str) {
    out.push('"');
    escaped_inner(out, text);
    out.push('"');
}

/// `text` as the inside of a JSON string, escaped as serde_json escapes it.
fn escaped_inner(out: &mut String, text: &str) {
    let needs = |c: char| c == '"' || c == '\\' || c < ' ';
    if !text.contains(needs) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c < ' ' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// The step number of a `ProfilerStep` span, used to render its name.
pub(crate) struct StepNumber(pub(crate) u64);

pub(crate) struct StepVisitor(pub(crate) Option<u64>);

impl tracing_core::field::Visit for StepVisitor {
    fn record_u64(&mut self, field: &tracing_core::Field, value: u64) {
        if field.name() == "step" {
            self.0 = Some(value);
        }
    }
    fn record_i64(&mut self, field: &tracing_core::Field, value: i64) {
        if field.name() == "step" {
            self.0 = u64::try_from(value).ok();
        }
    }
    fn record_debug(&mut self, _field: &tracing_core::Field, _value: &dyn std::fmt::Debug) {}
}

/// A span's fields for the stepping thread's records, and their `args` text as the Chrome layer
/// writes it (see [`args`](super::args)).
pub(crate) struct SpanArgs {
    pub(crate) fields: Fields,
    pub(crate) text: String,
    /// tracing-chrome has no copy yet (a steptrace span made on the stepping thread).
    pub(crate) chrome_pending: bool,
}

impl SpanArgs {
    pub(crate) fn of(attrs: &Attributes<'_>) -> SpanArgs {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let text = fields.to_json();
        SpanArgs { fields, text, chrome_pending: false }
    }

    pub(crate) fn record(&mut self, values: &Record<'_>) {
        values.record(&mut self.fields);
        self.text.clear();
        self.fields.json(&mut self.text);
    }
}

/// Reads the `message` field of an event.
/// The name a [`LAYER_SPAN`] is written under.
pub(crate) struct LayerName(pub(crate) String);

/// Reads a layer span's `name` field: printable, at most
/// [`LAYER_NAME_CHARS`](crate::format::names::LAYER_NAME_CHARS) characters.
pub(crate) struct LayerVisitor(pub(crate) Option<String>);

impl tracing_core::field::Visit for LayerVisitor {
    fn record_str(&mut self, field: &tracing_core::Field, value: &str) {
        if field.name() == "name" {
            if let Some(name) = super::direct::layer_name(value) {
                self.0 = Some(name.into_owned());
            }
        }
    }
    fn record_debug(&mut self, field: &tracing_core::Field, value: &dyn std::fmt::Debug) {
        if self.0.is_none() {
            tracing_core::field::Visit::record_str(self, field, &format!("{value:?}"));
        }
    }
}

pub(crate) struct MessageVisitor(pub(crate) Option<String>);

impl tracing_core::field::Visit for MessageVisitor {
    fn record_str(&mut self, field: &tracing_core::Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &tracing_core::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::Layer;

    /// What tracing-chrome's visitor makes of the same fields: each field's `Debug` text in a
    /// `serde_json::Map`, serialised.
    #[derive(Default)]
    struct ChromeWay(serde_json::Map<String, serde_json::Value>);

    impl Visit for ChromeWay {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}").into());
        }
    }

    /// Records every span's and event's fields both ways.
    struct Both(Arc<Mutex<Vec<(String, String)>>>);

    impl<S: tracing_core::Subscriber> Layer<S> for Both {
        fn on_new_span(
            &self,
            attrs: &tracing_core::span::Attributes<'_>,
            _: &tracing_core::span::Id,
            _: Context<'_, S>,
        ) {
            let (mut ours, mut theirs) = (Fields::default(), ChromeWay::default());
            attrs.record(&mut ours);
            attrs.record(&mut theirs);
            let theirs = serde_json::to_string(&theirs.0).expect("json");
            self.0.lock().expect("lock").push((ours.to_json(), theirs));
        }
        fn on_event(&self, event: &tracing_core::Event<'_>, _: Context<'_, S>) {
            let (mut ours, mut theirs) = (Fields::default(), ChromeWay::default());
            event.record(&mut ours);
            event.record(&mut theirs);
            let theirs = serde_json::to_string(&theirs.0).expect("json");
            self.0.lock().expect("lock").push((ours.to_json(), theirs));
        }
    }

    #[derive(Debug)]
    #[allow(dead_code)]
    struct Shape {
        dims: Vec<usize>,
        tag: &'static str,
    }

    #[test]
    fn fields_are_written_as_tracing_chrome_writes_them() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Both(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let _a = tracing::info_span!("load", zeta = 3u64, alpha = -7i64, mid = true, batch = 21usize).entered();
            let _b =
                tracing::info_span!("odd", text = "a \"quoted\"\\ line\n\ttab\u{1}\u{7f}é", f = 1.0f64, g = 2.5e-7f64)
                    .entered();
            let _c = tracing::info_span!("shape", shape = ?Shape { dims: vec![2, 3], tag: "x\"y" }, big = u128::MAX, s = %"shown").entered();
            tracing::info!(in_use = 10u64, reserved = 20u64, "device memory {}", "in use");
            tracing::info!(name.with.dots = 1u64, "k");
        });
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.len(), 5);
        for (ours, theirs) in seen.iter() {
            assert_eq!(ours, theirs);
        }
        assert!(seen[0].0.starts_with("{\"alpha\":\"-7\""), "{}", seen[0].0);
    }

    #[test]
    fn a_field_recorded_again_replaces_its_value() {
        let mut fields = Fields::default();
        fields.set("b", Value::U64(1));
        fields.set("a", Value::Text("x".into()));
        fields.set("b", Value::U64(2));
        let mut map = serde_json::Map::new();
        map.insert("b".to_owned(), "1".into());
        map.insert("a".to_owned(), "x".into());
        map.insert("b".to_owned(), "2".into());
        assert_eq!(fields.to_json(), serde_json::to_string(&map).expect("json"));
        assert!(fields.to_json().contains(r#""b":"2""#));
        assert!(!fields.is_empty());
        assert!(Fields::default().is_empty());
        assert_eq!(Fields::default().to_json(), "{}");
    }

    #[test]
    fn integer_fields_are_written_as_fields_writes_them() {
        for fields in [&[][..], &[("batch", 21)][..], &[("zeta", 3), ("batch", 0), ("input_bytes", u64::MAX)][..]] {
            let mut recorded = Fields::default();
            for (name, value) in fields {
                recorded.set(name, Value::U64(*value));
            }
            let mut ours = String::new();
            u64_json(&mut ours, fields);
            assert_eq!(ours, recorded.to_json());
        }
        let mut out = String::new();
        u64_json(&mut out, &[("b", 2), ("a", 1)]);
        let parsed: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(parsed["a"], "1");
        assert_eq!(parsed["b"], "2");
    }
}
