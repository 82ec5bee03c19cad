//! `fs`: one file per object in fan-out directories under the namespace.
//!
//! A put writes a temporary file and renames it over the final name, so a reader never sees a
//! half-written object. With `fsync = true` the file is fsynced before the rename and the directory
//! after it: the object then survives a power cut. Keys are hashed into two levels of 256
//! directories so no directory grows past a few thousand entries.
//!
//! `fsync_dir = false` (with `fsync = true`) fsyncs only the file, never its directory, as fio and
//! most applications do: what a put costs then without the second flush.
//!
//! `write_mode = "in-place"` writes the final file directly (create, or truncate and rewrite), as
//! fio and many applications do: no rename, so a reader can see a partial object and a failed put
//! leaves one. It exists to measure exactly the I/O fio does (bench/fs-vs-fio.sh) and to show what
//! atomic visibility costs; the default stays atomic.

use super::namespace::{DataNamespace, DataPath};
use super::options::{OptionDoc, Options};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, Namespace, Session};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "fs",
    summary: "one file per object in fan-out directories (write to a temporary name, then rename)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: None,
};

const OPTIONS: &[OptionDoc] = crate::options_list!(DataPath::DOCS, FsOptions::DOCS);

crate::option_choice! {
    /// How a put writes its file.
    pub enum FsWriteMode { Rename = "rename", InPlace = "in-place" }
}

crate::backend_options! {
    /// fs's own options.
    pub struct FsOptions {
        fsync: bool = false => "fsync each file before its rename and the directory after it",
        fsync_dir: bool = true => "with fsync = true, also fsync each directory that gained or lost an entry (the rename, a new file written in place, a removal, a new fan-out directory): only then does POSIX promise the new name survives a crash. false fsyncs only the file, as fio and most applications do: one device flush per put instead of two, and the name's durability is left to the filesystem (ext4 and XFS commit a new entry with the file's fsync; others may not)",
        fanout_levels: u64 = 2 => "levels of 256-way hashed directories (0 to 3)",
        write_mode: FsWriteMode = "rename" => "rename (temporary file, then rename: never half-visible) or in-place (write the final file directly, as fio does: a reader or a crash can see a partial object)",
        direct: bool = false => "read and write with O_DIRECT, around the page cache, as fio's direct=1: gets then measure the device, not memory. Writes go out in whole 4 KiB-aligned blocks from an aligned buffer; the last block of an object whose length is not a multiple of 4 KiB is padded with zeros and the file cut back to the object's length, so the stored bytes are exactly the object. Checked when the target is built: a filesystem that refuses O_DIRECT stops the run with the directory and the fix, before any data (tmpfs accepts it since Linux 6.6). The report's cache state for these cases and phases is direct",
    }
}

/// How a file is written: durably or not, through the page cache or around it.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteMode {
    /// fsync the file.
    pub fsync: bool,
    /// fsync the directories that gained or lost an entry (only with `fsync`).
    pub fsync_dirs: bool,
    /// O_DIRECT (see `backend::direct`).
    pub direct: bool,
}

/// The fs backend for one case.
pub struct FsBackend {
    root: PathBuf,
    data: DataNamespace,
    fsync: bool,
    fsync_dir: bool,
    fanout_levels: u32,
    in_place: bool,
    direct: bool,
    options: Options,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("fs", OPTIONS)?;
    let data = DataNamespace::new(options, ns)?;
    let own = FsOptions::read(options)?;
    if own.fanout_levels > 3 {
        return Err(format!("target \"{}\": option \"fanout_levels\" is {}; use 0 to 3", options.target, own.fanout_levels));
    }
    if !own.fsync_dir && !own.fsync {
        return Err(format!(
            "target \"{}\": option \"fsync_dir\" = false only changes what a durable put flushes; add fsync = true or remove fsync_dir",
            options.target
        ));
    }
    if own.direct {
        super::direct::check_supported(&data.ns.dir, &options.target)?;
    }
    Ok(Box::new(FsBackend {
        direct: own.direct,
        root: data.ns.dir.join("objects"),
        data,
        fsync: own.fsync,
        fsync_dir: own.fsync_dir,
        fanout_levels: own.fanout_levels as u32,
        in_place: own.write_mode == FsWriteMode::InPlace,
        options: options.clone(),
    }))
}

/// Path of `key` under `root` with `levels` of hashed fan-out directories.
pub fn fanout_path(root: &Path, key: &str, levels: u32) -> PathBuf {
    let hash = crate::hash::xxh3_64(key.as_bytes());
    let mut path = root.to_path_buf();
    for level in 0..levels {
        path.push(format!("{:02x}", (hash >> (8 * level)) & 0xff));
    }
    path.push(encode_key(key));
    path
}

/// Keys become file names: anything outside [A-Za-z0-9._-] is percent-encoded, so no key can
/// escape its directory ("../x") or collide with our temporary names.
fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && !out.is_empty()) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    out
}

/// Writes `len` bytes from `body` to `path` atomically (temporary file + rename), optionally durable.
pub fn write_file_atomically(path: &Path, body: &mut dyn Read, len: u64, mode: WriteMode, worker: usize) -> BResult<()> {
    let dir = path.parent().expect("object paths always have a parent");
    let tmp = dir.join(format!(".tmp-{worker}-{}", path.file_name().unwrap_or_default().to_string_lossy()));
    let open = || opener(mode).write(true).create(true).truncate(true).open(&tmp);
    let mut file = match open() {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create_dirs(dir, mode.fsync_dirs)?;
            open().map_err(|e| call_error("open", &tmp, e))?
        }
        Err(e) => return Err(call_error("open", &tmp, e)),
    };
    let written = fill(&mut file, &tmp, body, len, mode).and_then(|()| {
        if mode.fsync {
            file.sync_all().map_err(|e| call_error("fsync", &tmp, e))?;
        }
        Ok(())
    });
    drop(file);
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = fs::rename(&tmp, path) {
        // Nothing names the temporary file but this put: it goes, as after a failed write.
        let _ = fs::remove_file(&tmp);
        return Err(call_error("rename", &tmp, e));
    }
    if mode.fsync_dirs {
        sync_dir(dir)?;
    }
    Ok(())
}

/// fsyncs directory `dir` (its entries become durable); the error names the call and directory.
fn sync_dir(dir: &Path) -> BResult<()> {
    #[cfg(test)]
    tests::DIR_FSYNCS.with(|n| n.set(n.get() + 1));
    let handle = File::open(dir).map_err(|e| call_error("open (to fsync the directory)", dir, e))?;
    handle.sync_all().map_err(|e| call_error("fsync (directory)", dir, e))
}

/// Writes `len` bytes from `body` straight to `path` (no temporary name): a new file is created
/// with O_EXCL, an existing one truncated and rewritten. With `fsync`, the file is fsynced, and
/// (with `fsync_dirs`) the directory too when the file is new (its entry must be durable as well).
pub fn write_file_in_place(path: &Path, body: &mut dyn Read, len: u64, mode: WriteMode) -> BResult<()> {
    let dir = path.parent().expect("object paths always have a parent");
    let create = || opener(mode).write(true).create_new(true).open(path);
    let open_error = |e| call_error("open", path, e);
    let (mut file, created) = match create() {
        Ok(f) => (f, true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (opener(mode).write(true).truncate(true).open(path).map_err(open_error)?, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create_dirs(dir, mode.fsync_dirs)?;
            (create().map_err(open_error)?, true)
        }
        Err(e) => return Err(open_error(e)),
    };
    fill(&mut file, path, body, len, mode)?;
    if mode.fsync {
        file.sync_all().map_err(|e| call_error("fsync", path, e))?;
        if created && mode.fsync_dirs {
            sync_dir(dir)?;
        }
    }
    Ok(())
}

/// Open options for writing in `mode` (O_DIRECT when asked).
fn opener(mode: WriteMode) -> OpenOptions {
    let mut options = OpenOptions::new();
    if mode.direct {
        super::direct::direct(&mut options);
    }
    options
}

/// Opens the file at `path` to read it, around the page cache when `mode.direct`.
pub fn open_to_read(path: &Path, mode: WriteMode) -> std::io::Result<File> {
    opener(mode).read(true).open(path)
}

/// Streams the `len` bytes of `file` (opened by `open_to_read` in `mode`, from `path`) into
/// `sink`; an error names the read and the file.
pub fn read_whole(file: &mut File, path: &Path, len: u64, sink: &mut dyn Write, mode: WriteMode) -> BResult<()> {
    let read = if mode.direct { super::direct::read_all(file, len, sink) } else { super::copy_exact(file, sink, len) };
    read.map_err(|e| BackendError::new(e.kind, format!("read of {} failed: {}", path.display(), e.message)))
}

/// Writes the object's bytes into the freshly opened `file` (at `path`); an error names the
/// write and the file. (Bodies are stowbench's own generated payloads: they do not fail.)
fn fill(file: &mut File, path: &Path, body: &mut dyn Read, len: u64, mode: WriteMode) -> BResult<()> {
    let written = if mode.direct { super::direct::write_all(file, body, len) } else { super::copy_exact(body, file, len) };
    written.map_err(|e| BackendError::new(e.kind, format!("write of {} failed: {}", path.display(), e.message)))
}

/// Creates `dir` and its missing parents. With `fsync`, also fsyncs the directory that gained each
/// new entry: an fsynced file is only durable if every directory on its path is, and the fan-out
/// directories are created lazily by the first put that needs them.
fn create_dirs(dir: &Path, fsync: bool) -> BResult<()> {
    let mut existing = dir.parent();
    while let Some(p) = existing.filter(|p| !p.exists()) {
        existing = p.parent();
    }
    mkdir_all(dir)?;
    if fsync {
        // From `dir`'s parent up to the first directory that existed before (`dir` itself is
        // fsynced after the rename).
        let mut gained_entry = dir.parent();
        while let Some(p) = gained_entry {
            sync_dir(p)?;
            if Some(p) == existing {
                break;
            }
            gained_entry = p.parent();
        }
    }
    Ok(())
}

/// Removes a backend's own data directory (inside its namespace) and everything in it; a
/// directory that is already gone is fine, so cleanup can run twice.
pub fn remove_dir_if_present(dir: &Path) -> BResult<()> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(call_error("stat", dir, e)),
        Ok(_) => super::namespace::remove_tree(dir).map_err(|e| BackendError::new(super::ErrorKind::Io, format!("cannot remove {}: {e}", dir.display()))),
    }
}

/// An I/O error that says which call failed on which path ("fsync of /x/y failed: ..."), of the
/// kind the error itself says (a full disk stays `no_space`).
pub fn call_error(call: &str, path: &Path, e: std::io::Error) -> BackendError {
    BackendError::new(super::io_kind(e.kind()), format!("{call} of {} failed: {e}", path.display()))
}

/// `fs::create_dir_all` whose error names the call: when mkdir says the directory exists but
/// it cannot be looked at, the failing stat is what went wrong, not the mkdir.
pub fn mkdir_all(dir: &Path) -> BResult<()> {
    fs::create_dir_all(dir).map_err(|e| match fs::metadata(dir) {
        Err(stat) if e.kind() == std::io::ErrorKind::AlreadyExists => call_error("stat", dir, stat),
        _ => call_error("mkdir", dir, e),
    })
}

/// Allocated bytes of everything under `paths`, directories included, as `du -s` counts them;
/// apparent bytes and the count of the regular files alone. Directories are the store's cost
/// too: fs's fan-out directories take a block each, which at a few thousand small objects is as
/// much space as the objects themselves.
pub fn disk_usage_of(paths: &[PathBuf]) -> BResult<DiskUsage> {
    use std::os::unix::fs::MetadataExt;
    let mut usage = DiskUsage::default();
    let mut stack: Vec<PathBuf> = paths.to_vec();
    while let Some(path) = stack.pop() {
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(call_error("stat", &path, e)),
        };
        if meta.is_dir() {
            usage.allocated_bytes += meta.blocks() * 512;
            let listing = |e| call_error("listing (open, readdir)", &path, e);
            for entry in fs::read_dir(&path).map_err(listing)? {
                stack.push(entry.map_err(listing)?.path());
            }
        } else if meta.is_file() {
            usage.allocated_bytes += meta.blocks() * 512;
            usage.apparent_bytes += meta.len();
            usage.files += 1;
        }
    }
    Ok(usage)
}

impl Backend for FsBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn describe(&self) -> BackendInfo {
        let mut options = self.options.redacted_json();
        if let Some(map) = options.as_object_mut() {
            map.insert("fsync".into(), self.fsync.into());
            map.insert("fsync_dir".into(), self.fsync_dir.into());
            map.insert("fanout_levels".into(), self.fanout_levels.into());
            map.insert("write_mode".into(), if self.in_place { "in-place" } else { "rename" }.into());
            map.insert("direct".into(), self.direct.into());
        }
        BackendInfo {
            backend: "fs".into(),
            versions: Default::default(),
            options,
            durability: match (self.fsync, self.in_place, self.direct) {
                (true, false, _) if !self.fsync_dir => "fsync of the file before rename, not of its directory (fsync_dir = false): whether the new name survives a crash is the filesystem's choice (ext4 and XFS commit it with the file; POSIX does not promise it)",
                (true, true, _) if !self.fsync_dir => "fsync of the file, not of its directory (fsync_dir = false): whether a new file's name survives a crash is the filesystem's choice (ext4 and XFS commit it with the file; POSIX does not promise it); written in place: a reader or a crash can see a partial object",
                (true, false, _) => "fsync of the file before rename and of its directory after",
                (true, true, _) => "fsync of the file, and of its directory when the file is new; written in place: a reader or a crash can see a partial object",
                (false, false, false) => "none: data reaches the page cache; the kernel writes it back later",
                (false, true, false) => "none: data reaches the page cache; written in place: a reader or a crash can see a partial object",
                (false, false, true) => "none: data goes to the device with O_DIRECT (its volatile cache may still hold it), file metadata reaches the page cache",
                (false, true, true) => "none: data goes to the device with O_DIRECT (its volatile cache may still hold it); written in place: a reader or a crash can see a partial object",
            }
            .into(),
            data_paths: vec![self.root.clone()],
        }
    }

    fn prepare(&self) -> BResult<()> {
        mkdir_all(&self.root)?;
        Ok(())
    }

    fn open_session(&self, worker: usize) -> BResult<Box<dyn Session>> {
        let mode = WriteMode { fsync: self.fsync, fsync_dirs: self.fsync && self.fsync_dir, direct: self.direct };
        Ok(Box::new(FsSession { root: self.root.clone(), mode, levels: self.fanout_levels, in_place: self.in_place, worker }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        disk_usage_of(std::slice::from_ref(&self.root))
    }

    fn cleanup(&self) -> BResult<()> {
        remove_dir_if_present(&self.root)?;
        self.data.release()
    }
}

struct FsSession {
    root: PathBuf,
    mode: WriteMode,
    levels: u32,
    in_place: bool,
    worker: usize,
}

impl FsSession {
    fn path(&self, key: &str) -> PathBuf {
        fanout_path(&self.root, key, self.levels)
    }
}

impl Session for FsSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        if self.in_place {
            write_file_in_place(&self.path(key), body, len, self.mode)
        } else {
            write_file_atomically(&self.path(key), body, len, self.mode, self.worker)
        }
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let path = self.path(key);
        let mut file = open_to_read(&path, self.mode).map_err(|e| not_found_or(e, key, "open", &path))?;
        let len = file.metadata().map_err(|e| call_error("fstat", &path, e))?.len();
        read_whole(&mut file, &path, len, sink, self.mode)?;
        Ok(len)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let path = self.path(key);
        fs::remove_file(&path).map_err(|e| not_found_or(e, key, "unlink", &path))?;
        if self.mode.fsync_dirs {
            // The removal is durable only once the directory that lost the entry is.
            sync_dir(path.parent().expect("object paths always have a parent"))?;
        }
        Ok(())
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        let path = self.path(key);
        Ok(fs::metadata(&path).map_err(|e| not_found_or(e, key, "stat", &path))?.len())
    }
}

/// `NotFound` for a missing key; any other error names `call` and `path`.
fn not_found_or(e: std::io::Error, key: &str, call: &str, path: &Path) -> BackendError {
    if e.kind() == std::io::ErrorKind::NotFound {
        BackendError::not_found(key)
    } else {
        call_error(call, path, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Directory fsyncs made by this thread (each test runs on its own).
        pub static DIR_FSYNCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Allocated bytes are `du -s`'s: directories' blocks count with the files'; apparent bytes
    /// and the file count are the files' alone.
    #[test]
    fn disk_usage_counts_directories_blocks_as_du_does() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("objects");
        std::fs::create_dir_all(root.join("ab/cd")).unwrap();
        std::fs::write(root.join("ab/cd/x"), vec![7u8; 5000]).unwrap();
        let blocks = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
        let usage = disk_usage_of(std::slice::from_ref(&root)).unwrap();
        let dirs = blocks(&root) + blocks(&root.join("ab")) + blocks(&root.join("ab/cd"));
        // (On tmpfs directories take no blocks, and the sum below holds either way.)
        assert_eq!(usage.allocated_bytes, dirs + blocks(&root.join("ab/cd/x")));
        assert_eq!((usage.apparent_bytes, usage.files), (5000, 1));
    }

    /// Directory fsyncs that `put`, then `delete`, of one object in a fresh fs target made.
    fn dir_fsyncs_of_put_and_delete(options: &str) -> (usize, usize) {
        let tmp = tempfile::tempdir().unwrap();
        let ns = Namespace::create(tmp.path(), "fs-test", "fs").unwrap();
        let options = Options::new("fs", "test", toml::from_str(options).unwrap());
        let target = construct(&options, &ns).unwrap();
        target.prepare().unwrap();
        let mut session = target.open_session(0).unwrap();
        let before = DIR_FSYNCS.with(|n| n.get());
        session.put("k", &mut &[7u8; 100][..], 100).unwrap();
        let after_put = DIR_FSYNCS.with(|n| n.get());
        session.delete("k").unwrap();
        (after_put - before, DIR_FSYNCS.with(|n| n.get()) - after_put)
    }

    /// A durable put fsyncs the directories that gained entries (two new fan-out levels, then the
    /// rename's) and a delete the one that lost it; `fsync_dir = false` fsyncs no directory.
    #[test]
    fn fsync_dir_decides_whether_directories_are_fsynced() {
        assert_eq!(dir_fsyncs_of_put_and_delete("fsync = true"), (3, 1));
        assert_eq!(dir_fsyncs_of_put_and_delete("fsync = true\nwrite_mode = \"in-place\"\nfanout_levels = 0"), (1, 1));
        assert_eq!(dir_fsyncs_of_put_and_delete("fsync = true\nfsync_dir = false"), (0, 0));
        assert_eq!(dir_fsyncs_of_put_and_delete("fsync = true\nfsync_dir = false\nwrite_mode = \"in-place\""), (0, 0));
        assert_eq!(dir_fsyncs_of_put_and_delete(""), (0, 0));
    }

    #[test]
    fn fsync_dir_without_fsync_is_refused_with_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let ns = Namespace::create(tmp.path(), "fs-test", "fs").unwrap();
        let options = Options::new("fs", "test", toml::from_str("fsync_dir = false").unwrap());
        let e = construct(&options, &ns).err().expect("refused");
        assert!(e.contains("fsync_dir") && e.contains("fsync = true"), "{e}");
    }

    #[test]
    fn keys_cannot_escape_their_directory() {
        let root = Path::new("/ns/objects");
        for key in ["../../etc/passwd", "/abs", ".", "..", "", "a/b"] {
            let p = fanout_path(root, key, 2);
            assert!(p.starts_with(root) && p.components().count() == root.components().count() + 3, "{key} -> {p:?}");
        }
    }
}
