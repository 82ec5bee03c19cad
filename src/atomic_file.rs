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

/// The temporary sibling of `path`: its name plus `.tmp`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
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
    }
}
