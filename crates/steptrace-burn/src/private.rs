//! Keeping private paths out of what is written: the home directory becomes `$HOME`.

use std::path::Path;

/// `path` with the home directory replaced by `$HOME`.
pub fn tilde(path: &Path) -> String {
    tilde_str(&path.display().to_string())
}

/// `text` with a leading home directory replaced by `$HOME` (which names no user).
pub fn tilde_str(text: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && home != "/" && text.starts_with(&home) => {
            format!("$HOME{}", &text[home.len()..])
        }
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn home_becomes_a_variable() {
        let home = std::env::var("HOME").unwrap_or_default();
        if home.is_empty() || home == "/" {
            return;
        }
        assert_eq!(super::tilde_str(&format!("{home}/.cache/x")), "$HOME/.cache/x");
        assert_eq!(super::tilde_str("/usr/local/cuda"), "/usr/local/cuda");
    }
}
