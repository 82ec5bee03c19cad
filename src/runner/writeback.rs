//! Writing back the dirty pages before each phase, untimed, so a phase does not pay for the
//! writeback that the previous phase, the previous case's cleanup or another program left
//! (workload key `settle_writeback`, default on): what a careful person does by hand with `sync`
//! between the steps of a benchmark.
//!
//! It matters more than the kernel's own writeback makes it look. Besides the data itself, a
//! cleanup leaves its deleted inodes' table blocks dirty, and on ext4 without a journal the inode
//! allocator steps over every inode deleted in the last 60 s, 300 s while its block is still
//! dirty (`recently_deleted()` in fs/ext4/ialloc.c): the next case's file creations crawl for
//! minutes. In the quick default run on such a filesystem the fs 1 MiB puts read 0.3–0.9 GB/s
//! without it and 1.8–2.1 GB/s with it (docs/performance/harness.md, session 35).

use crate::report::model::WritebackSettle;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::time::Instant;

/// Which dirty pages are written back before a phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Nothing on this machine holds the case's data (a remote server, the `sim` backend).
    Nothing,
    /// The filesystems holding these paths (the deepest existing directory of each data path).
    Filesystems(Vec<PathBuf>),
    /// Every filesystem: a server on this machine keeps its files where stowbench does not know.
    All,
}

/// The scope for a backend whose data lives under `data_paths` and whose server, if any, runs
/// on this machine when `local_server`.
pub fn scope(data_paths: &[PathBuf], local_server: bool) -> Scope {
    if local_server {
        Scope::All
    } else if data_paths.is_empty() {
        Scope::Nothing
    } else {
        // A data path may not exist before the first put.
        Scope::Filesystems(data_paths.iter().map(|p| super::existing_ancestor(p).to_path_buf()).collect())
    }
}

/// Writes back the dirty pages of `scope`, timing it. `None` for `Scope::Nothing`; a failure
/// (a write-back error the filesystem reports: data the kernel could not write) is in the
/// result's `error`, and the phase runs anyway.
pub fn settle(scope: &Scope) -> Option<WritebackSettle> {
    let dirs = match scope {
        Scope::Nothing => return None,
        Scope::All => None,
        Scope::Filesystems(dirs) => Some(dirs),
    };
    let dirty_bytes_before = dirty_bytes();
    let started = Instant::now();
    let (scope_name, filesystems, error) = match dirs {
        None => {
            // SAFETY: sync(2) has no preconditions and cannot fail.
            unsafe { libc::sync() };
            ("all", Vec::new(), None)
        }
        Some(dirs) => {
            let (synced, error) = sync_filesystems(dirs);
            ("filesystems", synced, error)
        }
    };
    Some(WritebackSettle { scope: scope_name.into(), filesystems, dirty_bytes_before, ns: started.elapsed().as_nanos() as u64, error })
}

/// syncfs(2) once per filesystem among `dirs`; the directories synced (one per filesystem) and
/// the first failure.
fn sync_filesystems(dirs: &[PathBuf]) -> (Vec<PathBuf>, Option<String>) {
    use std::os::unix::fs::MetadataExt;
    let mut devices = Vec::new();
    let mut synced = Vec::new();
    let mut error = None;
    for dir in dirs {
        let result = std::fs::File::open(dir).and_then(|file| {
            let device = file.metadata()?.dev();
            if devices.contains(&device) {
                return Ok(false);
            }
            devices.push(device);
            // SAFETY: syncfs(2) on a descriptor this function owns for the call's duration.
            if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(true)
        });
        match result {
            Ok(true) => synced.push(dir.clone()),
            Ok(false) => {}
            Err(e) => {
                error.get_or_insert_with(|| format!("writing back the dirty pages of the filesystem holding {} failed: {e}", dir.display()));
            }
        }
    }
    (synced, error)
}

/// The machine's dirty and under-writeback memory (`Dirty` + `Writeback` in /proc/meminfo), in
/// bytes; 0 where it cannot be read.
fn dirty_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo").map(|text| dirty_bytes_in(&text)).unwrap_or(0)
}

/// `Dirty` + `Writeback` of /proc/meminfo text, in bytes.
fn dirty_bytes_in(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            matches!(name, "Dirty" | "Writeback").then(|| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())?
        })
        .sum::<u64>()
        * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_server_settles_every_filesystem_and_a_remote_one_nothing() {
        assert_eq!(scope(&[], true), Scope::All);
        assert_eq!(scope(&[PathBuf::from("/tmp/x")], true), Scope::All);
        assert_eq!(scope(&[], false), Scope::Nothing);
    }

    #[test]
    fn a_data_path_not_made_yet_settles_the_filesystem_of_its_deepest_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not-yet/objects");
        assert_eq!(scope(&[missing], false), Scope::Filesystems(vec![dir.path().to_path_buf()]));
    }

    #[test]
    fn two_paths_on_one_filesystem_are_synced_once() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let settled = settle(&Scope::Filesystems(vec![a.clone(), b])).unwrap();
        assert_eq!(settled.scope, "filesystems");
        assert_eq!(settled.filesystems, vec![a]);
        assert_eq!(settled.error, None);
        assert!(settle(&Scope::Nothing).is_none());
    }

    #[test]
    fn a_directory_that_cannot_be_opened_is_a_failure_named_by_its_path() {
        let settled = settle(&Scope::Filesystems(vec![PathBuf::from("/proc/1/nonexistent-stowbench")])).unwrap();
        assert!(settled.error.as_deref().unwrap().contains("/proc/1/nonexistent-stowbench"), "{settled:?}");
        assert!(settled.filesystems.is_empty());
    }

    #[test]
    fn dirty_bytes_add_dirty_and_writeback_in_kib() {
        let text = "MemFree:  100 kB\nDirty:              2832 kB\nWriteback:        16 kB\nWritebackTmp:     4 kB\n";
        assert_eq!(dirty_bytes_in(text), (2832 + 16) * 1024);
        assert_eq!(dirty_bytes_in(""), 0);
    }
}
