//! Console lines that fit a 100-column terminal.

/// The widest line `train` prints.
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
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let n = word.chars().count();
        if len == 0 {
            line.push_str(word);
            len = n;
        } else if len + 1 + n <= WIDTH {
            line.push(' ');
            line.push_str(word);
            len += 1 + n;
        } else {
            lines.push(std::mem::replace(&mut line, format!("{}{word}", " ".repeat(INDENT))));
            len = INDENT + n;
        }
    }
    lines.push(line);
    lines
}

/// Prints `text` on stdout, wrapped by [`wrap`].
pub fn say(text: &str) {
    for line in wrap(text) {
        println!("{line}");
    }
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
        assert_eq!(wrap(&format!("wrote {path} (cycle 0)")), ["wrote".to_owned(), format!("    {path}"), "    (cycle 0)".to_owned()]);
    }
}
