//! Preparing where fio's I/O goes: a marked directory inside an existing one, a filesystem made for
//! the run (ext4, xfs or btrfs on a loop device over a sparse file, or tmpfs), or a confirmed raw
//! device. A `PreparedTarget` undoes exactly what it created when dropped; everything created is
//! also recorded in the global registry so `cleanup_all_registered` can undo it on Ctrl-C.
//! This module must never format, mount over, or delete anything it did not create.

use super::device::{check_device, DeviceFacts};
use super::error::FioError;
use super::registry::{self, Owned};
use super::spec::{FsKind, TargetSpec};
use super::sys;
use crate::backend::namespace::Namespace;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub use super::registry::{cleanup_all_registered, cleanup_leftovers};

/// The conditions behind a target, copied into every result.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TargetFacts {
    /// "dir", "fs" or "device".
    pub kind: String,
    /// The target's label in ids and charts.
    pub label: String,
    /// Filesystem type the data lives on (as the kernel reports it), if any.
    pub fs_type: Option<String>,
    /// Where fio does its I/O: the data directory, or the device node.
    pub data_path: PathBuf,
    /// Whether stowbench made the filesystem for this run.
    pub made_by_stowbench: bool,
    /// Block device under the filesystem (loop device for made filesystems, or the raw device).
    pub device: Option<PathBuf>,
    /// The sparse file behind the loop device.
    pub backing_file: Option<PathBuf>,
    /// Whether the loop device does direct I/O on its backing file, as the kernel reports it
    /// (without it the host's page cache sits under every "direct" I/O of the made filesystem).
    pub loop_direct_io: Option<bool>,
    /// The exact mkfs command that made the filesystem.
    pub mkfs_command: Option<String>,
    /// The mkfs options the user asked for.
    pub mkfs_options: Option<String>,
    /// The mount options the user asked for.
    pub mount_options_requested: Option<String>,
    /// The mount options in effect, as the kernel lists them (per-mount, then filesystem-wide, each once).
    pub mount_options_effective: Option<String>,
    /// Size of the made filesystem or of the raw device (bytes).
    pub size_bytes: Option<u64>,
    /// Facts about a raw device target.
    pub raw_device: Option<DeviceFacts>,
}

/// A target ready for fio. Dropping it unmounts, detaches and removes only what it created.
#[derive(Debug)]
pub struct PreparedTarget {
    /// What the report says about the target.
    pub facts: TargetFacts,
    /// A marked directory for job files and fio output (outside any made filesystem).
    pub control_dir: PathBuf,
    registry_id: u64,
    cleaned: bool,
    /// Holds the lock on the namespace's marker while the target lives, so `stowbench cleanup`
    /// from another shell sees the target in use and keeps it (it removed a live one).
    _held: Namespace,
}

impl PreparedTarget {
    /// Where fio does its I/O (directory or device node).
    pub fn data_path(&self) -> &Path {
        &self.facts.data_path
    }

    /// Whether the target is a raw block device.
    pub fn is_device(&self) -> bool {
        self.facts.kind == "device"
    }

    /// Undoes what this target created; Drop calls it too, but this reports failures.
    pub fn cleanup(&mut self) -> Result<(), FioError> {
        if self.cleaned {
            return Ok(());
        }
        self.cleaned = true;
        match registry::take(self.registry_id) {
            Some(owned) => registry::cleanup_owned(&owned),
            // Taken by an interrupt, which may still be undoing it: wait until it is done, or
            // the process could exit (exit 130) with the loop device still attached.
            None => {
                registry::wait_for_interrupt_cleanup();
                Ok(())
            }
        }
    }

    /// Checks that the data path accepts O_DIRECT (tmpfs before Linux 6.6 does not).
    pub fn probe_direct(&self) -> Result<(), FioError> {
        use std::os::unix::fs::OpenOptionsExt;
        if self.is_device() {
            return Ok(());
        }
        let probe = self.facts.data_path.join(".stowbench-direct-probe");
        let result = std::fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(libc::O_DIRECT).open(&probe);
        let _ = std::fs::remove_file(&probe);
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(FioError::DirectUnsupported { target: self.facts.label.clone(), detail: e.to_string() }),
            Err(e) => Err(FioError::io(&probe, e)),
        }
    }
}

impl Drop for PreparedTarget {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            // Drop cannot return an error; say it loudly rather than leave mounts behind silently.
            crate::say!("stowbench: {e}");
        }
    }
}

/// Prepares `spec`. Control files and loop images go in a marked `stowbench-fio-<run>-<label>`
/// directory under `work_dir` (directory targets: under the target directory itself).
pub fn prepare_target(spec: &TargetSpec, work_dir: &Path, run_id: &str) -> Result<PreparedTarget, FioError> {
    match spec {
        TargetSpec::Dir { path, label } => prepare_dir(path, label, run_id),
        TargetSpec::Fs { fs, size, mkfs_options, mount_options, label } => {
            let made = MadeFs { fs: *fs, size_bytes: size.bytes(), mkfs_options, mount_options, label };
            prepare_made_fs(&made, work_dir, run_id)
        }
        TargetSpec::Device { device, confirm_device, label } => prepare_device(device, confirm_device, label, work_dir, run_id),
    }
}

/// The checks of `prepare_target` that change nothing on the machine, for a run to make before
/// its first case, so that a made filesystem without root (the environment, exit 3) or a refused
/// device (bad input, exit 2) stops it before anything instead of failing halfway.
pub fn check_target(spec: &TargetSpec, sweep: &str) -> Result<(), FioError> {
    match spec {
        TargetSpec::Dir { path, .. } if !path.is_dir() => Err(FioError::Invalid {
            sweep: sweep.into(),
            field: "target".into(),
            message: if path.exists() {
                format!("{} is not a directory; give the directory fio's files go in (a block device is a device target)", path.display())
            } else {
                format!("{} is not an existing directory; create it first or fix the path", path.display())
            },
        }),
        TargetSpec::Dir { .. } => Ok(()),
        TargetSpec::Fs { fs, .. } => require_root(*fs),
        TargetSpec::Device { device, confirm_device, .. } => check_device(device, confirm_device).map(|_| ()),
    }
}

fn require_root(fs: FsKind) -> Result<(), FioError> {
    if crate::host::is_root() {
        Ok(())
    } else {
        Err(FioError::NotRoot { what: format!("making the {fs} filesystem for the run") })
    }
}

/// The directory a run's sweep of `label` owns: `stowbench-fio-<run id>-<label>`, with the run id
/// as the report spells it (`20261123-135559-92b5`), so a directory can be matched to its run.
pub(crate) fn ns_name(run_id: &str, label: &str) -> String {
    let run_id: String = run_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(48).collect();
    format!("stowbench-fio-{run_id}-{label}")
}

/// Creates a marked namespace directory, registers it, and returns (registry id, absolute dir,
/// the namespace, whose lock the target keeps).
fn create_namespace(parent: &Path, run_id: &str, label: &str, remove_ns: bool) -> Result<(u64, PathBuf, Namespace), FioError> {
    std::fs::create_dir_all(parent).map_err(|e| FioError::io(parent, e))?;
    let parent = parent.canonicalize().map_err(|e| FioError::io(parent, e))?;
    let dir = parent.join(ns_name(run_id, label));
    if dir.to_str().is_none_or(|s| s.contains(['\n', ','])) {
        return Err(FioError::io(&dir, "paths with newlines or commas cannot be passed to fio or mount; choose another directory"));
    }
    let ns = Namespace::create(&dir, run_id, label).map_err(|message| FioError::Io { path: dir.display().to_string(), message })?;
    let id = registry::register(Owned { ns_dir: ns.dir.clone(), remove_ns, ..Owned::default() });
    registry::update(id, |_| {});
    Ok((id, ns.dir.clone(), ns))
}

fn prepare_dir(path: &Path, label: &str, run_id: &str) -> Result<PreparedTarget, FioError> {
    if !path.is_dir() {
        return Err(FioError::io(path, "is not an existing directory; create it first or fix the path"));
    }
    let (id, ns_dir, held) = create_namespace(path, run_id, label, true)?;
    let data = ns_dir.join("data");
    // Built before creating `data` so that an error below is undone by Drop.
    let mut target = PreparedTarget { facts: dir_facts(label, &data), control_dir: ns_dir, registry_id: id, cleaned: false, _held: held };
    std::fs::create_dir_all(&data).map_err(|e| FioError::io(&data, e))?;
    target.facts = dir_facts(label, &data);
    Ok(target)
}

fn dir_facts(label: &str, data: &Path) -> TargetFacts {
    let mount = crate::host::mount_containing(data);
    TargetFacts {
        kind: "dir".into(),
        label: label.into(),
        fs_type: mount.as_ref().map(|m| m.fs_type.clone()),
        data_path: data.to_path_buf(),
        made_by_stowbench: false,
        device: mount.as_ref().filter(|m| m.source.starts_with("/dev/")).map(|m| PathBuf::from(&m.source)),
        backing_file: None,
        loop_direct_io: None,
        mkfs_command: None,
        mkfs_options: None,
        mount_options_requested: None,
        mount_options_effective: mount.map(|m| m.effective_options()),
        size_bytes: None,
        raw_device: None,
    }
}

struct MadeFs<'a> {
    fs: FsKind,
    size_bytes: u64,
    mkfs_options: &'a str,
    mount_options: &'a str,
    label: &'a str,
}

/// Debian packages providing each tool, for the install hint.
fn package_of(tool: &str) -> &'static str {
    match tool {
        "mkfs.xfs" => "xfsprogs",
        "mkfs.btrfs" => "btrfs-progs",
        "mkfs.ext4" => "e2fsprogs",
        _ => "mount",
    }
}

fn require_tool(tool: &str) -> Result<(), FioError> {
    match sys::find_program(tool) {
        Some(_) => Ok(()),
        None => Err(FioError::ToolMissing { tool: tool.into(), package: package_of(tool).into() }),
    }
}

fn prepare_made_fs(made: &MadeFs, work_dir: &Path, run_id: &str) -> Result<PreparedTarget, FioError> {
    require_root(made.fs)?;
    let mut tools = vec!["mount", "umount"];
    let mkfs_tool = format!("mkfs.{}", made.fs);
    if made.fs != FsKind::Tmpfs {
        tools.extend(["losetup", mkfs_tool.as_str()]);
    } else {
        check_memory(made)?;
    }
    tools.iter().try_for_each(|t| require_tool(t))?;
    let (id, ns_dir, held) = create_namespace(work_dir, run_id, made.label, true)?;
    // From here on the registry knows the namespace: any error below is undone by dropping `target`.
    let mut target = PreparedTarget { facts: made_fs_facts(made, &ns_dir), control_dir: ns_dir.clone(), registry_id: id, cleaned: false, _held: held };
    let mount_point = ns_dir.join("mnt");
    std::fs::create_dir_all(&mount_point).map_err(|e| FioError::io(&mount_point, e))?;
    let source = if made.fs == FsKind::Tmpfs {
        mount_tmpfs(made, id, &mount_point)?
    } else {
        let dev = attach_and_format(made, id, &ns_dir, &mut target.facts)?;
        mount_device(made, id, &dev, &mount_point)?;
        dev.display().to_string()
    };
    let data = mount_point.join("data");
    std::fs::create_dir_all(&data).map_err(|e| FioError::io(&data, e))?;
    target.facts.data_path = data;
    if let Some(entry) = crate::host::mount_at(&mount_point).filter(|m| m.source == source) {
        target.facts.mount_options_effective = Some(entry.effective_options());
        target.facts.fs_type = Some(entry.fs_type);
    }
    Ok(target)
}

fn made_fs_facts(made: &MadeFs, ns_dir: &Path) -> TargetFacts {
    TargetFacts {
        kind: "fs".into(),
        label: made.label.into(),
        fs_type: Some(made.fs.name().into()),
        data_path: ns_dir.join("mnt").join("data"),
        made_by_stowbench: true,
        device: None,
        backing_file: None,
        loop_direct_io: None,
        mkfs_command: None,
        mkfs_options: (made.fs != FsKind::Tmpfs).then(|| made.mkfs_options.to_string()),
        mount_options_requested: Some(made.mount_options.to_string()),
        mount_options_effective: None,
        size_bytes: Some(made.size_bytes),
        raw_device: None,
    }
}

/// tmpfs lives in RAM: refuse a size that would push the machine into swap or the OOM killer.
fn check_memory(made: &MadeFs) -> Result<(), FioError> {
    let Some(available) = crate::host::mem_available_bytes() else { return Ok(()) };
    if made.size_bytes > available / 10 * 8 {
        return Err(FioError::Invalid {
            sweep: made.label.into(),
            field: "target.size".into(),
            message: format!("a tmpfs of {} bytes would use more than 80 % of the {available} bytes of available memory; make it smaller", made.size_bytes),
        });
    }
    Ok(())
}

/// Creates the sparse image, attaches a loop device and runs mkfs; returns the loop device.
fn attach_and_format(made: &MadeFs, id: u64, ns_dir: &Path, facts: &mut TargetFacts) -> Result<PathBuf, FioError> {
    let image = ns_dir.join("fs.img");
    let file = std::fs::File::create(&image).map_err(|e| FioError::io(&image, e))?;
    // set_len on a new file makes it sparse, exactly like `truncate -s`: no data blocks are written.
    file.set_len(made.size_bytes).map_err(|e| FioError::io(&image, e))?;
    drop(file);
    registry::update(id, |o| o.image = Some(image.clone()));
    let image_str = image.display().to_string();
    let dev = registry::guarded(|| {
        // Direct I/O from the loop device to its file keeps the host's page cache out of the numbers.
        let out = sys::run_tool("losetup", &["--find", "--show", "--direct-io=on", &image_str])?;
        let dev = PathBuf::from(out.trim());
        registry::update(id, |o| o.loop_dev = Some(dev.clone()));
        Ok(dev)
    })?;
    facts.device = Some(dev.clone());
    facts.backing_file = Some(image.clone());
    let loop_name = dev.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    facts.loop_direct_io = crate::host::sysfs(format!("/sys/class/block/{loop_name}/loop/dio")).map(|v| v == "1");
    let dev_str = dev.display().to_string();
    let mut args: Vec<String> = default_mkfs_args(made).into_iter().map(String::from).collect();
    args.extend(made.mkfs_options.split_whitespace().map(String::from));
    args.push(dev_str);
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let tool = format!("mkfs.{}", made.fs);
    facts.mkfs_command = Some(sys::command_line(&tool, &arg_refs));
    registry::guarded(|| sys::run_tool(&tool, &arg_refs))?;
    Ok(dev)
}

/// Quiet output, and for ext4 eager initialisation: otherwise a kernel thread keeps writing inode
/// tables in the background after mount and disturbs the first measurements.
fn default_mkfs_args(made: &MadeFs) -> Vec<&'static str> {
    match made.fs {
        FsKind::Ext4 if !made.mkfs_options.contains("-E") => vec!["-q", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
        _ => vec!["-q"],
    }
}

fn mount_device(made: &MadeFs, id: u64, dev: &Path, mount_point: &Path) -> Result<(), FioError> {
    let dev_str = dev.display().to_string();
    let mp_str = mount_point.display().to_string();
    let mut args = vec!["-t", made.fs.name()];
    if !made.mount_options.trim().is_empty() {
        args.extend(["-o", made.mount_options.trim()]);
    }
    args.extend([dev_str.as_str(), mp_str.as_str()]);
    registry::guarded(|| {
        registry::update(id, |o| {
            o.mount_point = Some(mount_point.to_path_buf());
            o.mount_source = Some(dev_str.clone());
        });
        sys::run_tool("mount", &args).map(|_| ())
    })
}

/// The mount source names our tmpfs mounts, so cleanup can recognise them.
const TMPFS_SOURCE: &str = "stowbench-fio";

fn mount_tmpfs(made: &MadeFs, id: u64, mount_point: &Path) -> Result<String, FioError> {
    let mut options = format!("size={}", made.size_bytes);
    if !made.mount_options.trim().is_empty() {
        options = format!("{options},{}", made.mount_options.trim());
    }
    let mp_str = mount_point.display().to_string();
    registry::guarded(|| {
        registry::update(id, |o| {
            o.mount_point = Some(mount_point.to_path_buf());
            o.mount_source = Some(TMPFS_SOURCE.into());
        });
        sys::run_tool("mount", &["-t", "tmpfs", "-o", &options, TMPFS_SOURCE, &mp_str]).map(|_| ())
    })?;
    Ok(TMPFS_SOURCE.into())
}

fn prepare_device(device: &Path, confirm: &Path, label: &str, work_dir: &Path, run_id: &str) -> Result<PreparedTarget, FioError> {
    let facts = check_device(device, confirm)?;
    if device.to_str().is_none_or(|s| s.contains(['\n', ':'])) {
        return Err(FioError::DeviceRefused { device: device.display().to_string(), reason: "its path has a newline or ':'".into() });
    }
    let (id, ns_dir, held) = create_namespace(work_dir, run_id, label, true)?;
    let facts = TargetFacts {
        kind: "device".into(),
        label: label.into(),
        fs_type: None,
        data_path: device.to_path_buf(),
        made_by_stowbench: false,
        device: Some(device.to_path_buf()),
        backing_file: None,
        loop_direct_io: None,
        mkfs_command: None,
        mkfs_options: None,
        mount_options_requested: None,
        mount_options_effective: None,
        size_bytes: Some(facts.size_bytes),
        raw_device: Some(facts),
    };
    Ok(PreparedTarget { facts, control_dir: ns_dir, registry_id: id, cleaned: false, _held: held })
}
