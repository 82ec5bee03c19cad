//! The global record of what the fio module created (namespaces, loop devices, mounts) and of
//! running fio processes, so an interrupt can stop fio and undo everything in order.
//!
//! Undo is guarded: a mount is unmounted only if the kernel still shows our source at our mount
//! point, a loop device is detached only if its backing file is our image, and a namespace
//! directory is removed only when it carries the marker and nothing is mounted below it. Each
//! namespace also holds a `target.json` state file so a later `cleanup_leftovers` can finish the
//! job after a crash or `kill -9`. This module must never remove anything it did not record.

use super::error::FioError;
use super::sys;
use crate::backend::namespace;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Name of the state file written in each target namespace.
pub const STATE_FILE: &str = "target.json";

/// Things one prepared target created, in creation order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owned {
    /// Registry id (0 for records read back from a state file).
    #[serde(skip)]
    pub id: u64,
    /// The marked namespace directory holding everything else.
    pub ns_dir: PathBuf,
    /// The sparse image file behind the loop device.
    pub image: Option<PathBuf>,
    /// The loop device we attached, e.g. /dev/loop3.
    pub loop_dev: Option<PathBuf>,
    /// Where we mounted the filesystem.
    pub mount_point: Option<PathBuf>,
    /// The mount source the kernel shows for our mount (the loop device, or our tmpfs name).
    pub mount_source: Option<String>,
    /// Whether the namespace directory is removed on cleanup (false when the user asked to keep data).
    pub remove_ns: bool,
}

#[derive(Default)]
struct State {
    next_id: u64,
    targets: Vec<Owned>,
    fio_pids: Vec<i32>,
}

static STATE: Mutex<State> = Mutex::new(State { next_id: 1, targets: Vec::new(), fio_pids: Vec::new() });
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Held during each privileged preparation step, so an interrupt waits for the step to finish
/// instead of undoing a half-made target under its feet.
static STEP_LOCK: Mutex<()> = Mutex::new(());

fn state() -> MutexGuard<'static, State> {
    // A panic elsewhere must not stop cleanup: take the data even if the lock was poisoned.
    STATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `step` while no cleanup can run, unless an interrupt already started one.
pub fn guarded<R>(step: impl FnOnce() -> Result<R, FioError>) -> Result<R, FioError> {
    let _guard = STEP_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if interrupted() {
        return Err(FioError::Interrupted { case_id: "(preparing a target)".into() });
    }
    step()
}

/// Records a new target namespace and returns its registry id.
pub fn register(owned: Owned) -> u64 {
    let mut state = state();
    let id = state.next_id;
    state.next_id += 1;
    state.targets.push(Owned { id, ..owned });
    id
}

/// Changes the record `id` (after each creation step) and rewrites its state file.
pub fn update(id: u64, change: impl FnOnce(&mut Owned)) {
    let mut state = state();
    if let Some(owned) = state.targets.iter_mut().find(|o| o.id == id) {
        change(owned);
        // Best effort: the in-memory record is what an interrupt uses; the file helps after a crash.
        if let Ok(text) = serde_json::to_string_pretty(owned) {
            let _ = std::fs::write(owned.ns_dir.join(STATE_FILE), text);
        }
    }
}

/// Removes and returns the record `id` (None if an interrupt already cleaned it up).
pub fn take(id: u64) -> Option<Owned> {
    let mut state = state();
    let index = state.targets.iter().position(|o| o.id == id)?;
    Some(state.targets.remove(index))
}

/// Returns once an interrupt's `cleanup_all_registered` that has taken the targets is done with
/// them (it holds the step lock from taking them to the end).
pub fn wait_for_interrupt_cleanup() {
    drop(STEP_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
}

/// Records a running fio process so an interrupt can stop it.
pub fn add_fio_pid(pid: i32) {
    state().fio_pids.push(pid);
}

/// Forgets a fio process that has exited.
pub fn remove_fio_pid(pid: i32) {
    state().fio_pids.retain(|p| *p != pid);
}

/// Whether `cleanup_all_registered` has run (the run is being interrupted).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Clears the interrupt flag (for a new run in the same process, e.g. in tests).
pub fn reset_interrupted() {
    INTERRUPTED.store(false, Ordering::SeqCst);
}

/// Stops running fio processes and undoes every registered target. Meant to be called from the
/// core's Ctrl-C handler thread (not from inside an async signal handler); safe to call twice.
pub fn cleanup_all_registered() -> Result<(), FioError> {
    INTERRUPTED.store(true, Ordering::SeqCst);
    stop_fio_processes();
    let _guard = STEP_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let owned: Vec<Owned> = std::mem::take(&mut state().targets);
    let problems: Vec<String> = owned.iter().rev().filter_map(|o| cleanup_owned(o).err()).map(|e| e.to_string()).collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(FioError::Cleanup { message: problems.join("; ") })
    }
}

/// Asks fio to stop (SIGINT makes it write its results and exit), then kills what is left.
fn stop_fio_processes() {
    let pids = state().fio_pids.clone();
    for pid in &pids {
        // SAFETY: kill with a pid we started; at worst it fails with ESRCH.
        unsafe { libc::kill(*pid, libc::SIGINT) };
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !state().fio_pids.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in state().fio_pids.clone() {
        // SAFETY: as above; the run loop reaps the child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while !state().fio_pids.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Undoes one record: unmount, detach, remove the image and the namespace, each only if ours.
pub fn cleanup_owned(owned: &Owned) -> Result<(), FioError> {
    let mut problems = Vec::new();
    if let (Some(mount_point), Some(source)) = (&owned.mount_point, &owned.mount_source) {
        if let Err(e) = unmount_if_ours(mount_point, source) {
            problems.push(e.to_string());
        }
    }
    if let (Some(dev), Some(image)) = (&owned.loop_dev, &owned.image) {
        if let Err(e) = detach_if_ours(dev, image) {
            problems.push(e.to_string());
        }
    }
    if problems.is_empty() && owned.remove_ns {
        if let Err(e) = remove_namespace(&owned.ns_dir) {
            problems.push(e.to_string());
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(FioError::Cleanup { message: format!("{}. To finish by hand: {}", problems.join("; "), manual_steps(owned)) })
}

fn manual_steps(owned: &Owned) -> String {
    let mut steps = Vec::new();
    if let Some(m) = &owned.mount_point {
        steps.push(format!("umount {}", m.display()));
    }
    if let Some(d) = &owned.loop_dev {
        steps.push(format!("losetup -d {}", d.display()));
    }
    steps.push(format!("rm -r {}", owned.ns_dir.display()));
    steps.join(" && ")
}

fn unmount_if_ours(mount_point: &Path, source: &str) -> Result<(), FioError> {
    for attempt in 0..20 {
        match crate::host::mount_at(mount_point) {
            Some(entry) if entry.source == source => {}
            // Not mounted (or someone else's mount now sits there): nothing of ours to undo.
            _ => return Ok(()),
        }
        let mount_str = mount_point.display().to_string();
        match sys::run_tool("umount", &[&mount_str]) {
            Ok(_) => return Ok(()),
            Err(e) if attempt == 19 => return Err(e),
            // Busy right after fio exits (the kernel is still closing files): wait and retry.
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
    Ok(())
}

fn detach_if_ours(dev: &Path, image: &Path) -> Result<(), FioError> {
    let Some(name) = dev.file_name().and_then(|n| n.to_str()) else { return Ok(()) };
    let Some(backing) = crate::host::sysfs(format!("/sys/class/block/{name}/loop/backing_file")) else { return Ok(()) };
    let ours = image.canonicalize().map(|p| p.display().to_string()).unwrap_or_else(|_| image.display().to_string());
    // The kernel appends " (deleted)" when the image was removed while attached.
    if backing.trim_end_matches(" (deleted)") != ours {
        return Ok(());
    }
    let dev_str = dev.display().to_string();
    sys::run_tool("losetup", &["-d", &dev_str]).map(|_| ())
}

fn remove_namespace(ns_dir: &Path) -> Result<(), FioError> {
    let canonical = ns_dir.canonicalize().unwrap_or_else(|_| ns_dir.to_path_buf());
    if let Some(entry) = crate::host::mounts().into_iter().find(|m| m.mount_point.starts_with(&canonical)) {
        return Err(FioError::Cleanup {
            message: format!("{} is still mounted inside {}; not removing the directory", entry.mount_point.display(), ns_dir.display()),
        });
    }
    namespace::remove(ns_dir).map_err(|message| FioError::Cleanup { message })
}

/// Finishes the cleanup of fio target namespaces left in `dir` by a crashed or killed run:
/// every `stowbench-fio-*` subdirectory with our marker and a state file. Returns what was cleaned.
pub fn cleanup_leftovers(dir: &Path) -> Result<Vec<PathBuf>, FioError> {
    let mut cleaned = Vec::new();
    for owned in leftovers(dir)? {
        cleanup_owned(&Owned { remove_ns: true, ..owned.clone() })?;
        cleaned.push(owned.ns_dir);
    }
    Ok(cleaned)
}

/// The fio targets in `dir` that a killed run left behind (not one of this process's live ones,
/// nor one another stowbench process still holds: its run is using it), each as its state file
/// recorded it — what `cleanup_leftovers` would undo.
pub fn leftovers(dir: &Path) -> Result<Vec<Owned>, FioError> {
    let live: Vec<PathBuf> = state().targets.iter().map(|o| o.ns_dir.clone()).collect();
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(FioError::io(dir, e)),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_candidate = entry.file_name().to_string_lossy().starts_with("stowbench-fio-")
            && namespace::is_owned(&path)
            && !live.contains(&path)
            && !namespace::in_use(&path);
        if !is_candidate {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path.join(STATE_FILE)) else { continue };
        let owned: Owned = serde_json::from_str(&text).map_err(|e| FioError::io(&path.join(STATE_FILE), e))?;
        // The record must describe this very directory, or it is not trusted.
        if owned.ns_dir.canonicalize().ok() != path.canonicalize().ok() {
            continue;
        }
        found.push(Owned { ns_dir: path, ..owned });
    }
    Ok(found)
}
