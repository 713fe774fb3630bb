//! Expected output against real output: numbers masked, `...` for any text.
//!
//! * every number (digits, with `.` or `,` between digits) matches any number;
//! * `...` (or `…`) inside a line matches any text; a line of only `...` matches any
//!   number of lines, none included;
//! * a run of spaces counts as one space, and a run of a table's `─` or `═` as one, so
//!   that a table whose columns widen with their numbers still matches;
//! * trailing whitespace, and blank lines at the end, are ignored.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(char),
    Num,
    Any,
}

/// Whether the characters from `at` start a number; its possible ends (exclusive), longest first.
fn number_ends(s: &[char], at: usize) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut i = at;
    while i < s.len() && s[i].is_ascii_digit() {
        i += 1;
        if i == s.len() || !s[i].is_ascii_digit() {
            ends.push(i);
            if i + 1 < s.len() && matches!(s[i], '.' | ',') && s[i + 1].is_ascii_digit() {
                i += 1;
            }
        }
    }
    ends.reverse();
    ends
}

fn tokens(expected: &str) -> Vec<Tok> {
    let s: Vec<char> = expected.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i].is_ascii_digit() {
            i = number_ends(&s, i)[0];
            out.push(Tok::Num);
        } else if s[i..].starts_with(&['.', '.', '.']) {
            i += 3;
            out.push(Tok::Any);
        } else if s[i] == '…' {
            i += 1;
            out.push(Tok::Any);
        } else {
            out.push(Tok::Lit(s[i]));
            i += 1;
        }
    }
    out
}

fn tokens_match(toks: &[Tok], s: &[char]) -> bool {
    match toks.split_first() {
        None => s.is_empty(),
        Some((Tok::Lit(c), rest)) => s.first() == Some(c) && tokens_match(rest, &s[1..]),
        Some((Tok::Num, rest)) => number_ends(s, 0).into_iter().any(|end| tokens_match(rest, &s[end..])),
        Some((Tok::Any, rest)) => (0..=s.len()).any(|skip| tokens_match(rest, &s[skip..])),
    }
}

/// `line` without trailing whitespace, each run of spaces, `─` or `═` made one character.
fn squeeze(line: &str) -> Vec<char> {
    let mut out: Vec<char> = Vec::new();
    for c in line.trim_end().chars() {
        if matches!(c, ' ' | '─' | '═') && out.last() == Some(&c) {
            continue;
        }
        out.push(c);
    }
    out
}

/// Whether one actual line matches one expected line.
pub fn line_matches(expected: &str, actual: &str) -> bool {
    let expected: String = squeeze(expected).into_iter().collect();
    tokens_match(&tokens(&expected), &squeeze(actual))
}

fn is_gap(line: &str) -> bool {
    matches!(line.trim(), "..." | "…")
}

fn lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// `Ok` when `actual` matches `expected`; else a message with the first expected line that
/// no alignment could match and the full output.
pub fn check(expected: &str, actual: &str) -> Result<(), String> {
    let exp = lines(expected);
    let act = lines(actual);
    // reach[i][j]: expected lines from i match actual lines from j. Filled from the end.
    let mut reach = vec![vec![false; act.len() + 1]; exp.len() + 1];
    reach[exp.len()][act.len()] = true;
    for i in (0..exp.len()).rev() {
        for j in (0..=act.len()).rev() {
            reach[i][j] = if is_gap(exp[i]) {
                reach[i + 1][j] || (j < act.len() && reach[i][j + 1])
            } else {
                j < act.len() && line_matches(exp[i], act[j]) && reach[i + 1][j + 1]
            };
        }
    }
    if reach[0][0] {
        return Ok(());
    }
    Err(diff(&exp, &act))
}

/// A readable account of the mismatch: how far the expected lines match in order from the
/// top (each line matched as early as it can be), the first one that does not, then both texts.
fn diff(exp: &[&str], act: &[&str]) -> String {
    let mut j = 0;
    let mut first_bad = None;
    for (i, e) in exp.iter().enumerate() {
        if is_gap(e) {
            continue;
        }
        let after_gap = i > 0 && is_gap(exp[i - 1]);
        let found = if after_gap {
            (j..act.len()).find(|&k| line_matches(e, act[k]))
        } else {
            (j < act.len() && line_matches(e, act[j])).then_some(j)
        };
        match found {
            Some(k) => j = k + 1,
            None => {
                first_bad = Some((i, j));
                break;
            }
        }
    }
    let mut out = String::new();
    match first_bad {
        Some((i, j)) => {
            out.push_str(&format!("expected line {} of the output block does not match:\n- {}\n", i + 1, exp[i]));
            match act.get(j) {
                Some(a) => out.push_str(&format!("+ {a}    (actual line {})\n", j + 1)),
                None => out.push_str("+ (the output ended)\n"),
            }
        }
        None => out.push_str("every expected line matched, but the actual output has more lines after them\n"),
    }
    out.push_str("--- expected\n");
    for e in exp {
        out.push_str(&format!("  {e}\n"));
    }
    out.push_str("--- actual\n");
    for a in act {
        out.push_str(&format!("  {a}\n"));
    }
    out
}
