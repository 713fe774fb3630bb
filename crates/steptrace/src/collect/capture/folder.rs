//! The capture folder, opened once and then used only through its
//! descriptor, so that renaming or replacing its path later changes nothing
//! for whoever holds it open.
//!
//! Every file in it is opened without following a link and without
//! blocking (a FIFO opens at once and is then refused), checked to be a
//! regular file with an expected owner, and read through a bound: at most
//! [`MAX_FILE`] + 1 bytes, whatever the file says its length is. New files
//! are created exclusively (`O_EXCL`, mode 0600) under a fresh name, then
//! renamed or linked to their place: nothing is ever written through a
//! name that is already there.
//!
//! The rules that say whether a folder or a file may be trusted are plain
//! functions of owners and mode bits ([`folder_refusal`], [`file_refusal`],
//! [`caller_refusal`]), so that they can be checked without a second user.

use std::fs::File;
use std::io::{self, Read};
#[cfg(not(unix))]
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest protocol file read (a bigger one is not ours).
pub(crate) const MAX_FILE: u64 = 1 << 20;

/// What a file is, as `fstat` (or `lstat`) says: enough to tell who owns
/// it, what kind it is, and whether two names are the same file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) uid: u32,
    pub(crate) mode: u32,
}

const TYPE_MASK: u32 = 0o170_000;
const DIRECTORY: u32 = 0o040_000;
const REGULAR: u32 = 0o100_000;
const STICKY: u32 = 0o1000;
const GROUP_OR_OTHER_WRITE: u32 = 0o022;

impl Meta {
    #[cfg(unix)]
    pub(crate) fn of(meta: &std::fs::Metadata) -> Meta {
        use std::os::unix::fs::MetadataExt;
        Meta { dev: meta.dev(), ino: meta.ino(), uid: meta.uid(), mode: meta.mode() }
    }

    /// Whether `other` is the same file.
    pub(crate) fn same_file(&self, other: &Meta) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }

    /// What kind of file it is, in words.
    pub(crate) fn kind(&self) -> &'static str {
        match self.mode & TYPE_MASK {
            REGULAR => "a regular file",
            DIRECTORY => "a directory",
            0o120_000 => "a symbolic link",
            0o010_000 => "a FIFO",
            0o140_000 => "a socket",
            0o020_000 => "a character device",
            0o060_000 => "a block device",
            _ => "a special file",
        }
    }

    pub(crate) fn is_regular(&self) -> bool {
        self.mode & TYPE_MASK == REGULAR
    }
}

/// Why a folder owned by `uid`, with `mode` (`st_mode`), may not hold the
/// protocol's files of a process running as `owner`; `None` when it may.
///
/// It must be a directory owned by `owner` (a folder of another user's
/// could hold any file that user wrote), and nobody else may add or
/// replace files in it: no write permission for group or others, unless
/// the sticky bit keeps each file's name to its owner (then every file is
/// also checked for its owner when read).
pub(crate) fn folder_refusal(uid: u32, mode: u32, owner: u32) -> Option<String> {
    if mode & TYPE_MASK != DIRECTORY {
        return Some(format!("it is {}, not a folder", Meta { dev: 0, ino: 0, uid, mode }.kind()));
    }
    if uid != owner {
        return Some(format!(
            "it belongs to uid {uid}, not to uid {owner}, whose run it would serve: that user could write its files"
        ));
    }
    if mode & GROUP_OR_OTHER_WRITE != 0 && mode & STICKY == 0 {
        return Some(format!(
            "others can write to it (mode {:04o}): they could replace its files (chmod go-w, or remove it and let steptrace create it)",
            mode & 0o7777
        ));
    }
    None
}

/// Why a protocol file may not be trusted; `None` when it may: it must be
/// a regular file owned by one of `owners`.
pub(crate) fn file_refusal(meta: &Meta, owners: &[u32]) -> Option<String> {
    if !meta.is_regular() {
        return Some(format!("it is {}, not a regular file", meta.kind()));
    }
    if !owners.contains(&meta.uid) {
        let owners: Vec<String> = owners.iter().map(u32::to_string).collect();
        return Some(format!("it belongs to uid {}, not to uid {}", meta.uid, owners.join(" or ")));
    }
    None
}

/// Why a user `caller` may not ask a process running as `target`; `None`
/// when it may: the same user, or root.
pub(crate) fn caller_refusal(caller: u32, target: u32) -> Option<String> {
    (caller != target && caller != 0).then(|| format!("it runs as uid {target} and this is uid {caller}"))
}

/// Why a folder could not be used.
#[derive(Debug)]
pub(crate) enum FolderError {
    /// There is nothing at its path.
    Missing,
    /// It is there but not to be trusted: why.
    Refused(String),
    /// It could not be created or opened.
    Io(io::Error),
}

/// The capture folder, held open.
#[derive(Debug)]
pub(crate) struct Folder {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    #[cfg(not(unix))]
    path: PathBuf,
}

/// A fresh name beside `name` for a file being written.
fn temp_name(name: &str) -> String {
    static MADE: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{name}.new-{}-{nanos}-{}", std::process::id(), MADE.fetch_add(1, Ordering::Relaxed))
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Reads at most [`MAX_FILE`] bytes from `file`; more is an error.
fn read_bounded(file: File) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(invalid(format!("it holds more than {MAX_FILE} bytes: not a capture file")));
    }
    Ok(bytes)
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::io::{self, Write};
    use std::os::fd::{AsFd, OwnedFd};
    use std::path::Path;

    use rustix::fs::{AtFlags, Mode, OFlags, CWD};
    use rustix::io::Errno;

    use super::{file_refusal, folder_refusal, invalid, read_bounded, temp_name, Folder, FolderError, Meta};

    const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

    fn meta_of(fd: &OwnedFd) -> io::Result<Meta> {
        let file = File::from(fd.try_clone()?);
        Ok(Meta::of(&file.metadata()?))
    }

    /// What is at `name` under `dir`, the name itself (a link is not followed).
    // The field types of `stat` differ between systems.
    #[allow(clippy::unnecessary_cast, trivial_numeric_casts)]
    fn lstat(dir: impl AsFd, name: impl rustix::path::Arg) -> io::Result<Meta> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(Meta { dev: st.st_dev as u64, ino: st.st_ino as u64, uid: st.st_uid as u32, mode: st.st_mode as u32 })
    }

    impl Folder {
        /// The running process's side: creates `path` (mode 0700), or takes
        /// the folder there if it is a folder of this user's that nobody
        /// else can write to.
        pub(crate) fn create(path: &Path) -> Result<Folder, FolderError> {
            match rustix::fs::mkdirat(CWD, path, Mode::RWXU) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(FolderError::Io(e.into())),
            }
            Folder::open(path, rustix::process::geteuid().as_raw())
        }

        /// Opens the folder at `path` without following a link, and checks
        /// that it belongs to `owner` and that nobody else can write to it.
        pub(crate) fn open(path: &Path, owner: u32) -> Result<Folder, FolderError> {
            let fd = match rustix::fs::openat(CWD, path, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Err(FolderError::Missing),
                Err(e @ (Errno::LOOP | Errno::NOTDIR | Errno::MLINK)) => {
                    return Err(match lstat(CWD, path) {
                        Ok(meta) => {
                            let link = if meta.mode & super::TYPE_MASK == 0o120_000 {
                                " (a link is not followed)"
                            } else {
                                ""
                            };
                            FolderError::Refused(format!("it is {}, not a folder{link}", meta.kind()))
                        }
                        Err(_) => FolderError::Io(e.into()),
                    });
                }
                Err(e) => return Err(FolderError::Io(e.into())),
            };
            let meta = meta_of(&fd).map_err(FolderError::Io)?;
            if let Some(why) = folder_refusal(meta.uid, meta.mode, owner) {
                return Err(FolderError::Refused(why));
            }
            Ok(Folder { fd })
        }

        /// The file `name`, if there is one, and what it is: it must be a
        /// regular file that one of `owners` owns, of at most
        /// [`MAX_FILE`](super::MAX_FILE) bytes. Never follows a link, never
        /// blocks on a FIFO, never reads past the bound.
        pub(crate) fn read(&self, name: &str, owners: &[u32]) -> io::Result<Option<(Vec<u8>, Meta)>> {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
            let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::LOOP | Errno::MLINK) => return Err(invalid("it is a symbolic link (not followed)".into())),
                Err(Errno::NXIO) => {
                    return Err(invalid(format!(
                        "it is {}, not a regular file",
                        self.what_is(name).map_or("a special file", |m| m.kind())
                    )))
                }
                Err(e) => return Err(e.into()),
            };
            let meta = meta_of(&fd)?;
            if let Some(why) = file_refusal(&meta, owners) {
                return Err(invalid(why));
            }
            Ok(Some((read_bounded(File::from(fd))?, meta)))
        }

        /// A new file of `bytes` (mode 0600) under a fresh name, synced,
        /// then put in place by `place`, which says whether the fresh name
        /// is still there (a link leaves it, a rename takes it); the fresh
        /// name never stays behind. The file is returned open.
        fn write_fresh(
            &self,
            name: &str,
            bytes: &[u8],
            place: impl FnOnce(&str) -> io::Result<bool>,
        ) -> io::Result<(File, Meta)> {
            let tmp = temp_name(name);
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let mut file = File::from(rustix::fs::openat(&self.fd, &tmp, flags, Mode::RUSR | Mode::WUSR)?);
            let placed = file.write_all(bytes).and_then(|()| file.sync_data()).and_then(|()| place(&tmp));
            if !matches!(placed, Ok(false)) {
                let _ = rustix::fs::unlinkat(&self.fd, &tmp, AtFlags::empty());
            }
            placed?;
            let meta = Meta::of(&file.metadata()?);
            Ok((file, meta))
        }

        /// Writes `name` atomically: a new file renamed over the old name
        /// (the rename replaces a link or a file there; it never writes
        /// through one). The file is returned open.
        pub(crate) fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<(File, Meta)> {
            self.write_fresh(name, bytes, |tmp| {
                rustix::fs::renameat(&self.fd, tmp, &self.fd, name)?;
                Ok(false)
            })
        }

        /// Writes `name` unless something is there (then `AlreadyExists`):
        /// a new file linked to its name, so that a reader never sees half
        /// a file and nothing there is replaced.
        pub(crate) fn write_new(&self, name: &str, bytes: &[u8]) -> io::Result<Meta> {
            let placed = self.write_fresh(name, bytes, |tmp| {
                match rustix::fs::linkat(&self.fd, tmp, &self.fd, name, AtFlags::empty()) {
                    Ok(()) => Ok(true),
                    Err(Errno::EXIST) => Err(io::ErrorKind::AlreadyExists.into()),
                    // Filesystems without hard links: check, then rename.
                    Err(_) if self.what_is(name).is_none() => {
                        rustix::fs::renameat(&self.fd, tmp, &self.fd, name)?;
                        Ok(false)
                    }
                    Err(_) => Err(io::ErrorKind::AlreadyExists.into()),
                }
            })?;
            Ok(placed.1)
        }

        /// Removes the name `name` (a link itself, never what it points to).
        pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
            Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
        }

        /// Removes `name` if it is still the file `meta`; whether it did.
        pub(crate) fn remove_if_same(&self, name: &str, meta: &Meta) -> bool {
            self.what_is(name).is_some_and(|m| m.same_file(meta)) && self.remove(name).is_ok()
        }

        /// What is at `name`, if anything (a link is not followed).
        pub(crate) fn what_is(&self, name: &str) -> Option<Meta> {
            lstat(&self.fd, name).ok()
        }
    }
}

#[cfg(not(unix))]
impl Folder {
    pub(crate) fn create(path: &Path) -> Result<Folder, FolderError> {
        std::fs::create_dir_all(path).map_err(FolderError::Io)?;
        Ok(Folder { path: path.to_path_buf() })
    }

    pub(crate) fn open(path: &Path, _owner: u32) -> Result<Folder, FolderError> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => Ok(Folder { path: path.to_path_buf() }),
            Ok(_) => Err(FolderError::Refused("it is not a folder".into())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(FolderError::Missing),
            Err(e) => Err(FolderError::Io(e)),
        }
    }

    pub(crate) fn read(&self, name: &str, _owners: &[u32]) -> io::Result<Option<(Vec<u8>, Meta)>> {
        let path = self.path.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(invalid("it is not a regular file".into())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
        let meta = Meta { dev: 0, ino: 0, uid: 0, mode: REGULAR };
        Ok(Some((read_bounded(File::open(&path)?)?, meta)))
    }

    pub(crate) fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<(File, Meta)> {
        let tmp = self.path.join(temp_name(name));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))?;
        let result = std::fs::rename(&tmp, self.path.join(name));
        let _ = std::fs::remove_file(&tmp);
        result?;
        Ok((File::open(self.path.join(name))?, Meta { dev: 0, ino: 0, uid: 0, mode: REGULAR }))
    }

    pub(crate) fn write_new(&self, name: &str, bytes: &[u8]) -> io::Result<Meta> {
        let tmp = self.path.join(temp_name(name));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes));
        let placed = written.and_then(|()| crate::collect::sink::link_no_clobber(&tmp, &self.path.join(name)));
        let _ = std::fs::remove_file(&tmp);
        placed.map(|()| Meta { dev: 0, ino: 0, uid: 0, mode: REGULAR })
    }

    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.path.join(name))
    }

    pub(crate) fn remove_if_same(&self, name: &str, _meta: &Meta) -> bool {
        self.remove(name).is_ok()
    }

    pub(crate) fn what_is(&self, name: &str) -> Option<Meta> {
        let m = std::fs::symlink_metadata(self.path.join(name)).ok()?;
        Some(Meta {
            dev: 0,
            ino: 0,
            uid: 0,
            mode: if m.is_dir() {
                DIRECTORY
            } else if m.is_file() {
                REGULAR
            } else {
                0
            },
        })
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    const DIR: u32 = 0o040_000;

    #[test]
    fn a_folder_is_trusted_only_if_its_owner_alone_can_write_to_it() {
        // Its owner's, with nobody else writing: trusted.
        for mode in [0o700, 0o750, 0o755, 0o1777, 0o1770] {
            assert_eq!(folder_refusal(1000, DIR | mode, 1000), None, "{mode:o}");
        }
        // Group or others may add and replace files: refused.
        for mode in [0o777, 0o770, 0o720, 0o702, 0o775] {
            let why = folder_refusal(1000, DIR | mode, 1000).unwrap();
            assert!(why.contains("others can write to it"), "{mode:o}: {why}");
        }
        // Another user's, even private, or root's for a user's run: refused.
        assert!(folder_refusal(1001, DIR | 0o700, 1000).unwrap().contains("belongs to uid 1001, not to uid 1000"));
        assert!(folder_refusal(0, DIR | 0o700, 1000).is_some());
        assert!(folder_refusal(1000, DIR | 0o700, 0).is_some(), "root's run does not take a user's folder");
        // Not a folder at all.
        assert!(folder_refusal(1000, 0o120_777, 1000).unwrap().contains("a symbolic link, not a folder"));
    }

    #[test]
    fn a_file_is_trusted_only_if_regular_and_its_owners() {
        let file = |uid, mode| Meta { dev: 1, ino: 2, uid, mode };
        assert_eq!(file_refusal(&file(1000, 0o100_600), &[1000]), None);
        assert_eq!(file_refusal(&file(0, 0o100_600), &[1000, 0]), None);
        assert!(file_refusal(&file(1001, 0o100_600), &[1000, 0])
            .unwrap()
            .contains("belongs to uid 1001, not to uid 1000 or 0"));
        for (mode, kind) in [
            (0o010_600, "a FIFO"),
            (0o020_666, "a character device"),
            (0o040_700, "a directory"),
            (0o140_777, "a socket"),
        ] {
            assert!(file_refusal(&file(1000, mode), &[1000]).unwrap().contains(kind), "{kind}");
        }
    }

    #[test]
    fn only_the_same_user_or_root_may_ask() {
        assert_eq!(caller_refusal(1000, 1000), None);
        assert_eq!(caller_refusal(0, 1000), None);
        assert!(caller_refusal(1001, 1000).unwrap().contains("runs as uid 1000 and this is uid 1001"));
        assert!(caller_refusal(1000, 0).is_some());
    }

    fn folder() -> (tempfile::TempDir, Folder) {
        let dir = tempfile::tempdir().unwrap();
        let folder = Folder::create(&dir.path().join("f")).unwrap();
        (dir, folder)
    }

    fn me() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    #[test]
    fn a_new_file_is_never_written_over_another_and_leaves_nothing_behind() {
        let (dir, folder) = folder();
        folder.write_new("r", b"first").unwrap();
        assert_eq!(folder.write_new("r", b"second").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(folder.read("r", &[me()]).unwrap().unwrap().0, b"first");
        assert_eq!(std::fs::read_dir(dir.path().join("f")).unwrap().count(), 1);
        // A dangling link at the name is not written through either.
        std::os::unix::fs::symlink(dir.path().join("target"), dir.path().join("f/l")).unwrap();
        assert_eq!(folder.write_new("l", b"x").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert!(!dir.path().join("target").exists());
        // An atomic write replaces the link itself.
        folder.write_atomic("l", b"y").unwrap();
        assert!(!dir.path().join("target").exists());
        assert_eq!(std::fs::read(dir.path().join("f/l")).unwrap(), b"y");
    }

    #[test]
    fn reads_are_bounded_and_absence_is_not_an_error() {
        let (dir, folder) = folder();
        assert!(folder.read("none", &[me()]).unwrap().is_none());
        std::fs::write(dir.path().join("f/big"), vec![b' '; MAX_FILE as usize + 1]).unwrap();
        let err = folder.read("big", &[me()]).unwrap_err();
        assert!(err.to_string().contains("more than 1048576 bytes"), "{err}");
        std::fs::write(dir.path().join("f/fits"), vec![b' '; MAX_FILE as usize]).unwrap();
        assert_eq!(folder.read("fits", &[me()]).unwrap().unwrap().0.len() as u64, MAX_FILE);
        // /dev/zero behind a link: refused before a byte is read.
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("f/zero")).unwrap();
        assert!(folder.read("zero", &[me()]).unwrap_err().to_string().contains("symbolic link"));
        // A file of another user's: refused.
        std::fs::write(dir.path().join("f/theirs"), b"{}").unwrap();
        assert!(folder.read("theirs", &[me().wrapping_add(1)]).unwrap_err().to_string().contains("belongs to uid"));
    }
}
