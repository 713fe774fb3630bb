//! Writes each batch of the stepping thread's spans where tracing-chrome wrote the event
//! that announced it, or at a flush ([`Expander::drain`]) for a batch handed over without one
//! (see [`batch`](crate::collect::batch)).
//!
//! tracing-chrome writes an event per line (`{...},` and a newline), handing the segment
//! writer chunks that may end inside a line. The expander passes complete lines on, keeps
//! the last incomplete one until the next chunk or flush completes it, and replaces each
//! announcing line with the batch's begins and ends, built as tracing-chrome builds its own
//! lines (the same keys, the same number formatting), so that nothing downstream can tell
//! them apart.

use std::borrow::Cow;
use std::io;
use std::sync::LazyLock;
use std::time::Instant;

use memchr::memmem::Finder;
use serde::Deserialize;

use crate::collect::args::u64_json;
use crate::collect::batch::{Args, Batch, Batches, Name, Ph, Record, BATCH_TARGET};
use crate::format::names::step_name;
use crate::format::tag::SEPARATOR_ESCAPED;

/// What an announcing line holds, as tracing-chrome writes it.
static ANNOUNCED: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(format!("\"cat\":\"{BATCH_TARGET}{SEPARATOR_ESCAPED}").as_bytes()).into_owned());

/// The fields of an announcing line that the expander reads.
#[derive(Deserialize)]
struct Announcement {
    name: String,
    tid: u64,
}

/// The segment writer's line rewriting.
#[derive(Debug, Default)]
pub(crate) struct Expander {
    /// The segment whose file this is: its batches are written, an earlier one's dropped, a
    /// later one's left for its own writer.
    segment: u64,
    /// The start of a line whose end has not been written yet.
    carry: Vec<u8>,
    /// Lines built for one batch.
    built: Vec<u8>,
}

impl Expander {
    /// The expander of `segment`'s file.
    pub(crate) fn new(segment: u64) -> Expander {
        Expander { segment, ..Expander::default() }
    }

    /// Passes `chunk` to `out`, each complete announcing line replaced by its batch; the
    /// chunk's last line waits for its end.
    pub(crate) fn write(
        &mut self,
        chunk: &[u8],
        batches: &Batches,
        out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.carry.is_empty() {
            return self.pass(chunk, batches, out);
        }
        // The waiting line ends in this chunk, or the chunk only makes it longer (a long line
        // arrives in many chunks: each is looked at once).
        let Some(end) = memchr::memchr(b'\n', chunk) else {
            self.carry.extend_from_slice(chunk);
            return Ok(());
        };
        let (head, rest) = chunk.split_at(end + 1);
        let mut line = std::mem::take(&mut self.carry);
        line.extend_from_slice(head);
        let result = self.lines(&line, batches, out);
        // Keep the allocation for the next incomplete line.
        line.clear();
        self.carry = line;
        result.and_then(|()| self.pass(rest, batches, out))
    }

    /// At a flush, or when the file closes: the waiting line is complete (tracing-chrome
    /// flushes between events), so it is written now.
    pub(crate) fn finish(&mut self, batches: &Batches, out: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        if self.carry.is_empty() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.carry);
        let result = self.lines(&line, batches, out);
        let mut line = line;
        line.clear();
        self.carry = line;
        result
    }

    fn pass(&mut self, data: &[u8], batches: &Batches, out: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let (complete, rest) = match memchr::memrchr(b'\n', data) {
            Some(end) => data.split_at(end + 1),
            None => (&data[..0], data),
        };
        self.carry.extend_from_slice(rest);
        self.lines(complete, batches, out)
    }

    /// Writes whole lines (the last one may lack its newline), expanding announcements.
    fn lines(
        &mut self,
        mut text: &[u8],
        batches: &Batches,
        out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        while let Some(at) = ANNOUNCED.find(text) {
            let start = memchr::memrchr(b'\n', &text[..at]).map_or(0, |nl| nl + 1);
            let end = memchr::memchr(b'\n', &text[at..]).map_or(text.len(), |nl| at + nl);
            let line = &text[start..end];
            let object = line.strip_suffix(b",").unwrap_or(line);
            out(&text[..start])?;
            match self.expand(object, batches) {
                Some(built) => out(built)?,
                None => out(object)?,
            }
            text = &text[start + object.len()..];
        }
        if text.is_empty() {
            Ok(())
        } else {
            out(text)
        }
    }

    /// The lines of the batch `object` announces, after those of the batches queued before it
    /// that no announcement took (`None`: not an announcement, or nothing of it to write, as
    /// in the `unwritten` experiment; the line is kept as written).
    fn expand(&mut self, object: &[u8], batches: &Batches) -> Option<&[u8]> {
        let announcement: Announcement = serde_json::from_slice(object).ok()?;
        let id = announcement.name.parse().ok()?;
        let taken = batches.take(self.segment, Some(id));
        if let Some(batch) = taken.iter().find(|batch| batch.id == id) {
            batches.learn_tid(batch.thread, announcement.tid);
        }
        self.build(taken, batches);
        (!self.built.is_empty()).then_some(&self.built)
    }

    /// At a flush (each recorded step's begin, each window's end): writes the batches handed
    /// over without an announcement, after everything tracing-chrome wrote so far.
    /// `after_entry`: the output ends with an event, whose comma is still to come (else it ends
    /// with a comma and a newline, and tracing-chrome's next event comes without one).
    pub(crate) fn drain(
        &mut self,
        batches: &Batches,
        after_entry: bool,
        out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let taken = batches.take(self.segment, None);
        if taken.is_empty() {
            return Ok(());
        }
        self.build(taken, batches);
        if self.built.is_empty() {
            return Ok(());
        }
        if after_entry {
            out(b",\n")?;
            out(&self.built)
        } else {
            out(&self.built)?;
            out(b",\n")
        }
    }

    /// Takes this segment's batches, and earlier segments', off the queue unwritten.
    pub(crate) fn discard(&mut self, batches: &Batches) {
        for batch in batches.take(self.segment, Some(u64::MAX)) {
            batches.recycle(batch);
        }
    }

    /// The lines of `taken`'s batches of this segment whose thread's `tid` is known, in order,
    /// into `built`; every batch goes back for reuse.
    fn build(&mut self, taken: Vec<Batch>, batches: &Batches) {
        self.built.clear();
        let origin = batches.origin().filter(|_| !batches.unwritten);
        for batch in taken {
            let tid = if batch.segment == self.segment { batches.tid_of(batch.thread) } else { None };
            if let (Some(origin), Some(tid)) = (origin, tid) {
                for record in &batch.records {
                    if !self.built.is_empty() {
                        self.built.extend_from_slice(b",\n");
                    }
                    write_line(&mut self.built, &batch, record, tid, origin);
                }
            }
            batches.recycle(batch);
        }
    }
}

/// Writes a record as tracing-chrome writes a span's begin or end or an event: the keys
/// `args` (when not empty), `cat`, `name`, `ph`, `pid`, (`s`,) `tid` and `ts` in serde_json's order, its string
/// escaping and its number formatting; built in place, without a JSON value in between.
fn write_line(out: &mut Vec<u8>, batch: &Batch, record: &Record, tid: u64, origin: Instant) {
    let ts = record.at.saturating_duration_since(origin).as_nanos() as f64 / 1000.0;
    let name = match record.name {
        Name::Static => Cow::Borrowed(record.meta.name()),
        Name::Step(n) => Cow::Owned(step_name(n)),
        Name::Text(start, len) => Cow::Borrowed(batch.text((start, len))),
    };
    let args = match record.args {
        None => Cow::Borrowed(""),
        Some(Args::Text(start, len)) => Cow::Borrowed(batch.text((start, len))),
        Some(Args::Ints(at)) => {
            let mut text = String::new();
            if let Some(fields) = batch.ints(at) {
                u64_json(&mut text, fields.as_slice());
            }
            Cow::Owned(text)
        }
    };
    out.push(b'{');
    if args.len() > 2 {
        out.extend_from_slice(b"\"args\":");
        out.extend_from_slice(args.as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(b"\"cat\":");
    // The target, tagged with the thread (`format::tag`), as one JSON string.
    json_string(out, record.meta.target());
    out.pop();
    out.extend_from_slice(SEPARATOR_ESCAPED.as_bytes());
    out.extend_from_slice(itoa::Buffer::new().format(batch.thread).as_bytes());
    out.extend_from_slice(b"\",\"name\":");
    json_string(out, &name);
    out.extend_from_slice(match record.ph {
        Ph::Begin => b",\"ph\":\"B\",\"pid\":1,\"tid\":",
        Ph::End => b",\"ph\":\"E\",\"pid\":1,\"tid\":",
        Ph::Instant => b",\"ph\":\"i\",\"pid\":1,\"s\":\"t\",\"tid\":",
    });
    out.extend_from_slice(itoa::Buffer::new().format(tid).as_bytes());
    out.extend_from_slice(b",\"ts\":");
    if serde_json::to_writer(&mut *out, &ts).is_err() {
        out.push(b'0');
    }
    out.push(b'}');
}

fn json_string(out: &mut Vec<u8>, text: &str) {
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::batch::TEST_SPAN as FORWARD;
    use crate::collect::batch::{ArgsSource, NameSource};
    use serde_json::{json, Value};

    fn announcing_line(id: u64, tid: u64) -> String {
        format!(
            r#"{{"args":{{"message":"{id}"}},"cat":"steptrace::batch\u001f9","name":"{id}","ph":"i","pid":1,"s":"t","tid":{tid},"ts":5.5}}"#
        )
    }

    fn run(chunks: &[&[u8]], batches: &Batches, expander: &mut Expander) -> String {
        let mut file = Vec::new();
        let mut out = |bytes: &[u8]| {
            file.extend_from_slice(bytes);
            Ok(())
        };
        for chunk in chunks {
            expander.write(chunk, batches, &mut out).unwrap();
        }
        expander.finish(batches, &mut out).unwrap();
        String::from_utf8(file).unwrap()
    }

    #[test]
    fn an_announcement_split_across_chunks_becomes_its_batch_in_place() {
        let batches = Batches::default();
        let origin = Instant::now();
        batches.set_origin(origin);
        batches.record(1, 1, 9, &FORWARD, NameSource::Step(3), None, Ph::Begin);
        batches.record(1, 1, 9, &FORWARD, NameSource::Static, Some(ArgsSource::Text(r#"{"batch":"2"}"#)), Ph::Begin);
        batches.record(1, 1, 9, &FORWARD, NameSource::Static, Some(ArgsSource::Text(r#"{"batch":"2"}"#)), Ph::End);
        let (id, _) = batches.hand_over(1, 1, true).unwrap();
        let before = r#"{"cat":"user\u001f2","name":"x","ph":"i","pid":1,"s":"t","tid":4,"ts":1.0}"#;
        let stream = format!("{before},\n{},\n{before}", announcing_line(id, 4));
        let mut expander = Expander::new(1);
        let (a, b) = stream.as_bytes().split_at(before.len() + 60);
        let file = run(&[a, b], &batches, &mut expander);
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(lines.len(), 5, "{file}");
        assert_eq!(lines[0], format!("{before},"));
        assert_eq!(lines[4], before);
        let events: Vec<Value> =
            lines[1..4].iter().map(|l| serde_json::from_str(l.trim_end_matches(',')).unwrap()).collect();
        assert_eq!(events[0]["name"], "ProfilerStep#3");
        assert_eq!(events[0]["ph"], "B");
        assert_eq!(events[0]["cat"], "steptrace\u{1f}9");
        assert_eq!(events[0]["tid"], 4);
        assert_eq!(events[1]["args"]["batch"], "2");
        assert_eq!(events[2]["ph"], "E");
        assert_eq!(events[2]["name"], "forward");
        let ts: Vec<f64> = events.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
        // Written as tracing-chrome writes its lines: keys in the same order.
        assert!(
            lines[1].starts_with(r#"{"cat":"steptrace\u001f9","name":"ProfilerStep#3","ph":"B","pid":1,"tid":4,"ts":"#),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn with_the_unwritten_experiment_a_batch_is_claimed_and_none_of_it_written() {
        let batches = Batches::unwritten(true);
        batches.set_origin(Instant::now());
        batches.record(1, 1, 9, &FORWARD, NameSource::Step(3), None, Ph::Begin);
        let (id, _) = batches.hand_over(1, 1, true).unwrap();
        let line = announcing_line(id, 4);
        let file = run(&[format!("[\n{line}\n]").as_bytes()], &batches, &mut Expander::new(1));
        assert_eq!(file, format!("[\n{line}\n]"));
        assert_eq!(batches.queued(), 0, "the batch left the queue");
    }

    #[test]
    fn any_split_gives_the_same_file() {
        let stream_for = |batches: &Batches| {
            batches.set_origin(Instant::now());
            batches.record(1, 1, 2, &FORWARD, NameSource::Text("layer \"q\""), None, Ph::Begin);
            let (id, _) = batches.hand_over(1, 1, true).unwrap();
            format!("[\n{},\n{{\"ph\":\"i\"}}\n]", announcing_line(id, 1))
        };
        let mut expected = None;
        for (first, second) in (0..20).flat_map(|i| (i..20).map(move |j| (i, j))) {
            let batches = Batches::default();
            let stream = stream_for(&batches);
            let (cut, cut2) = (first * stream.len() / 20, second * stream.len() / 20);
            // Three chunks: the middle one may hold no newline at all.
            let (a, rest) = stream.as_bytes().split_at(cut);
            let (b, c) = rest.split_at(cut2 - cut);
            let file = run(&[a, b, c], &batches, &mut Expander::new(1));
            assert!(!file.contains("steptrace::batch"), "{file}");
            // Times differ between runs: compare without them.
            let shape: String =
                file.split("\"ts\":").map(|s| s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')).collect();
            match &expected {
                None => expected = Some(shape),
                Some(expected) => assert_eq!(&shape, expected, "cut at {cut}"),
            }
        }
        assert!(expected.unwrap().contains(r#""name":"layer \"q\"""#));
    }

    /// A line exactly as tracing-chrome's writer builds one: a JSON value, keys set in its
    /// order, serialised by serde_json.
    fn as_tracing_chrome_writes(ph: &str, ts: f64, name: &str, cat: &str, tid: u64, args: Option<Value>) -> Vec<u8> {
        let mut entry = json!({ "ph": ph, "pid": 1 });
        entry["ts"] = ts.into();
        entry["name"] = name.into();
        entry["cat"] = cat.into();
        entry["tid"] = tid.into();
        if let Some(args) = args {
            entry["args"] = args;
        }
        serde_json::to_vec(&entry).unwrap()
    }

    #[test]
    fn lines_are_byte_for_byte_what_tracing_chrome_writes() {
        let batches = Batches::default();
        let origin = Instant::now();
        let args = json!({"batch": "7", "split": "\"train\"", "z": "\u{1}"});
        batches.record(
            1,
            1,
            12,
            &FORWARD,
            NameSource::Text("enc \"0\" \\ é\u{7f}"),
            Some(ArgsSource::Text(&args.to_string())),
            Ph::Begin,
        );
        batches.record(1, 1, 12, &FORWARD, NameSource::Step(40), None, Ph::End);
        batches.record(1, 1, 12, &FORWARD, NameSource::Static, Some(ArgsSource::Text("{}")), Ph::Begin);
        // Integer fields kept as numbers are rendered by the writer, as a `tracing` span's.
        let ints = crate::collect::args::IntFields::of(&[("bytes", 1 << 40), ("batch", 7)]);
        batches.record(1, 1, 12, &FORWARD, NameSource::Static, Some(ArgsSource::Ints(ints)), Ph::End);
        let (id, _) = batches.hand_over(1, 1, true).unwrap();
        let batch = batches.take(1, Some(id)).pop().unwrap();
        let cat = crate::format::tag::encode("steptrace", 12);
        let expected = [
            ("B", "enc \"0\" \\ é\u{7f}", Some(args)),
            ("E", "ProfilerStep#40", None),
            ("B", "forward", None),
            ("E", "forward", Some(json!({"bytes": "1099511627776", "batch": "7"}))),
        ];
        assert_eq!(batch.records.len(), expected.len());
        for (record, (ph, name, args)) in batch.records.iter().zip(expected) {
            let mut line = Vec::new();
            write_line(&mut line, &batch, record, 3, origin);
            let ts = record.at.duration_since(origin).as_nanos() as f64 / 1000.0;
            let want = as_tracing_chrome_writes(ph, ts, name, &cat, 3, args);
            assert_eq!(String::from_utf8(line).unwrap(), String::from_utf8(want).unwrap());
        }
        // Whole microseconds are written as tracing-chrome writes them, too.
        let mut line = Vec::new();
        let at = batch.records[0];
        write_line(&mut line, &batch, &Record { at: origin + std::time::Duration::from_micros(5), ..at }, 3, origin);
        assert!(String::from_utf8(line).unwrap().ends_with(r#""ts":5.0}"#));
    }

    #[test]
    fn a_flush_writes_unannounced_batches_between_events_and_the_stream_stays_valid_json() {
        let batches = Batches::default();
        batches.set_origin(Instant::now());
        let hand = |name: &str, announced| {
            batches.record(1, 1, 9, &FORWARD, NameSource::Text(name), None, Ph::Begin);
            batches.hand_over(1, 1, announced).unwrap().0
        };
        let header = "{\"ph\":\"M\",\"name\":\"h\"},\n";
        let other = r#"{"cat":"user\u001f2","name":"x","ph":"i","pid":1,"s":"t","tid":4,"ts":1.0}"#;
        let mut expander = Expander::new(1);
        let mut file = format!("[\n{header}");
        let write = |expander: &mut Expander, chunk: &str, file: &mut String| {
            let mut out = |bytes: &[u8]| {
                file.push_str(std::str::from_utf8(bytes).unwrap());
                Ok(())
            };
            expander.write(chunk.as_bytes(), &batches, &mut out).unwrap();
        };
        let flush = |expander: &mut Expander, file: &mut String| {
            let mut out = |bytes: &[u8]| {
                file.push_str(std::str::from_utf8(bytes).unwrap());
                Ok(())
            };
            expander.finish(&batches, &mut out).unwrap();
            // As the segment writer: by the last byte written, once the waiting line is out.
            let after_entry = file.ends_with('}');
            let mut out = |bytes: &[u8]| {
                file.push_str(std::str::from_utf8(bytes).unwrap());
                Ok(())
            };
            expander.drain(&batches, after_entry, &mut out).unwrap();
        };
        // Before tracing-chrome's first event (its next comes without a comma): the tid is not
        // known yet, so the first batch is announced; the next one waits for a flush.
        let first = hand("a", true);
        hand("b", false);
        flush(&mut expander, &mut file);
        assert_eq!(file, format!("[\n{header}"), "nothing before the tid is known");
        write(&mut expander, &announcing_line(first, 7), &mut file);
        flush(&mut expander, &mut file);
        // Between events (tracing-chrome's next comes with a comma).
        hand("c", false);
        write(&mut expander, &format!(",\n{other}"), &mut file);
        flush(&mut expander, &mut file);
        // Before the first event of a stream: a trailing comma, and the event without one.
        hand("d", false);
        flush(&mut expander, &mut file);
        write(&mut expander, &format!(",\n{other}\n]"), &mut file);
        flush(&mut expander, &mut file);
        let events: Vec<Value> = serde_json::from_str(&file).unwrap_or_else(|e| panic!("{e}: {file}"));
        let names: Vec<&str> = events.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["h", "a", "b", "x", "c", "d", "x"], "{file}");
        assert!(events[1..].iter().filter(|e| e["name"] != "x").all(|e| e["tid"] == 7));
        assert_eq!(batches.queued(), 0);

        // A stream whose first event is a drained batch: it ends with a comma, then the event.
        let mut expander = Expander::new(1);
        let mut file = format!("[\n{header}");
        hand("e", false);
        flush(&mut expander, &mut file);
        write(&mut expander, other, &mut file);
        write(&mut expander, "\n]", &mut file);
        flush(&mut expander, &mut file);
        let events: Vec<Value> = serde_json::from_str(&file).unwrap_or_else(|e| panic!("{e}: {file}"));
        assert_eq!(events.iter().map(|e| e["name"].as_str().unwrap()).collect::<Vec<_>>(), ["h", "e", "x"]);
    }

    #[test]
    fn an_unknown_announcement_is_kept_as_written() {
        let batches = Batches::default();
        batches.set_origin(Instant::now());
        let line = announcing_line(77, 1);
        let file = run(&[line.as_bytes()], &batches, &mut Expander::new(1));
        assert_eq!(file, line);
    }
}
