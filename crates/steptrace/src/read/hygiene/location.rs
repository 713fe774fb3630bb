//! Where a string sits in a trace, and how [`LocatedFinding`]s name it:
//! `event 3 args.user`, `metadata.manifest.data_path`, `thread name tid 4`.
//!
//! [`LocatedFinding`]: super::LocatedFinding

use std::fmt::Write as _;

use crate::reader::TrackId;

/// Where a string sits in a trace.
#[derive(Clone, Copy)]
pub(super) enum Base<'a> {
    Event(usize),
    ThreadName(Option<&'a TrackId>),
    ProcessName(Option<&'a TrackId>),
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
        Base::ThreadName(tid) => format!("thread name tid {}", tid.map_or_else(|| "?".to_owned(), ToString::to_string)),
        Base::ProcessName(pid) => {
            format!("process name pid {}", pid.map_or_else(|| "?".to_owned(), ToString::to_string))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_formats() {
        let tid = TrackId::Num(4);
        assert_eq!(location(Base::Event(3), &[Step::Key("args"), Step::Key("user")], false), "event 3 args.user");
        assert_eq!(location(Base::Event(3), &[Step::Key("args"), Step::Key("user")], true), "event 3 args.user (key)");
        assert_eq!(location(Base::Metadata, &[Step::Key("a"), Step::Index(2), Step::Key("b")], false), "a[2].b");
        assert_eq!(location(Base::ThreadName(Some(&tid)), &[], false), "thread name tid 4");
        assert_eq!(location(Base::ProcessName(None), &[], false), "process name pid ?");
    }
}
