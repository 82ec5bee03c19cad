//! The one way stowbench replaces a small file it owns (a report, an HTML page, a server record,
//! fio's job and output files): write a `.tmp` sibling, then rename it over the target, so a
//! reader — or a crash — sees the old file or the new one, never half of either. A temporary
//! file a failed write leaves is removed. (pack's index is written by its own durable, streaming
//! writer: see `pack::index_file`.)

use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` atomically.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Whether `replace(path, …)` could write there: its temporary sibling is made and removed
/// again. For output asked for on the command line, checked before minutes of work, not after.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Err(std::io::Error::other("it is a directory; give a file name"));
    }
    let tmp = tmp_path(path);
    std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    std::fs::remove_file(&tmp)
}

/// The temporary sibling of `path`: its name, this process's id, a number and `.tmp`, so that
/// two writers (processes, or threads of one) never write into one temporary file or rename
/// it from under each other: the last rename wins whole.
pub fn tmp_path(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}-{n}.tmp", std::process::id()));
    PathBuf::from(tmp)
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_whole_files_and_leaves_no_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        super::replace(&path, b"one").unwrap();
        super::replace(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert!(super::replace(&dir.path().join("missing/x"), b"three").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(super::check_writable(&path).is_ok());
        assert!(super::check_writable(dir.path()).is_err());
        assert!(super::check_writable(&dir.path().join("missing/x")).is_err());
        // Two writers of one file never share a temporary name.
        assert_ne!(super::tmp_path(&path), super::tmp_path(&path));
    }
}
