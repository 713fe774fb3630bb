//! Where a string sits in a trace, and how [`LocatedFinding`]s name it:
//! `event 3 args.user`, `metadata.manifest.data_path`, `thread name tid 4`.
//!
//! [`LocatedFinding`]: super::LocatedFinding

use std::fmt::Write as _;

use serde_json::Value;

/// Where a string sits in a trace.
#[derive(Clone, Copy)]
pub(super) enum Base<'a> {
    Event(usize),
    ThreadName(Option<&'a Value>),
    ProcessName(Option<&'a Value>),
    Metadata,
}

/// One step of a path into a JSON value.
#[derive(Clone, Copy)]
pub(super) enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `event 3 args.user`, `metadata.manifest.data_path`, `thread name tid 4`.
pub(super) fn location(base: Base<'_>, path: &[Step<'_>], is_key: bool) -> String {
    let mut out = match base {
        Base::Event(index) => format!("event {index}"),
        Base::ThreadName(tid) => format!("thread name tid {}", show(tid)),
        Base::ProcessName(pid) => format!("process name pid {}", show(pid)),
        Base::Metadata => String::new(),
    };
    for (i, step) in path.iter().enumerate() {
        match step {
            Step::Key(key) if i == 0 && !out.is_empty() => {
                out.push(' ');
                out.push_str(key);
            }
            Step::Key(key) if i == 0 => out.push_str(key),
            Step::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Index(index) => {
                let _ = write!(out, "[{index}]");
            }
        }
    }
    if is_key {
        out.push_str(" (key)");
    }
    out
}

/// An id as written: `4`, `stream 7`; `?` when absent.
fn show(id: Option<&Value>) -> String {
    match id {
        None | Some(Value::Null) => "?".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_formats() {
        let tid = serde_json::json!(4);
        assert_eq!(location(Base::Event(3), &[Step::Key("args"), Step::Key("user")], false), "event 3 args.user");
        assert_eq!(location(Base::Event(3), &[Step::Key("args"), Step::Key("user")], true), "event 3 args.user (key)");
        assert_eq!(location(Base::Metadata, &[Step::Key("a"), Step::Index(2), Step::Key("b")], false), "a[2].b");
        assert_eq!(location(Base::ThreadName(Some(&tid)), &[], false), "thread name tid 4");
        assert_eq!(location(Base::ProcessName(None), &[], false), "process name pid ?");
        let named = serde_json::json!("stream 7");
        assert_eq!(location(Base::ThreadName(Some(&named)), &[], false), "thread name tid stream 7");
    }
}
