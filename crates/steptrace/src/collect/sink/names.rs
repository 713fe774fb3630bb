//! Trace file names: a template, expanded per cycle, that never reuses a name.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::format::DistributedInfo;

/// The default file-name template.
///
/// `{worker}` is the worker name, `{cycle}` the cycle number, `{time}` the
/// UTC time the cycle's file was opened (`20261129T134501.123Z`), `{pid}`
/// the process id.
pub const DEFAULT_FILE_NAME: &str = "{worker}.cycle{cycle}.{time}.trace.json";

/// The default file-name template of a rank's files (see
/// [`RankProfilers`](crate::collect::RankProfilers)): [`DEFAULT_FILE_NAME`]
/// with `{rank}` (from 0) and `{world_size}`. A rank's files sit in one
/// folder per cycle, `{worker}.{run time}.cycle{cycle}`, shared by every
/// rank: Holistic Trace Analysis reads one folder per run, one file per
/// rank.
pub const RANK_FILE_NAME: &str = "{worker}.rank{rank}-of-{world_size}.cycle{cycle}.{time}.trace.json";

/// Expands the file-name template for each cycle.
#[derive(Clone, Debug)]
pub(crate) struct FileNames {
    dir: PathBuf,
    template: String,
    worker: String,
    /// For a rank's files: the rank, and the run's time stamp that names
    /// the cycle folders.
    rank: Option<(u32, u32, String)>,
}

impl FileNames {
    pub(crate) fn new(dir: PathBuf, template: &str, worker: &str, repeat: u64) -> Result<FileNames> {
        let bad = |reason| Error::Template { template: template.to_owned(), reason };
        if template.is_empty() || template.contains('/') || template.contains('\\') {
            return Err(bad("it must be a plain file name without directories"));
        }
        if repeat != 1 && !template.contains("{cycle}") && !template.contains("{time}") {
            return Err(bad("a schedule with several cycles needs {cycle} or {time} in the name, or the second cycle could not be saved"));
        }
        if !template.ends_with(".json") {
            return Err(bad("it must end with .json"));
        }
        Ok(FileNames { dir, template: template.to_owned(), worker: sanitize(worker), rank: None })
    }

    /// The same names for one rank of a run started at `run_stamp`: the
    /// default template becomes [`RANK_FILE_NAME`]; another must hold
    /// `{rank}`, or the ranks' files would take each other's names.
    pub(crate) fn for_rank(mut self, info: &DistributedInfo, run_stamp: &str) -> Result<FileNames> {
        if self.template == DEFAULT_FILE_NAME {
            RANK_FILE_NAME.clone_into(&mut self.template);
        }
        if !self.template.contains("{rank}") {
            return Err(Error::Template {
                template: self.template,
                reason: "a run of several ranks needs {rank} in the name, or the ranks would share one file",
            });
        }
        self.rank = Some((info.rank, info.world_size, run_stamp.to_owned()));
        Ok(self)
    }

    /// The final path for a cycle opened now.
    pub(crate) fn final_path(&self, cycle: u64) -> PathBuf {
        let name = self
            .template
            .replace("{worker}", &self.worker)
            .replace("{cycle}", &cycle.to_string())
            .replace("{pid}", &std::process::id().to_string())
            .replace("{time}", &utc_stamp(SystemTime::now()));
        match &self.rank {
            Some((rank, world, run)) => {
                let name = name.replace("{rank}", &rank.to_string()).replace("{world_size}", &world.to_string());
                self.dir.join(format!("{}.{run}.cycle{cycle}", self.worker)).join(name)
            }
            None => self.dir.join(name),
        }
    }

    /// Another name for the same cycle when `final_path`'s is taken by a
    /// concurrent run (same worker, same millisecond): `NAME-N.trace.json`.
    /// Only for templates with `{time}`, whose names are not the user's
    /// fixed choice; `None` otherwise.
    pub(crate) fn variant(&self, taken: &Path, n: u32) -> Option<PathBuf> {
        if !self.template.contains("{time}") {
            return None;
        }
        let name = taken.file_name()?.to_str()?;
        let suffix = if name.ends_with(".trace.json") { ".trace.json" } else { ".json" };
        let stem = name.strip_suffix(suffix)?;
        Some(taken.with_file_name(format!("{stem}-{n}{suffix}")))
    }

    /// The path of a fixed (time-free) name, when the template has no
    /// `{time}`: used to refuse an existing file before the run starts.
    pub(crate) fn fixed_path(&self, cycle: u64) -> Option<PathBuf> {
        (!self.template.contains("{time}")).then(|| self.final_path(cycle))
    }
}

/// The partial file next to a final path: `NAME.partial`.
pub(crate) fn partial_path(final_path: &Path) -> PathBuf {
    let mut name = final_path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    final_path.with_file_name(name)
}

/// A hidden temporary file next to a final path, for finalisation:
/// `.NAME.finishing`, or `.NAME.TAG.finishing` with a tag (for when the
/// first name belongs to someone else).
pub(crate) fn finishing_path(final_path: &Path, tag: Option<&str>) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(final_path.file_name().unwrap_or_default());
    if let Some(tag) = tag {
        name.push(format!(".{tag}"));
    }
    name.push(".finishing");
    final_path.with_file_name(name)
}

/// Keeps letters, digits, `-` and `_`; anything else becomes `_`.
pub(crate) fn sanitize(name: &str) -> String {
    let cleaned: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    if cleaned.is_empty() {
        "worker".to_owned()
    } else {
        cleaned
    }
}

/// `20261129T134501.123Z` for a time (UTC, millisecond precision).
pub(crate) fn utc_stamp(time: SystemTime) -> String {
    let ms = time.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, ms % 1000)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_taken_timed_name_has_variants_and_a_fixed_one_has_none() {
        let timed = FileNames::new(PathBuf::from("t"), DEFAULT_FILE_NAME, "w", 0).unwrap();
        let taken = Path::new("t/w.cycle0.20261201T120000.000Z.trace.json");
        assert_eq!(timed.variant(taken, 2).unwrap(), Path::new("t/w.cycle0.20261201T120000.000Z-2.trace.json"));
        let plain = FileNames::new(PathBuf::from("t"), "{worker}.{time}.json", "w", 0).unwrap();
        assert_eq!(plain.variant(Path::new("t/w.x.json"), 1).unwrap(), Path::new("t/w.x-1.json"));
        let fixed = FileNames::new(PathBuf::from("t"), "{worker}.{cycle}.trace.json", "w", 0).unwrap();
        assert!(fixed.variant(Path::new("t/w.0.trace.json"), 1).is_none());
    }

    #[test]
    fn a_ranks_files_sit_in_the_cycles_folder_and_need_the_rank() {
        let info = DistributedInfo::new("threads", 1, 2);
        let names =
            FileNames::new(PathBuf::from("t"), DEFAULT_FILE_NAME, "ddp", 0).unwrap().for_rank(&info, "R").unwrap();
        let path = names.final_path(3);
        assert_eq!(path.parent().unwrap(), Path::new("t/ddp.R.cycle3"));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("ddp.rank1-of-2.cycle3.") && name.ends_with(".trace.json"), "{name}");
        let custom = FileNames::new(PathBuf::from("t"), "{worker}.{cycle}.json", "w", 0).unwrap();
        assert!(matches!(custom.for_rank(&info, "R"), Err(Error::Template { .. })));
        let ranked = FileNames::new(PathBuf::from("t"), "r{rank}.json", "w", 1).unwrap().for_rank(&info, "R").unwrap();
        assert_eq!(ranked.final_path(0), PathBuf::from("t/w.R.cycle0/r1.json"));
    }

    #[test]
    fn stamps_are_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_959_901_123);
        assert_eq!(utc_stamp(t), "20261129T134501.123Z");
        assert_eq!(utc_stamp(UNIX_EPOCH), "19700101T000000.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert!(utc_stamp(leap).starts_with("20000229T"));
    }

    #[test]
    fn templates_are_checked() {
        let dir = PathBuf::from("out");
        assert!(FileNames::new(dir.clone(), "a/b.json", "w", 1).is_err());
        assert!(FileNames::new(dir.clone(), "fixed.trace.json", "w", 2).is_err());
        assert!(FileNames::new(dir.clone(), "fixed.trace.json", "w", 1).is_ok());
        assert!(FileNames::new(dir.clone(), "x.txt", "w", 1).is_err());
        let names = FileNames::new(dir, "{worker}.{cycle}.json", "my host/1", 0).unwrap();
        assert_eq!(names.final_path(3), PathBuf::from("out/my_host_1.3.json"));
        assert_eq!(partial_path(Path::new("out/a.json")), PathBuf::from("out/a.json.partial"));
        assert_eq!(finishing_path(Path::new("out/a.json"), None), PathBuf::from("out/.a.json.finishing"));
        assert_eq!(finishing_path(Path::new("out/a.json"), Some("7-1")), PathBuf::from("out/.a.json.7-1.finishing"));
    }
}
