//! Lines that fit a 100-column terminal: what the `steptrace` command prints, and what a
//! profiled program says on its console when asked to.

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};

/// The widest line steptrace prints.
pub const WIDTH: usize = 100;

/// Continuation lines start with this many spaces.
const INDENT: usize = 4;

/// `text` broken at spaces into lines of at most [`WIDTH`] characters; every line after
/// the first is indented. A single word longer than a line (a long path) is kept whole.
/// Text that fits is returned as it is (inner runs of spaces kept).
pub fn wrap(text: &str) -> Vec<String> {
    if text.chars().count() <= WIDTH {
        return vec![text.to_owned()];
    }
    wrap_under(text, 0, false)
}

/// A table in steptrace's style whose cells wrap so that it fits [`WIDTH`].
pub fn table() -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic).set_width(WIDTH as u16);
    table
}

/// Characters that start a line of a table (comfy-table's UTF-8 style).
const TABLE_CHARS: &[char] = &['┌', '│', '╞', '├', '└', '╭', '╰', '┆', '═', '─', '┄'];

/// A whole block of output made to fit [`WIDTH`]: table lines are kept (tables wrap their
/// own cells), a command after `run:` is continued with ` \` so that it still pastes into
/// a shell, and every other longer line is wrapped at spaces under its own indentation.
pub fn fit(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let trimmed = body.trim_start();
        if body.chars().count() <= WIDTH || trimmed.starts_with(TABLE_CHARS) {
            out.push_str(line);
            continue;
        }
        let indent = body.len() - trimmed.len();
        let lines = wrap_under(trimmed, indent, trimmed.starts_with("run:"));
        out.push_str(&lines.join("\n"));
        out.push_str(end);
    }
    out
}

/// `text` after `prefix` (kept as it is, inner spaces included), wrapped within [`WIDTH`]
/// with its continuation lines under the text's start; ends with a newline.
pub fn hang(prefix: &str, text: &str) -> String {
    let width = prefix.chars().count();
    let mut lines = wrap_under(text, width, false);
    lines[0] = format!("{prefix}{}", lines[0].trim_start());
    // Continuation lines go under the text, not [`INDENT`] further in.
    for line in lines.iter_mut().skip(1) {
        *line = format!("{}{}", " ".repeat(width), line.trim_start());
    }
    lines.join("\n") + "\n"
}

/// `text` (without its indentation) wrapped at spaces within [`WIDTH`] after `indent`
/// spaces, continuation lines [`INDENT`] further in; with `shell`, each line but the last
/// ends in ` \`.
fn wrap_under(text: &str, indent: usize, shell: bool) -> Vec<String> {
    let room = WIDTH.saturating_sub(indent + if shell { 2 } else { 0 }).max(20);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let n = word.chars().count();
        let first = lines.is_empty();
        let limit = if first { room } else { room.saturating_sub(INDENT) };
        if len == 0 {
            line.push_str(word);
            len = n;
        } else if len + 1 + n <= limit {
            line.push(' ');
            line.push_str(word);
            len += 1 + n;
        } else {
            lines.push(std::mem::replace(&mut line, word.to_owned()));
            len = n;
        }
    }
    lines.push(line);
    let last = lines.len() - 1;
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let pad = " ".repeat(if i == 0 { indent } else { indent + INDENT });
            let cont = if shell && i < last { " \\" } else { "" };
            format!("{pad}{l}{cont}")
        })
        .collect()
}

/// Prints `text` on stdout, wrapped by [`wrap`].
pub fn say(text: &str) {
    for line in wrap(text) {
        out(&line);
    }
}

/// Prints `text` and a newline on stdout; a closed stdout (`steptrace train | head -1`)
/// drops the line instead of ending the run, so that the run still writes its files.
pub fn out(text: &dyn std::fmt::Display) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Prints `text` on stderr, wrapped by [`wrap`].
pub fn warn(text: &str) {
    for line in wrap(text) {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::{wrap, WIDTH};

    #[test]
    fn long_text_breaks_at_spaces_and_keeps_every_word() {
        let text = "backend: cpu (FALLBACK: CUDA unavailable: libcuda.so not found (NVIDIA driver not installed or not on the loader path); wgpu unavailable: no Vulkan adapter found) on a CPU";
        let lines = wrap(text);
        assert!(lines.len() >= 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{lines:?}");
        assert!(lines[1].starts_with("    ") && !lines[1].starts_with("     "), "{lines:?}");
        let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn short_text_and_long_words_stay_whole() {
        assert_eq!(wrap("sync: step"), ["sync: step"]);
        let path = "x".repeat(120);
        assert_eq!(
            wrap(&format!("wrote {path} (cycle 0)")),
            ["wrote".to_owned(), format!("    {path}"), "    (cycle 0)".to_owned()]
        );
    }
}

#[cfg(test)]
mod block_tests {
    use super::{fit, table, WIDTH};

    #[test]
    fn a_block_fits_with_its_indentation_tables_and_commands_kept_usable() {
        let long = "word ".repeat(40);
        let command =
            format!("   run:      steptrace bench --model mlp --batch 256 {}--json out.json", "--steps 300 ".repeat(8));
        let mut t = table();
        t.set_header(["span", "why"]).add_row(["a", long.trim()]);
        let text = format!("plain {long}\n  evidence: {long}\n{command}\n{t}\nshort\n");
        let out = fit(&text);
        assert!(out.lines().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert!(out.ends_with("short\n"), "{out}");
        // Every word is kept, in order (tables aside).
        let words = |s: &str| s.split_whitespace().filter(|w| *w != "\\").map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&fit(&format!("plain {long}\n{command}\n"))), words(&format!("plain {long}\n{command}\n")));
        // Indented text stays under its indentation.
        let evidence: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("  evidence:")).take(2).collect();
        assert!(evidence[1].starts_with("      ") && !evidence[1].starts_with("       "), "{evidence:?}");
        // The command's lines end in a shell continuation, but the last.
        let run: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("run:"))
            .take_while(|l| !l.starts_with('┌'))
            .collect();
        assert!(run.len() >= 2 && run[..run.len() - 1].iter().all(|l| l.ends_with(" \\")), "{run:?}");
        assert!(!run[run.len() - 1].ends_with('\\'), "{run:?}");
    }
}
