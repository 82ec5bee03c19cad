//! Small helpers around the operating system: running a tool, finding a program, reading
//! `/proc/self/mountinfo` and `/sys/class/block`. Read-only except `run_tool`, which runs exactly
//! the command it is given (never through a shell).

use super::error::FioError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs `program args…` with no stdin and returns its stdout; a failure carries stderr.
pub fn run_tool(program: &str, args: &[&str]) -> Result<String, FioError> {
    let command_line = command_line(program, args);
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| FioError::Command { command: command_line.clone(), status: "not started".into(), stderr: e.to_string() })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if stderr.is_empty() {
            stderr = String::from_utf8_lossy(&output.stdout).trim().to_string();
        }
        Err(FioError::Command { command: command_line, status: output.status.to_string(), stderr })
    }
}

/// The command as a person would type it (for reports and error messages).
pub fn command_line(program: &str, args: &[&str]) -> String {
    std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ")
}

/// Finds `program` on PATH or in the sbin directories root's PATH usually has.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

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
    mounts()
        .into_iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
}

/// Reads a small sysfs attribute, trimmed.
pub fn sysfs(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|t| t.trim().to_string())
}

/// Free bytes for unprivileged users on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> Result<u64, FioError> {
    crate::sampler::filesystem_space(path).map(|s| s.free_bytes).map_err(|e| FioError::io(path, e))
}

/// Bytes of memory available to new allocations (MemAvailable), if the kernel says.
pub fn mem_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
