//! A chapter's shell blocks and their expected output, per the book's block convention
//! (`book/src/reference.md`, "How the book is tested").

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// The words a `sh,no-test` block's paragraph must hold, followed by the reason.
pub const NO_TEST_MARK: &str = "Not run by the book's tests:";

/// What a shell block expects of its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// ```` ```sh ````: every command exits 0.
    Success,
    /// ```` ```sh,fails ```` / ```` ```sh,fails=N ````: every command exits non-zero
    /// (exactly `N` when given): an error the book shows on purpose.
    Failure(Option<i32>),
}

/// One ```` ```sh ```` block that the test runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// 1-based line of the opening fence in the chapter.
    pub line: usize,
    pub commands: Vec<String>,
    pub expect: Expect,
    /// The ```` ```text,output ```` block right after it: the last command's output.
    pub output: Option<Output>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub line: usize,
    pub text: String,
}

/// What a chapter asks the test to do.
#[derive(Debug, Default)]
pub struct Chapter {
    pub blocks: Vec<Block>,
    /// Blocks marked `sh,no-test`, by line: not run.
    pub skipped: Vec<usize>,
}

/// What kind of fenced block an info string names.
enum Kind {
    Sh(Expect),
    NoTest,
    Output,
    Other,
}

fn kind(info: &str) -> Result<Kind, String> {
    let mut parts = info.split(',').map(str::trim);
    let lang = parts.next().unwrap_or_default();
    let flags: Vec<&str> = parts.collect();
    Ok(match (lang, flags.as_slice()) {
        ("sh", []) => Kind::Sh(Expect::Success),
        ("sh", ["no-test"]) => Kind::NoTest,
        ("sh", ["fails"]) => Kind::Sh(Expect::Failure(None)),
        ("sh", [flag]) if flag.starts_with("fails=") => {
            let code = flag["fails=".len()..].parse().map_err(|_| format!("`{info}`: fails=N needs a number"))?;
            if code == 0 {
                return Err(format!("`{info}`: an expected failure cannot exit 0"));
            }
            Kind::Sh(Expect::Failure(Some(code)))
        }
        ("sh", _) => return Err(format!("unknown shell block `{info}`: use sh, sh,no-test, sh,fails or sh,fails=N")),
        ("text", ["output"]) => Kind::Output,
        ("text", [_, ..]) if flags.contains(&"output") => {
            return Err(format!("`{info}`: an output block is exactly ```text,output"))
        }
        _ => Kind::Other,
    })
}

/// The commands of a block: one per line, `\` at the end continues, `#` lines are comments.
pub fn commands(body: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in body.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head.trim_end());
                pending.push(' ');
            }
            None => {
                pending.push_str(trimmed);
                out.push(std::mem::take(&mut pending));
            }
        }
    }
    if !pending.is_empty() {
        return Err(format!("the last command ends with `\\` but nothing follows: `{}`", pending.trim()));
    }
    for command in &out {
        let last = command.split_whitespace().last().unwrap_or_default();
        if matches!(last, "do" | "then" | "else" | "|" | "&&" | "||" | "{" | "(") {
            return Err(format!(
                "`{command}` goes on to the next line: one command per line, so end each of its lines with `\\` (or write it on one line)"
            ));
        }
        let first = command.split_whitespace().next().unwrap_or_default();
        if matches!(first, "cd" | "export" | "source" | ".") {
            return Err(format!(
                "`{command}`: each command runs in a shell of its own, so `{first}` would not carry to the next one"
            ));
        }
    }
    Ok(out)
}

/// Parses a chapter. Errors name the line.
pub fn chapter(markdown: &str) -> Result<Chapter, String> {
    let line_of = |offset: usize| markdown[..offset].matches('\n').count() + 1;
    let mut chapter = Chapter::default();
    let mut paragraph = String::new();
    let mut last_paragraph = String::new();
    let mut in_paragraph = false;
    // The fenced block being read: its kind, opening line and text.
    let mut open: Option<(Kind, usize, String)> = None;
    // Where the last runnable or skipped shell block ended, and whether it was run.
    let mut last_sh_end: Option<(usize, bool)> = None;
    for (event, range) in Parser::new(markdown).into_offset_iter() {
        match event {
            Event::Start(Tag::Paragraph) => {
                in_paragraph = true;
                paragraph.clear();
            }
            Event::End(TagEnd::Paragraph) => {
                in_paragraph = false;
                last_paragraph = std::mem::take(&mut paragraph);
            }
            Event::Text(t) | Event::Code(t) if in_paragraph => paragraph.push_str(&t),
            Event::SoftBreak | Event::HardBreak if in_paragraph => paragraph.push(' '),
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = line_of(range.start);
                let kind = kind(&info).map_err(|e| format!("line {line}: {e}"))?;
                open = Some((kind, line, String::new()));
            }
            Event::Text(t) if open.is_some() => {
                if let Some((_, _, text)) = open.as_mut() {
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let Some((kind, line, text)) = open.take() else { continue };
                let follows_sh = last_sh_end.filter(|(end, _)| markdown[*end..range.start].trim().is_empty());
                match kind {
                    Kind::Sh(expect) => {
                        let commands = commands(&text).map_err(|e| format!("line {line}: {e}"))?;
                        if commands.is_empty() {
                            return Err(format!("line {line}: a sh block with no command"));
                        }
                        chapter.blocks.push(Block { line, commands, expect, output: None });
                        last_sh_end = Some((range.end, true));
                    }
                    Kind::NoTest => {
                        let reason = reason(&last_paragraph);
                        if reason.is_none() {
                            return Err(format!(
                                "line {line}: a sh,no-test block needs the paragraph right before it to say \"{NO_TEST_MARK}\" and why"
                            ));
                        }
                        chapter.skipped.push(line);
                        last_sh_end = Some((range.end, false));
                    }
                    Kind::Output => match follows_sh {
                        Some((_, true)) => {
                            let block = chapter.blocks.last_mut().expect("a run block");
                            block.output = Some(Output { line, text });
                            last_sh_end = None;
                        }
                        Some((_, false)) => last_sh_end = None,
                        None => {
                            return Err(format!(
                                "line {line}: a text,output block must follow a sh block directly (blank lines only)"
                            ))
                        }
                    },
                    Kind::Other => last_sh_end = None,
                }
                last_paragraph.clear();
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Indented)) => {
                open = Some((Kind::Other, line_of(range.start), String::new()));
            }
            _ => {}
        }
    }
    Ok(chapter)
}

/// The reason after [`NO_TEST_MARK`] in a paragraph, if there is one.
fn reason(paragraph: &str) -> Option<&str> {
    let normalised =
        paragraph.find(NO_TEST_MARK).or_else(|| paragraph.find(&NO_TEST_MARK.replace('\'', "\u{2019}")))?;
    let rest = paragraph[normalised..].split_once(':')?.1.trim();
    (rest.chars().filter(|c| c.is_alphanumeric()).count() >= 3).then_some(rest)
}
