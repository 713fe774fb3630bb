//! Where a trace sits in a run of several ranks: torch.profiler's
//! `distributedInfo`, which Holistic Trace Analysis reads.
//!
//! A rank's file opens with it, before `traceEvents`:
//!
//! ```text
//! {"distributedInfo": {"backend": "burn-multi-device", "rank": 1, "world_size": 2},
//!  "traceEvents":[ ... ], ...}
//! ```
//!
//! HTA finds a file's rank with the regular expression `"rank":\s+(\d+)` on
//! the raw text, first match: the space after the colon is required, and
//! nothing before it may hold such a key. [`DistributedInfo::file_head`]
//! writes it that way. torch.profiler's own files carry the same object,
//! so the report reads ranks from either.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The top-level key, as torch.profiler spells it.
pub const DISTRIBUTED_INFO: &str = "distributedInfo";

/// A rank of a run, as written in its trace files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct DistributedInfo {
    /// What connects the ranks (`nccl` in torch; burn's strategy here).
    pub backend: String,
    /// This rank, from 0.
    pub rank: u32,
    /// How many ranks the run has.
    pub world_size: u32,
}

impl DistributedInfo {
    /// Rank `rank` of `world_size`, connected by `backend`.
    #[must_use]
    pub fn new(backend: impl Into<String>, rank: u32, world_size: u32) -> DistributedInfo {
        DistributedInfo { backend: backend.into(), rank, world_size }
    }

    /// Reads the object from a file's top-level keys (ours or
    /// torch.profiler's); `None` when absent or not a rank.
    #[must_use]
    pub fn from_top_level(top: &serde_json::Map<String, Value>) -> Option<DistributedInfo> {
        let info = top.get(DISTRIBUTED_INFO)?;
        let rank = u32::try_from(info.get("rank")?.as_u64()?).ok()?;
        let world_size =
            info.get("world_size").and_then(Value::as_u64).and_then(|w| u32::try_from(w).ok()).unwrap_or(0);
        let backend = info.get("backend").and_then(Value::as_str).unwrap_or_default().to_owned();
        Some(DistributedInfo { backend, rank, world_size })
    }

    /// The file's first line: `{"distributedInfo": {...},` with a space
    /// after every colon, so that HTA's rank pattern matches.
    #[must_use]
    pub fn file_head(&self) -> String {
        format!(
            "{{\"{DISTRIBUTED_INFO}\": {{\"backend\": {}, \"rank\": {}, \"world_size\": {}}},\n",
            Value::from(self.backend.as_str()),
            self.rank,
            self.world_size
        )
    }

    /// `rank 1 of 2`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!("rank {} of {}", self.rank, self.world_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_matches_htas_pattern_and_reads_back() {
        let info = DistributedInfo::new("burn \"x\"", 3, 4);
        let head = info.file_head();
        // HTA: re.search(r'"rank":\s+(\d+)', text)
        let at = head.find("\"rank\": ").expect("space after the colon");
        assert!(head[at + 8..].starts_with('3'));
        let doc: Value = serde_json::from_str(&format!("{head}\"traceEvents\": []}}")).expect("valid JSON");
        let back = DistributedInfo::from_top_level(doc.as_object().expect("object")).expect("rank");
        assert_eq!(back, info);
    }

    #[test]
    fn torch_shaped_objects_read_and_others_do_not() {
        let torch: Value =
            serde_json::json!({"distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 8, "pg_count": 2}});
        let info = DistributedInfo::from_top_level(torch.as_object().unwrap()).unwrap();
        assert_eq!((info.backend.as_str(), info.rank, info.world_size), ("nccl", 1, 8));
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"distributedInfo": {"rank": -1}}),
            serde_json::json!({"distributedInfo": 3}),
        ] {
            assert_eq!(DistributedInfo::from_top_level(bad.as_object().unwrap()), None);
        }
    }
}
