//! Trace events and their decoding from JSON.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// A process, thread or async/flow id: a number or a string.
///
/// Chrome trace writers usually use numbers; Kineto (torch.profiler) uses
/// strings for some of its tracks. A string holding a canonical decimal
/// integer (`"12"`) is read as [`TrackId::Num`], as a JavaScript viewer
/// would treat the two alike; other strings (`"0x1f"`, `"stream 7"`) stay
/// strings. Numbers beyond `i64` or with a fraction are kept as strings of
/// their decimal form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Ord, PartialOrd)]
pub enum TrackId {
    /// A numeric id.
    Num(i64),
    /// A string id.
    Str(String),
}

impl TrackId {
    /// Builds an id from a string, turning canonical decimal integers into
    /// numbers.
    fn from_text(text: &str) -> Self {
        match text.parse::<i64>() {
            Ok(n) if n.to_string() == text => TrackId::Num(n),
            _ => TrackId::Str(text.to_owned()),
        }
    }

    fn from_f64(v: f64) -> Self {
        // The range check keeps the cast exact.
        if v.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v) {
            TrackId::Num(v as i64)
        } else {
            TrackId::Str(v.to_string())
        }
    }
}

impl fmt::Display for TrackId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrackId::Num(n) => write!(f, "{n}"),
            TrackId::Str(s) => f.write_str(s),
        }
    }
}

impl From<i64> for TrackId {
    fn from(n: i64) -> Self {
        TrackId::Num(n)
    }
}

/// A string id, kept as written (unlike the reader, which turns decimal
/// strings into [`TrackId::Num`]).
impl From<&str> for TrackId {
    fn from(s: &str) -> Self {
        TrackId::Str(s.to_owned())
    }
}

/// A string id, kept as written.
impl From<String> for TrackId {
    fn from(s: String) -> Self {
        TrackId::Str(s)
    }
}

/// One event of a trace.
///
/// Only the fields steptrace uses are kept; unknown fields are ignored.
/// `ts` and `dur` are in microseconds, as the format prescribes (the
/// `displayTimeUnit` metadata only affects how viewers show them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceEvent {
    /// The phase as written: `"B"`, `"E"`, `"X"`, `"i"`, `"I"`, `"C"`,
    /// `"M"`, `"b"`, `"e"`, `"n"`, `"s"`, `"t"`, `"f"`, `"P"`, ...; empty
    /// when absent.
    pub ph: String,
    /// The event name; empty when absent.
    pub name: String,
    /// The category list, as written (comma-separated), without the
    /// thread tag steptrace adds while collecting (see
    /// [`format::tag`](crate::format::tag)): a partial file's
    /// `steptrace\u{1f}7` reads as `steptrace`.
    pub cat: Option<String>,
    /// The process id.
    pub pid: Option<TrackId>,
    /// The thread id.
    pub tid: Option<TrackId>,
    /// The timestamp, in microseconds.
    pub ts: Option<f64>,
    /// The duration of an `X` event, in microseconds.
    pub dur: Option<f64>,
    /// The async or flow id: `id`, or else `id2.global` / `id2.local`.
    pub id: Option<TrackId>,
    /// The scope of an instant event (its `s` field: `g`, `p` or `t`).
    pub scope: Option<String>,
    /// The event's arguments.
    pub args: Option<Value>,
}

impl TraceEvent {
    /// The argument `key` of the event, if its `args` is an object holding
    /// it.
    #[must_use]
    pub fn arg(&self, key: &str) -> Option<&Value> {
        self.args.as_ref()?.get(key)
    }

    /// The event as a JSON object of the fields it keeps (those it was
    /// read with; other fields of the file are not among them).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Map<String, Value> {
        let id = |t: &TrackId| match t {
            TrackId::Num(n) => Value::from(*n),
            TrackId::Str(s) => Value::from(s.as_str()),
        };
        let mut m = serde_json::Map::new();
        m.insert("ph".into(), Value::from(self.ph.as_str()));
        m.insert("name".into(), Value::from(self.name.as_str()));
        let optional = [
            ("cat", self.cat.as_deref().map(Value::from)),
            ("pid", self.pid.as_ref().map(id)),
            ("tid", self.tid.as_ref().map(id)),
            ("ts", self.ts.map(Value::from)),
            ("dur", self.dur.map(Value::from)),
            ("id", self.id.as_ref().map(id)),
            ("s", self.scope.as_deref().map(Value::from)),
            ("args", self.args.clone()),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                m.insert(key.into(), value);
            }
        }
        m
    }
}

/// The JSON shape of an event, as decoded.
#[derive(Deserialize)]
pub(super) struct RawEvent {
    #[serde(default)]
    ph: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default, deserialize_with = "track_id")]
    pid: Option<TrackId>,
    #[serde(default, deserialize_with = "track_id")]
    tid: Option<TrackId>,
    #[serde(default, deserialize_with = "number")]
    ts: Option<f64>,
    #[serde(default, deserialize_with = "number")]
    dur: Option<f64>,
    #[serde(default, deserialize_with = "track_id")]
    id: Option<TrackId>,
    #[serde(default)]
    id2: Option<Id2>,
    #[serde(default)]
    s: Option<String>,
    #[serde(default)]
    args: Option<Value>,
}

/// The `id2` field of async events: `{"local": ...}` or `{"global": ...}`.
#[derive(Deserialize)]
struct Id2 {
    #[serde(default, deserialize_with = "track_id")]
    global: Option<TrackId>,
    #[serde(default, deserialize_with = "track_id")]
    local: Option<TrackId>,
}

impl RawEvent {
    pub(super) fn into_event(self) -> TraceEvent {
        let id = self.id.or_else(|| self.id2.and_then(|id2| id2.global.or(id2.local)));
        // A file cut short before the sink finalised it (`NAME.partial`)
        // still carries steptrace's thread tags in its categories.
        let cat = self.cat.map(|cat| match crate::format::tag::split(&cat) {
            Some((target, _)) => target.to_owned(),
            None => cat,
        });
        TraceEvent {
            ph: self.ph.unwrap_or_default(),
            name: self.name.unwrap_or_default(),
            cat,
            pid: self.pid,
            tid: self.tid,
            ts: self.ts,
            dur: self.dur,
            id,
            scope: self.s,
            args: self.args,
        }
    }
}

/// Decodes an optional number that may be written as a string.
fn number<'de, D: Deserializer<'de>>(de: D) -> Result<Option<f64>, D::Error> {
    struct NumberVisitor;

    impl Visitor<'_> for NumberVisitor {
        type Value = Option<f64>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number or a string holding a number")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            v.trim().parse::<f64>().map(Some).map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }

    de.deserialize_any(NumberVisitor)
}

/// Decodes an optional id written as a number or a string.
fn track_id<'de, D: Deserializer<'de>>(de: D) -> Result<Option<TrackId>, D::Error> {
    struct TrackVisitor;

    impl Visitor<'_> for TrackVisitor {
        type Value = Option<TrackId>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number or a string")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(TrackId::Num(v)))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(i64::try_from(v).map_or_else(|_| TrackId::Str(v.to_string()), TrackId::Num)))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(TrackId::from_f64(v)))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(TrackId::from_text(v)))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }

    de.deserialize_any(TrackVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> Result<TraceEvent, serde_json::Error> {
        serde_json::from_str::<RawEvent>(json).map(RawEvent::into_event)
    }

    #[test]
    fn decodes_the_known_fields_and_ignores_others() {
        let ev = decode(
            r#"{"ph":"X","name":"k","cat":"kernel","pid":1,"tid":"stream 7","ts":10.5,"dur":3,
                "id":"0x1f","s":"t","args":{"a":1},"tts":4,"bp":"e","sf":2,"stack":[1,2]}"#,
        )
        .unwrap();
        assert_eq!(ev.ph, "X");
        assert_eq!(ev.name, "k");
        assert_eq!(ev.cat.as_deref(), Some("kernel"));
        assert_eq!(ev.pid, Some(TrackId::Num(1)));
        assert_eq!(ev.tid, Some(TrackId::Str("stream 7".into())));
        assert_eq!(ev.ts, Some(10.5));
        assert_eq!(ev.dur, Some(3.0));
        assert_eq!(ev.id, Some(TrackId::Str("0x1f".into())));
        assert_eq!(ev.scope.as_deref(), Some("t"));
        assert_eq!(ev.arg("a"), Some(&serde_json::json!(1)));
        assert_eq!(ev.arg("b"), None);
    }

    #[test]
    fn thread_tags_of_partial_files_are_removed_from_categories() {
        let ev = decode("{\"ph\":\"B\",\"cat\":\"steptrace\\u001f7\",\"tid\":2}").unwrap();
        assert_eq!(ev.cat.as_deref(), Some("steptrace"));
        assert_eq!(ev.tid, Some(TrackId::Num(2)));
        // Not a tag: kept as written.
        let ev = decode("{\"cat\":\"a\\u001fx\"}").unwrap();
        assert_eq!(ev.cat.as_deref(), Some("a\u{1f}x"));
    }

    #[test]
    fn missing_fields_are_empty_or_none() {
        let ev = decode("{}").unwrap();
        assert_eq!(ev, TraceEvent::default());
        let ev = decode(r#"{"ph":null,"name":null,"ts":null,"pid":null,"args":null}"#).unwrap();
        assert_eq!(ev, TraceEvent::default());
    }

    #[test]
    fn numbers_may_be_strings() {
        let ev = decode(r#"{"ts":"123.5","dur":" 7 ","pid":"12","tid":"007"}"#).unwrap();
        assert_eq!(ev.ts, Some(123.5));
        assert_eq!(ev.dur, Some(7.0));
        assert_eq!(ev.pid, Some(TrackId::Num(12)));
        assert_eq!(ev.tid, Some(TrackId::Str("007".into())));
        assert!(decode(r#"{"ts":"soon"}"#).is_err());
        assert!(decode(r#"{"ts":true}"#).is_err());
        assert!(decode(r#"{"ts":[1]}"#).is_err());
    }

    #[test]
    fn ids_of_every_json_number_shape() {
        let ev = decode(r#"{"pid":18446744073709551615,"tid":2.0,"id":2.5}"#).unwrap();
        assert_eq!(ev.pid, Some(TrackId::Str("18446744073709551615".into())));
        assert_eq!(ev.tid, Some(TrackId::Num(2)));
        assert_eq!(ev.id, Some(TrackId::Str("2.5".into())));
        let ev = decode(r#"{"pid":-3,"tid":1e300}"#).unwrap();
        assert_eq!(ev.pid, Some(TrackId::Num(-3)));
        assert!(matches!(ev.tid, Some(TrackId::Str(_))));
        assert!(decode(r#"{"pid":{}}"#).is_err());
        assert!(decode(r#"{"tid":false}"#).is_err());
    }

    #[test]
    fn id2_stands_in_for_a_missing_id() {
        let ev = decode(r#"{"ph":"b","id2":{"local":"0x5"}}"#).unwrap();
        assert_eq!(ev.id, Some(TrackId::Str("0x5".into())));
        let ev = decode(r#"{"ph":"b","id2":{"global":7}}"#).unwrap();
        assert_eq!(ev.id, Some(TrackId::Num(7)));
        let ev = decode(r#"{"ph":"b","id":1,"id2":{"global":7}}"#).unwrap();
        assert_eq!(ev.id, Some(TrackId::Num(1)));
    }

    #[test]
    fn wrong_types_and_duplicates_are_errors() {
        assert!(decode(r#"{"ph":5}"#).is_err());
        assert!(decode(r#"{"name":["a"]}"#).is_err());
        assert!(decode(r#"{"ph":"B","ph":"E"}"#).is_err());
    }

    #[test]
    fn track_ids_display_order_and_convert() {
        assert_eq!(TrackId::Num(-4).to_string(), "-4");
        assert_eq!(TrackId::from("gpu 0").to_string(), "gpu 0");
        assert_eq!(TrackId::from(String::from("x")), TrackId::Str("x".into()));
        assert_eq!(TrackId::from(3), TrackId::Num(3));
        assert!(TrackId::Num(i64::MAX) < TrackId::Str(String::new()));
        assert!(TrackId::Num(1) < TrackId::Num(2));
    }
}
