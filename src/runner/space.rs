//! Disk space. A job that needs more space than the filesystems holding its data have free is
//! refused before any data is written (unless the user overrides the check), and a filesystem
//! that fills during a case ends the run with the figures: every later case would fail the same
//! way, and a full disk hurts whatever else lives on it.

use super::existing_ancestor;
use crate::host::filesystem_space;
use crate::job::CasePlan;
use crate::units::format_bytes;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Files occupy whole blocks: a 100-byte object takes 4 KiB on ext4 and xfs.
const BLOCK: u64 = 4096;

/// Space one case will occupy under one path.
#[derive(Debug, Clone)]
pub struct Need {
    pub case_id: String,
    pub path: PathBuf,
    pub objects: u64,
    pub object_bytes: u64,
}

impl Need {
    /// Every key stored once at the case's mean size, rounded up to whole blocks: what the case
    /// holds at its fullest (overwrites replace, deletes free).
    pub fn of(case: &CasePlan, path: &Path) -> Need {
        Need { case_id: case.id.clone(), path: path.to_path_buf(), objects: case.objects, object_bytes: case.size.mean_bytes() }
    }

    /// Saturating: a size near u64::MAX (accepted by the job file) must read as "too large",
    /// not wrap to a few bytes and let the run fill the disk.
    fn bytes(&self) -> u64 {
        self.objects.saturating_mul(self.object_bytes.div_ceil(BLOCK).max(1).saturating_mul(BLOCK))
    }
}

/// "the tmpfs mounted at /mnt/small": the run's own directories are gone when the message is read.
fn filesystem_name(p: &Path) -> String {
    match crate::host::filesystem_of(existing_ancestor(p)) {
        Some(fs) => format!("the {} filesystem mounted at {}", fs.fs_type, fs.mount_point),
        None => format!("the filesystem holding {}", existing_ancestor(p).display()),
    }
}

/// Refuses a run whose cases will not fit. Cases run one after another and each removes its data
/// when done, so a filesystem must hold its largest case; with `keep` every case's data stays, so
/// it must hold them all.
pub fn check(needs: &[Need], keep: bool) -> Result<(), String> {
    let mut by_device: BTreeMap<u64, Vec<&Need>> = BTreeMap::new();
    for need in needs {
        let Ok(meta) = std::fs::metadata(existing_ancestor(&need.path)) else { continue };
        by_device.entry(meta.dev()).or_default().push(need);
    }
    for needs in by_device.values() {
        let Ok(space) = filesystem_space(existing_ancestor(&needs[0].path)) else { continue };
        let (required, what) = if keep {
            let total = needs.iter().fold(0u64, |total, n| total.saturating_add(n.bytes()));
            (total, format!("the run keeps every case's data (--keep): {} cases store about {} together", needs.len(), format_bytes(total)))
        } else {
            let Some(largest) = needs.iter().max_by_key(|n| n.bytes()) else { continue };
            let what = format!(
                "case {} stores about {} ({} objects of {})",
                largest.case_id,
                format_bytes(largest.bytes()),
                largest.objects,
                format_bytes(largest.object_bytes)
            );
            (largest.bytes(), what)
        };
        if required > space.free_bytes {
            return Err(format!(
                "not enough disk space: {what} in {}, which has {} free (of {}). Nothing was written. Free space there, lower \
                 objects or dataset, point --work-dir (or the target's path) at a larger filesystem, or pass --no-space-check to \
                 run anyway",
                filesystem_name(&needs[0].path),
                format_bytes(space.free_bytes),
                format_bytes(space.total_bytes)
            ));
        }
    }
    Ok(())
}

/// What to say when a case ran out of space: where, and how much is free now.
pub fn exhausted(case_id: &str, data_paths: &[PathBuf]) -> String {
    let at = data_paths.first().map(|p| existing_ancestor(p).to_path_buf()).unwrap_or_default();
    let figures = filesystem_space(&at)
        .map(|s| format!("{} free of {} now, after the case's data was removed", format_bytes(s.free_bytes), format_bytes(s.total_bytes)))
        .unwrap_or_else(|e| format!("free space unknown: {e}"));
    format!(
        "{} ran out of space during case {case_id} ({figures}); the run stopped there, as every later case would fail the \
         same way. Free space or point --work-dir (or the target's path) at a larger filesystem, then run again",
        filesystem_name(&at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A size near u64::MAX once wrapped the case's need to 0 bytes, and the preload wrote until
    /// the disk was full.
    #[test]
    fn a_need_too_large_to_count_is_refused_not_wrapped() {
        let dir = tempfile::tempdir().unwrap();
        let need = |objects, object_bytes| Need { case_id: "fs/w/huge/t1/r1".into(), path: dir.path().to_path_buf(), objects, object_bytes };
        assert_eq!(need(10, u64::MAX).bytes(), u64::MAX);
        assert_eq!(need(1, u64::MAX - 1).bytes(), u64::MAX);
        for keep in [false, true] {
            let refused = check(&[need(10, u64::MAX), need(10, u64::MAX)], keep).unwrap_err();
            assert!(refused.starts_with("not enough disk space"), "{refused}");
        }
        check(&[need(1, 4096)], false).unwrap();
    }
}
