//! Namespaces: the only places a run writes, each proven to be ours by a marker file.
//!
//! A namespace directory carries `.stowbench-namespace`. It is created only if the directory is
//! new or empty; a non-empty directory without the marker is refused, and removal refuses any
//! directory that does not carry the marker. This module must never delete anything else.
//!
//! A directory a server depends on (a PostgreSQL tablespace's location) pins every marked
//! directory above it, and removal refuses a pinned directory: deleting a tablespace's files under
//! a running server makes every later checkpoint of that server fail.

use std::fs;
use std::path::{Path, PathBuf};

/// The marker file name that proves a directory was created by stowbench.
pub const MARKER_FILE: &str = ".stowbench-namespace";

/// Prefix of the pin files (`.stowbench-pin-<name>`), each holding why the directory is pinned.
pub const PIN_PREFIX: &str = ".stowbench-pin-";

/// A directory (and a name for server-side objects) owned by one run.
#[derive(Debug, Clone)]
pub struct Namespace {
    /// Identifier of the run that owns it.
    pub run_id: String,
    /// The directory; it exists and carries the marker.
    pub dir: PathBuf,
    /// A short name safe for table prefixes, bucket prefixes and GridFS bucket names: [a-z0-9_].
    pub name: String,
    /// A shared lock on the marker, held while any copy of this value lives, so that `stowbench
    /// cleanup` in another process can tell a directory a run is still writing (`in_use`).
    _held: Option<std::sync::Arc<fs::File>>,
}

/// Makes a name safe for SQL identifiers and object prefixes: lowercase [a-z0-9_], at most 48 chars.
pub fn safe_name(text: &str) -> String {
    let mut out: String = text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    out.truncate(48);
    out
}

impl Namespace {
    /// Creates (or re-opens, if it already carries our marker) the namespace directory `dir`.
    pub fn create(dir: &Path, run_id: &str, name: &str) -> Result<Namespace, String> {
        if dir.exists() {
            if !dir.is_dir() {
                return Err(format!("{} exists and is not a directory; choose another path", dir.display()));
            }
            if !is_owned(dir) {
                let mut entries = fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
                if entries.next().is_some() {
                    return Err(format!(
                        "{} is not empty and was not created by stowbench (no {MARKER_FILE} marker); \
                         refusing to write there. Choose an empty or new directory.",
                        dir.display()
                    ));
                }
                write_marker(dir, run_id)?;
            }
        } else {
            fs::create_dir_all(dir).map_err(|e| format!("cannot create {} (mkdir failed): {e}", dir.display()))?;
            if let Err(e) = write_marker(dir, run_id) {
                // The directory is new and holds at most a partial marker: take it back, so a
                // failed start leaves nothing (an unmarked directory `cleanup` would refuse).
                let _ = fs::remove_file(dir.join(MARKER_FILE));
                return Err(match fs::remove_dir(dir) {
                    Ok(()) => e,
                    Err(again) => format!("{e}; removing the new directory again failed too: {again}"),
                });
            }
        }
        let held = hold(dir).map(std::sync::Arc::new);
        Ok(Namespace { run_id: run_id.to_string(), dir: dir.to_path_buf(), name: safe_name(name), _held: held })
    }

    /// A namespace value for a directory this process did not make and does not hold: a server
    /// record's, read back by `cleanup`, or a probe's scratch.
    pub fn unheld(run_id: &str, dir: &Path, name: &str) -> Namespace {
        Namespace { run_id: run_id.to_string(), dir: dir.to_path_buf(), name: name.to_string(), _held: None }
    }

    /// A child namespace inside this one (its own directory and marker).
    pub fn child(&self, sub: &str) -> Result<Namespace, String> {
        let name = safe_name(&format!("{}_{}", self.name, sub));
        Namespace::create(&self.dir.join(sub), &self.run_id, &name).map(|mut ns| {
            ns.name = name;
            ns
        })
    }
}

fn write_marker(dir: &Path, run_id: &str) -> Result<(), String> {
    use std::io::Write;
    let text = format!("{{\"tool\":\"stowbench\",\"run_id\":\"{run_id}\"}}\n");
    let path = dir.join(MARKER_FILE);
    let mut file = fs::File::create(&path).map_err(|e| format!("cannot create marker {} (open failed): {e}", path.display()))?;
    file.write_all(text.as_bytes()).map_err(|e| format!("cannot write marker {} (write failed): {e}", path.display()))
}

/// Takes a shared lock on `dir`'s marker (several ranks of one multi-host run share a
/// namespace). None when the marker cannot be opened or the filesystem does not lock: the run
/// goes on, and `in_use` then cannot see it.
fn hold(dir: &Path) -> Option<fs::File> {
    use std::os::fd::AsRawFd;
    let marker = fs::File::open(dir.join(MARKER_FILE)).ok()?;
    // SAFETY: flock on a descriptor we own; the lock goes with the descriptor.
    (unsafe { libc::flock(marker.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0).then_some(marker)
}

/// Whether a stowbench process is still using `dir` or a marked directory above it: one holds
/// the lock on its marker (`Namespace::create` takes it; exiting, even by `kill -9`, drops it).
pub fn in_use(dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    dir.ancestors().filter(|d| is_owned(d)).any(|d| {
        let Ok(marker) = fs::File::open(d.join(MARKER_FILE)) else { return false };
        // SAFETY: flock on a descriptor we own; closing it releases the probe's lock at once.
        let free = unsafe { libc::flock(marker.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        !free && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
    })
}

/// Whether `dir` carries the stowbench marker: a regular file holding what `write_marker` writes.
/// A file of that name alone is no proof: anyone can make one, and it is what lets stowbench
/// delete a directory.
pub fn is_owned(dir: &Path) -> bool {
    marker_is_ours(&dir.join(MARKER_FILE))
}

/// Whether `marker` is a regular file (not a link, not a FIFO that would block the open) holding
/// `{"tool":"stowbench","run_id":"…"}`. One that cannot be opened or read (an I/O error) is judged
/// by its presence alone, as before its content was checked: a failing disk must not strand a
/// run's own directory, and a forged marker is one that reads and says otherwise.
fn marker_is_ours(marker: &Path) -> bool {
    use std::io::Read;
    if !fs::symlink_metadata(marker).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut bytes = Vec::new();
    match fs::File::open(marker).and_then(|file| file.take(4096).read_to_end(&mut bytes)) {
        Err(_) => true,
        Ok(_) => serde_json::from_slice::<serde_json::Value>(&bytes)
            .is_ok_and(|v| v.get("tool").and_then(|t| t.as_str()) == Some("stowbench") && v.get("run_id").is_some_and(|r| r.is_string())),
    }
}

/// Pins `inner` and every marked directory above it with pin `name`, saying `why` (what depends
/// on it and how to release it).
pub fn pin(inner: &Path, name: &str, why: &str) -> Result<(), String> {
    for dir in inner.ancestors().filter(|d| is_owned(d)) {
        let file = dir.join(format!("{PIN_PREFIX}{name}"));
        fs::write(&file, format!("{why}\n")).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    Ok(())
}

/// Removes pin `name` from `inner` and every marked directory above it (missing pins are fine).
pub fn unpin(inner: &Path, name: &str) -> Result<(), String> {
    for dir in inner.ancestors().filter(|d| is_owned(d)) {
        let file = dir.join(format!("{PIN_PREFIX}{name}"));
        match fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(format!("cannot remove {}: {e}", file.display())),
            _ => {}
        }
    }
    Ok(())
}

/// Refuses to delete from `dir` while it is pinned, quoting the first pin's reason.
fn refuse_if_pinned(dir: &Path) -> Result<(), String> {
    let Ok(entries) = fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(PIN_PREFIX) {
            let why = fs::read_to_string(entry.path()).unwrap_or_default();
            return Err(format!("refusing to delete from {}: still in use ({}): {}", dir.display(), entry.path().display(), why.trim()));
        }
    }
    Ok(())
}

/// Removes `dir` and everything in it, but only if it carries the marker and no pin. A directory
/// that is already gone is fine; one whose marker cannot be looked at (an I/O error, not a
/// missing marker) is kept, with that error.
pub fn remove(dir: &Path) -> Result<(), String> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot remove {}: stat failed: {e}", dir.display())),
        // Removing through a link would empty a directory outside the one named.
        Ok(m) if m.file_type().is_symlink() => {
            let to = fs::read_link(dir).map(|t| format!(" to {}", t.display())).unwrap_or_default();
            return Err(format!("refusing to remove {}: it is a symbolic link{to}, and stowbench never deletes through a link", dir.display()));
        }
        Ok(_) => {}
    }
    let marker = dir.join(MARKER_FILE);
    match fs::metadata(&marker) {
        Ok(m) if m.is_file() => {}
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("cannot remove {}: stat of its marker {} failed: {e}", dir.display(), marker.display()))
        }
        _ => return Err(format!("refusing to remove {}: it has no {MARKER_FILE} marker, so stowbench did not create it", dir.display())),
    }
    if !marker_is_ours(&marker) {
        return Err(format!(
            "refusing to remove {}: its {MARKER_FILE} is not one stowbench wrote (it holds no {{\"tool\":\"stowbench\",\"run_id\":…}}), \
             so stowbench cannot tell it made the directory; remove it by hand if it is yours to remove",
            dir.display()
        ));
    }
    refuse_if_pinned(dir)?;
    refuse_if_mounted_inside(dir)?;
    let failed = |e: String| format!("cannot remove {}: {e}", dir.display());
    // Everything but the marker first: until the directory is empty, the marker stays, so a
    // removal that fails half-way leaves a directory `stowbench cleanup` still recognises.
    for entry in fs::read_dir(dir).map_err(|e| failed(format!("listing (open) failed: {e}")))? {
        let entry = entry.map_err(|e| failed(format!("listing (readdir) failed: {e}")))?;
        if entry.file_name() == MARKER_FILE {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().map_err(|e| failed(format!("stat of {} failed: {e}", path.display())))?.is_dir();
        if is_dir {
            remove_tree_below(&path).map_err(failed)?;
        } else {
            fs::remove_file(&path).map_err(|e| failed(format!("unlink of {} failed: {e}", path.display())))?;
        }
    }
    let marker_text = fs::read(&marker).unwrap_or_default();
    fs::remove_file(&marker).map_err(|e| failed(format!("unlink of {} failed: {e}", marker.display())))?;
    if let Err(e) = fs::remove_dir(dir) {
        // Put the marker back, so the empty directory can still be proven ours and removed.
        let restored = match fs::write(&marker, &marker_text) {
            Ok(()) => String::new(),
            Err(again) => format!("; putting its marker back failed too ({again}): remove the empty directory by hand"),
        };
        return Err(failed(format!("rmdir failed: {e}{restored}")));
    }
    Ok(())
}

/// Refuses to delete from `dir` while a filesystem is mounted at it or anywhere below it: the
/// removal would delete the mounted filesystem's files (someone's bind mount, or a made
/// filesystem still in use) and then fail on its mount point anyway.
fn refuse_if_mounted_inside(dir: &Path) -> Result<(), String> {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    match crate::host::mounts().into_iter().find(|m| m.mount_point.starts_with(&canonical)) {
        Some(m) => Err(format!(
            "refusing to remove {}: {} is mounted at {}, inside it, and stowbench never deletes across a mount. If stowbench \
             made it, `stowbench cleanup` on the run's directory unmounts it; otherwise unmount it first (umount {})",
            dir.display(),
            m.source,
            m.mount_point.display(),
            m.mount_point.display()
        )),
        None => Ok(()),
    }
}

/// Removes `dir` and everything under it (symbolic links are removed, never followed), unless a
/// filesystem is mounted inside it; the error names the call that failed and on what, which
/// `fs::remove_dir_all` does not.
pub fn remove_tree(dir: &Path) -> Result<(), String> {
    refuse_if_mounted_inside(dir)?;
    remove_tree_below(dir)
}

/// `remove_tree` once the mount table has been checked for the whole tree.
fn remove_tree_below(dir: &Path) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("listing {} (open) failed: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("listing {} (readdir) failed: {e}", dir.display()))?;
        let path = entry.path();
        let is_dir = entry.file_type().map_err(|e| format!("stat of {} failed: {e}", path.display()))?.is_dir();
        if is_dir {
            remove_tree_below(&path)?;
        } else {
            fs::remove_file(&path).map_err(|e| format!("unlink of {} failed: {e}", path.display()))?;
        }
    }
    fs::remove_dir(dir).map_err(|e| format!("rmdir of {} failed: {e}", dir.display()))
}

/// Removes everything inside `dir` except the marker (a backend's cleanup), if the marker is there.
pub fn empty(dir: &Path) -> Result<(), String> {
    if !is_owned(dir) {
        return Err(format!("refusing to empty {}: no {MARKER_FILE} marker", dir.display()));
    }
    refuse_if_pinned(dir)?;
    refuse_if_mounted_inside(dir)?;
    for entry in fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        if entry.file_name() == MARKER_FILE {
            continue;
        }
        let path = entry.path();
        match entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            true => remove_tree_below(&path)?,
            false => fs::remove_file(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?,
        }
    }
    Ok(())
}

crate::backend_options! {
    /// The `path` option every backend that writes files takes (see `DataNamespace`).
    pub struct DataPath {
        path: Option<String>, "<run directory>" => "existing directory under which the run's namespace directory (stowbench-<run id>-<case>, removed by cleanup) is created; a relative path is taken from the current directory",
    }
}

/// Where a backend that writes files writes (every one of them: fs, sqlite, sqlite-file, pack,
/// cfb, zip, postgres and mariadb in file mode): the run's own namespace, or with a `path` option
/// a marked `stowbench-<run id>-<name>` directory under that path — unique per run, so two runs
/// sharing a path never share (or remove) each other's data. Such a backend lists
/// `DataPath::DOCS` among its options.
pub(crate) struct DataNamespace {
    /// The namespace to write into.
    pub ns: Namespace,
    /// The directory the `path` option made, removed by `release` once the data is gone.
    made_for_path: Option<PathBuf>,
}

impl DataNamespace {
    /// Resolves the `path` option.
    pub fn new(options: &super::options::Options, ns: &Namespace) -> Result<DataNamespace, String> {
        match DataPath::read(options)?.path {
            Some(path) if path.is_empty() => {
                Err(options.bad("path", "is empty: give an existing directory, or leave path out to write inside the run's own directory"))
            }
            Some(path) => {
                // A relative path is taken from the current directory, as fio's `directory`; made
                // absolute here so that the report says where the data lived.
                let absolute = std::path::absolute(&path).unwrap_or_else(|_| PathBuf::from(&path));
                let from_cwd = match Path::new(&path).is_relative() {
                    true => format!(" (taken from the current directory: {})", absolute.display()),
                    false => String::new(),
                };
                // The path must exist: made here, it would outlive the run (removal takes only
                // the marked directory inside it), so a mistyped path left new directories behind.
                if !absolute.is_dir() {
                    return Err(options.bad(
                        "path",
                        format!(
                            "{path:?}{from_cwd} is not an existing directory. Create it first, or fix the path: stowbench makes only its own \
                             marked directory inside it and removes only that"
                        ),
                    ));
                }
                let dir = absolute.join(format!("stowbench-{}-{}", ns.run_id, ns.name));
                let made = Namespace::create(&dir, &ns.run_id, &ns.name).map_err(|e| {
                    options.bad("path", format!("{e}. Give a directory stowbench may create its own directory in (not /proc or /sys, not read-only)"))
                })?;
                lock_made_for_paths().push(dir.clone());
                Ok(DataNamespace { ns: made, made_for_path: Some(dir) })
            }
            None => Ok(DataNamespace { ns: ns.clone(), made_for_path: None }),
        }
    }

    /// Removes the directory the `path` option made (only if it still carries our marker); the
    /// run's own namespace is left to the runner.
    pub fn release(&self) -> super::BResult<()> {
        match &self.made_for_path {
            Some(dir) => {
                remove(dir).map_err(|e| super::BackendError::new(super::ErrorKind::Io, e))?;
                lock_made_for_paths().retain(|made| made != dir);
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// The directories `path` options made that are not removed yet: outside the run directory, so a
/// process that exits at once (a second Ctrl-C) must name them beside it.
static MADE_FOR_PATHS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn lock_made_for_paths() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    MADE_FOR_PATHS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The directories `path` options made that still exist, for the message of a hard exit; None
/// when the list is being changed at that instant (the caller must not wait: it is exiting).
pub fn made_for_paths_now() -> Option<Vec<PathBuf>> {
    let made = MADE_FOR_PATHS.try_lock().ok()?;
    Some(made.iter().filter(|d| d.exists()).cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that cannot hold the run's directory is refused at the `path` option, with what to
    /// give instead (it was refused at the target, with mkdir's words alone).
    #[test]
    fn an_unusable_path_is_refused_at_its_option() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Namespace::create(&tmp.path().join("stowbench-r8"), "r8", "r8").unwrap();
        for (path, says) in [("", "is empty"), ("/proc", "not /proc or /sys")] {
            let options = super::super::options::Options::new("fs", "test", toml::from_str(&format!("path = {path:?}")).unwrap());
            let refused = DataNamespace::new(&options, &run).err().unwrap_or_else(|| panic!("{path:?} was taken"));
            assert!(refused.contains("option \"path\"") && refused.contains(says), "{refused}");
        }
    }

    /// A hard exit (a second Ctrl-C) names the directories `path` made: cleaning the run
    /// directory does not reach them.
    #[test]
    fn a_directory_made_for_a_path_is_listed_until_released() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Namespace::create(&tmp.path().join("stowbench-r9"), "r9", "r9").unwrap();
        let user = tmp.path().join("user");
        fs::create_dir(&user).unwrap();
        let toml = format!("path = {:?}", user.display().to_string());
        let options = super::super::options::Options::new("fs", "test", toml::from_str(&toml).unwrap());
        let data = DataNamespace::new(&options, &run.child("case").unwrap()).unwrap();
        let made = data.made_for_path.clone().unwrap();
        assert!(made.starts_with(&user) && made.is_dir());
        assert!(made_for_paths_now().unwrap().contains(&made));
        data.release().unwrap();
        assert!(!made.exists() && !made_for_paths_now().unwrap().contains(&made));
    }

    /// A marker stowbench did not write (any file of that name, a link to one) proves nothing:
    /// such a directory is not owned, and neither removed nor emptied.
    #[test]
    fn a_marker_stowbench_did_not_write_owns_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        drop(Namespace::create(&real, "r7", "x").unwrap());
        assert!(is_owned(&real));
        for (name, marker) in [("empty", ""), ("forged", "user"), ("other-tool", "{\"tool\":\"other\",\"run_id\":\"r\"}")] {
            let forged = tmp.path().join(name);
            fs::create_dir(&forged).unwrap();
            fs::write(forged.join(MARKER_FILE), marker).unwrap();
            fs::write(forged.join("data"), "theirs").unwrap();
            assert!(!is_owned(&forged), "{name}");
            assert!(remove(&forged).unwrap_err().contains("not one stowbench wrote"), "{name}");
            assert!(empty(&forged).is_err() && forged.join("data").exists(), "{name}");
        }
        let linked = tmp.path().join("linked");
        fs::create_dir(&linked).unwrap();
        std::os::unix::fs::symlink(real.join(MARKER_FILE), linked.join(MARKER_FILE)).unwrap();
        assert!(!is_owned(&linked), "a link to a real marker is not a marker");
    }

    #[test]
    fn refuses_foreign_non_empty_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let foreign = tmp.path().join("foreign");
        fs::create_dir(&foreign).unwrap();
        fs::write(foreign.join("precious.txt"), "keep me").unwrap();
        assert!(Namespace::create(&foreign, "r1", "x").unwrap_err().contains("not empty"));
        assert!(remove(&foreign).unwrap_err().contains("refusing"));
        assert!(foreign.join("precious.txt").exists());
    }

    /// A mistyped `path` once had its missing directories made, and left behind after the run.
    #[test]
    fn a_path_option_that_does_not_exist_is_refused_and_nothing_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Namespace::create(&tmp.path().join("run"), "r1", "case").unwrap();
        let missing = tmp.path().join("typo/data");
        let table: toml::Table = toml::from_str(&format!("path = {:?}", missing.display().to_string())).unwrap();
        let err = DataNamespace::new(&super::super::options::Options::new("t", "", table), &run).err().expect("refused");
        assert!(err.starts_with("target \"t\": option \"path\": ") && err.contains("typo/data\" is not an existing directory"), "{err}");
        assert!(!tmp.path().join("typo").exists(), "nothing was made");

        fs::create_dir_all(&missing).unwrap();
        let table: toml::Table = toml::from_str(&format!("path = {:?}", missing.display().to_string())).unwrap();
        let data = DataNamespace::new(&super::super::options::Options::new("t", "", table), &run).unwrap();
        assert!(data.ns.dir.starts_with(&missing) && is_owned(&data.ns.dir));
        data.release().unwrap();
        assert_eq!(fs::read_dir(&missing).unwrap().count(), 0, "only the marked directory inside was removed");
    }

    #[test]
    fn creates_reopens_and_removes_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ns");
        let ns = Namespace::create(&dir, "r1", "My Target-1").unwrap();
        assert_eq!(ns.name, "my_target_1");
        fs::write(dir.join("data"), "x").unwrap();
        Namespace::create(&dir, "r1", "again").unwrap();
        empty(&dir).unwrap();
        assert!(is_owned(&dir) && !dir.join("data").exists());
        remove(&dir).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn a_pin_keeps_every_marked_directory_above_it() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Namespace::create(&tmp.path().join("run"), "r1", "run").unwrap();
        let case = run.child("case").unwrap();
        let inner = case.dir.join("tablespaces");
        fs::create_dir(&inner).unwrap();
        pin(&inner, "ts0", "tablespace ts0 lives here; DROP TABLESPACE ts0 first").unwrap();
        for dir in [&run.dir, &case.dir] {
            let err = remove(dir).unwrap_err();
            assert!(err.contains("DROP TABLESPACE ts0"), "{err}");
        }
        assert!(empty(&case.dir).unwrap_err().contains("still in use"));
        assert!(inner.exists());
        unpin(&inner, "ts0").unwrap();
        unpin(&inner, "ts0").expect("unpinning twice is harmless");
        remove(&run.dir).unwrap();
        assert!(!run.dir.exists());
    }
}
