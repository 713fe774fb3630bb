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

/// The module holding a parameter, as a span path: its path in the module tree without the
/// parameter's own name, with ` > ` between modules (`blocks.1.inner.weight` is
/// `blocks.1 > inner`), so that a report's tree sums a block's layers under the block; an
/// index stays with the list it indexes. A parameter of the root module keeps its name.
pub(crate) fn module_span_path(param_path: &str) -> String {
    let module = match param_path.rsplit_once('.') {
        Some((module, _)) if !module.is_empty() => module,
        _ => param_path,
    };
    let mut parts: Vec<String> = Vec::new();
    for part in module.split('.').filter(|p| !p.is_empty()) {
        match parts.last_mut() {
            Some(last) if part.chars().all(|c| c.is_ascii_digit()) => {
                last.push('.');
                last.push_str(part);
            }
            _ => parts.push(part.to_owned()),
        }
    }
    parts.join(" > ")
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
