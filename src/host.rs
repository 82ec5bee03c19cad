//! The machine stowbench runs on, read from /proc and /sys: root or not, mounts and the
//! filesystem holding a path, space, memory, the CPU, and the one write stowbench makes to the
//! kernel (dropping the page cache). Used by the sampler, the runner, reports and fio alike.

use crate::report::model::FilesystemInfo;
use std::path::{Path, PathBuf};

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Device number "major:minor" (0:N for btrfs and other virtual devices).
    pub dev: String,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// Per-mount options (rw, noatime, …).
    pub mount_options: String,
    /// Filesystem type.
    pub fs_type: String,
    /// Mount source, e.g. /dev/loop3 or tmpfs.
    pub source: String,
    /// Filesystem-wide options (after the separator).
    pub super_options: String,
}

impl MountEntry {
    /// Every option in effect, per-mount first, then the filesystem's own, each once and
    /// comma-separated as `mount` takes them: "rw,relatime" and "rw" read "rw,relatime".
    pub fn effective_options(&self) -> String {
        let mut seen: Vec<&str> = Vec::new();
        for option in self.mount_options.split(',').chain(self.super_options.split(',')) {
            if !option.is_empty() && !seen.contains(&option) {
                seen.push(option);
            }
        }
        seen.join(",")
    }
}

/// Parses the mount table of this process's namespace; an unreadable table reads as empty.
pub fn mounts() -> Vec<MountEntry> {
    std::fs::read_to_string("/proc/self/mountinfo").map(|t| parse_mountinfo(&t)).unwrap_or_default()
}

/// Parses mountinfo text (see proc(5)).
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            Some(MountEntry {
                dev: left.get(2)?.to_string(),
                mount_point: PathBuf::from(unescape(left.get(4)?)),
                mount_options: left.get(5)?.to_string(),
                fs_type: right.first()?.to_string(),
                source: unescape(right.get(1)?),
                super_options: right.get(2).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// Undoes the kernel's octal escapes in mount tables ("\040" is a space).
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount whose mount point is exactly `dir`, if any (the last one wins, as in the kernel).
pub fn mount_at(dir: &Path) -> Option<MountEntry> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    mounts().into_iter().rfind(|m| m.mount_point == dir)
}

/// The mount holding `path` (longest mount point that is a prefix of it).
pub fn mount_containing(path: &Path) -> Option<MountEntry> {
    let path = path.canonicalize().ok()?;
    mounts().into_iter().filter(|m| path.starts_with(&m.mount_point)).max_by_key(|m| m.mount_point.as_os_str().len())
}

/// Reads a small sysfs attribute, trimmed.
pub fn sysfs(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|t| t.trim().to_string())
}

/// Bytes of memory available to new allocations (MemAvailable), if the kernel says.
pub fn mem_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The filesystem holding `path` (the mount with the longest matching mount point), with its
/// journal state for ext4.
pub fn filesystem_of(path: &Path) -> Option<FilesystemInfo> {
    let mount = mount_containing(path)?;
    let mut fs = FilesystemInfo {
        path: path.display().to_string(),
        mount_point: mount.mount_point.display().to_string(),
        // The filesystem's own options too (discard, data=, commit=, barrier): they change what a
        // put, a delete or an fsync costs, and `mount` shows them on the same line.
        mount_options: mount.effective_options(),
        fs_type: mount.fs_type,
        source: mount.source,
        journal: None,
    };
    if fs.fs_type == "ext4" {
        fs.journal = ext4_has_journal(&fs.source);
    }
    Some(fs)
}

/// Whether the ext4 filesystem on `source` (e.g. /dev/vda) has a journal; `None` if unknown.
fn ext4_has_journal(source: &str) -> Option<bool> {
    let device = Path::new(source).file_name()?.to_str()?;
    let task = std::fs::read_to_string(format!("/sys/fs/ext4/{device}/journal_task")).ok()?;
    Some(task.trim() != "<none>")
}

/// Writes dirty pages and drops the page cache (root only), for cold-cache phases.
pub fn drop_caches() -> Result<(), String> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("cannot drop the page cache ({e}); cache = \"cold\" needs root. Run as root or use cache = \"warm\""))
}

/// Space on a filesystem.
#[derive(Debug, Clone, Copy)]
pub struct FilesystemSpace {
    /// Bytes an unprivileged user may still write (statvfs f_bavail).
    pub free_bytes: u64,
    /// The filesystem's size.
    pub total_bytes: u64,
}

/// Space on the filesystem holding `path`.
pub fn filesystem_space(path: &Path) -> std::io::Result<FilesystemSpace> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: statvfs writes into the zeroed struct we own; the path is a valid C string.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let block = stat.f_frsize as u64;
    Ok(FilesystemSpace { free_bytes: (stat.f_bavail as u64).saturating_mul(block), total_bytes: (stat.f_blocks as u64).saturating_mul(block) })
}

/// The CPU's model name, from /proc/cpuinfo ("" when unknown).
pub fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    text.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string()).unwrap_or_default()
}

/// Total memory, from /proc/meminfo (0 when unknown).
pub fn memory_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// Whether mpirun (Open MPI, PMIx or PMI) started this process: it sets these in every rank.
pub fn started_by_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"].iter().any(|v| std::env::var_os(v).is_some())
}

/// How many processes mpirun started, when it says (Open MPI and PMI do; PMIx alone does not).
pub fn mpirun_world_size() -> Option<u64> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"].iter().find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_filesystem_of_the_root() {
        let fs = filesystem_of(Path::new("/")).unwrap();
        assert_eq!(fs.mount_point, "/");
        assert!(!fs.fs_type.is_empty());
        // The filesystem's own options are there too, as /proc/mounts shows them.
        let listed = std::fs::read_to_string("/proc/mounts").unwrap();
        // The last line for "/" is the mount in effect (a container lists the ones beneath first).
        let line = listed.lines().rfind(|l| l.split(' ').nth(1) == Some("/")).unwrap();
        for option in line.split(' ').nth(3).unwrap().split(',') {
            assert!(fs.mount_options.split(',').any(|o| o == option), "{option} missing from {}", fs.mount_options);
        }
    }

    #[test]
    fn mountinfo_lines_parse_with_escapes() {
        let text = "36 35 98:0 / /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                    40 35 0:52 / /srv rw,relatime shared:2 - btrfs /dev/loop3 rw,space_cache=v2\n";
        let list = parse_mountinfo(text);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(list[0].fs_type, "ext3");
        assert_eq!(list[1].dev, "0:52");
        assert_eq!(list[1].source, "/dev/loop3");
        assert_eq!(list[1].super_options, "rw,space_cache=v2");
        assert_eq!(list[1].effective_options(), "rw,relatime,space_cache=v2");
        assert_eq!(list[0].effective_options(), "rw,noatime,errors=continue");
    }
}
