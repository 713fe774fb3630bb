//! The files one command writes, checked before it writes any: each is
//! new, in a folder that exists, and no two name the same file, however
//! spelt (`./x`, `x`, `d/../x`, a folder reached through a link). A clash
//! found after the first file was written would leave half the outputs
//! behind.

use std::path::{Path, PathBuf};

use anyhow::bail;
use steptrace::display::escape;

/// Refuses `outputs` (each its flag and path, when given) unless each can
/// be created and no two are the same file.
pub(crate) fn check_new(outputs: &[(&str, Option<&Path>)]) -> anyhow::Result<()> {
    let mut seen: Vec<(&str, &Path, PathBuf)> = Vec::new();
    for (flag, path) in outputs.iter().filter_map(|(flag, path)| path.map(|p| (*flag, p))) {
        let shown = shown(path);
        if let Some(folder) = folder(path).filter(|f| !f.is_dir()) {
            bail!("cannot create {shown}: the folder {} does not exist", self::shown(folder));
        }
        if path.symlink_metadata().is_ok() {
            bail!("{shown} already exists: an existing file is never overwritten (nothing was written)");
        }
        let key = identity(path);
        if let Some((other_flag, other, _)) = seen.iter().find(|(_, _, k)| *k == key) {
            bail!(
                "{flag} {shown} and {other_flag} {} are the same file: each output needs its own path (nothing was written)",
                self::shown(other)
            );
        }
        seen.push((flag, path, key));
    }
    Ok(())
}

/// The folder `path` goes into, when it names one.
fn folder(path: &Path) -> Option<&Path> {
    path.parent().filter(|p| !p.as_os_str().is_empty())
}

/// The file `path` would be: its folder resolved (links, `.`, `..`), then
/// its name.
fn identity(path: &Path) -> PathBuf {
    let folder = folder(path).unwrap_or(Path::new("."));
    let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
    match path.file_name() {
        Some(name) => folder.join(name),
        None => folder,
    }
}

fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_under_two_spellings_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let a = dir.path().join("x.svg");
        let b = dir.path().join("d/../x.svg");
        let err = check_new(&[("--plot", Some(a.as_path())), ("--html", Some(b.as_path()))]).unwrap_err().to_string();
        assert!(err.contains("are the same file") && err.contains("--html") && err.contains("--plot"), "{err}");
        let c = dir.path().join("./d/./x.svg");
        assert!(check_new(&[("--plot", Some(a.as_path())), ("--html", Some(c.as_path())), ("--json", None)]).is_ok());
        std::fs::write(&a, "").unwrap();
        assert!(check_new(&[("--plot", Some(a.as_path()))]).unwrap_err().to_string().contains("already exists"));
        let missing = dir.path().join("no/x.html");
        assert!(check_new(&[("--html", Some(missing.as_path()))]).unwrap_err().to_string().contains("does not exist"));
    }
}
