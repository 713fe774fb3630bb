//! Helpers shared inside the crate.

use std::path::Path;

/// `path` with the home directory replaced by `$HOME`.
pub(crate) fn tilde(path: &Path) -> String {
    steptrace::settings::home_relative(path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn home_becomes_a_variable() {
        let home = std::env::var("HOME").unwrap_or_default();
        if home.is_empty() || home == "/" {
            return;
        }
        assert_eq!(super::tilde(std::path::Path::new(&format!("{home}/.cache/x"))), "$HOME/.cache/x");
        assert_eq!(super::tilde(std::path::Path::new("/usr/local/cuda")), "/usr/local/cuda");
    }
}
