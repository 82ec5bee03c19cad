//! Safety checks before fio may touch a raw block device.
//!
//! Writing to a device destroys what is on it, so a device is accepted only when the user repeated
//! its exact path as confirmation, and only when neither it nor any of its partitions is mounted,
//! used as swap, held by another device (LVM, RAID, dm-crypt) or claimed exclusively by the kernel.
//! This module only reads; it must never open a device for writing.

use super::error::FioError;
use serde::Serialize;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What the kernel says about an accepted device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DeviceFacts {
    /// The path as given, e.g. /dev/sdb.
    pub device: PathBuf,
    /// The kernel's name for it, e.g. "sdb" or "nvme0n1p2".
    pub kernel_name: String,
    /// Capacity (bytes).
    pub size_bytes: u64,
    /// Smallest addressable unit (bytes).
    pub logical_block_size_bytes: Option<u64>,
    /// Whether the kernel thinks it spins.
    pub rotational: Option<bool>,
    /// Model string, if the device reports one.
    pub model: Option<String>,
}

/// `device`'s metadata, if it is a block device (checked by `--dry-run` as well as the run).
pub fn block_device_metadata(device: &Path) -> Result<std::fs::Metadata, FioError> {
    let refuse = |reason: String| FioError::DeviceRefused { device: device.display().to_string(), reason };
    let meta = std::fs::metadata(device).map_err(|e| refuse(format!("cannot stat it: {e}")))?;
    if !meta.file_type().is_block_device() {
        return Err(refuse("it is not a block device; for a directory use --target DIR".into()));
    }
    Ok(meta)
}

/// Accepts `device` only if `confirm` repeats it exactly and nothing uses it; see the module docs.
pub fn check_device(device: &Path, confirm: &Path) -> Result<DeviceFacts, FioError> {
    let refuse = |reason: String| FioError::DeviceRefused { device: device.display().to_string(), reason };
    if device.as_os_str() != confirm.as_os_str() {
        return Err(refuse(format!(
            "the confirmation \"{}\" does not repeat the device path exactly; writing to a raw device destroys \
             its contents, so pass --confirm-device {} (job file: confirm_device = \"{}\")",
            confirm.display(),
            device.display(),
            device.display()
        )));
    }
    let meta = block_device_metadata(device)?;
    let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let sys_dir = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"))
        .canonicalize()
        .map_err(|e| refuse(format!("the kernel does not list it in /sys/dev/block ({e})")))?;
    let kernel_name = sys_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for (name, dir) in family(&sys_dir, &kernel_name) {
        check_unused(&name, &dir).map_err(&refuse)?;
    }
    // Last word from the kernel: a mounted or claimed device refuses an exclusive open.
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(device).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => refuse(format!("the kernel refuses exclusive access, so something uses it ({e})")),
        Some(libc::EACCES) | Some(libc::EPERM) => refuse(format!("cannot open it ({e}); run as root or as a user with access to it")),
        _ => refuse(format!("cannot open it exclusively ({e})")),
    })?;
    let size_bytes = crate::host::sysfs(sys_dir.join("size")).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0) * 512;
    let disk_dir = if sys_dir.join("partition").exists() { sys_dir.parent().map(Path::to_path_buf) } else { Some(sys_dir.clone()) };
    let disk_dir = disk_dir.unwrap_or_else(|| sys_dir.clone());
    Ok(DeviceFacts {
        device: device.to_path_buf(),
        kernel_name,
        size_bytes,
        logical_block_size_bytes: crate::host::sysfs(disk_dir.join("queue/logical_block_size")).and_then(|s| s.parse().ok()),
        rotational: crate::host::sysfs(disk_dir.join("queue/rotational")).map(|s| s == "1"),
        model: crate::host::sysfs(disk_dir.join("device/model")).filter(|m| !m.is_empty()),
    })
}

/// The device and, for a whole disk, each of its partitions: (kernel name, sysfs directory).
fn family(sys_dir: &Path, kernel_name: &str) -> Vec<(String, PathBuf)> {
    let mut members = vec![(kernel_name.to_string(), sys_dir.to_path_buf())];
    if let Ok(entries) = std::fs::read_dir(sys_dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.join("partition").is_file() {
                members.push((entry.file_name().to_string_lossy().into_owned(), path));
            }
        }
    }
    members
}

/// Refuses a device (or partition) that is mounted, swap, or held by another block device.
fn check_unused(name: &str, sys_dir: &Path) -> Result<(), String> {
    let dev_number = crate::host::sysfs(sys_dir.join("dev")).unwrap_or_default();
    let dev_path = PathBuf::from(format!("/dev/{name}"));
    for mount in crate::host::mounts() {
        let source = Path::new(&mount.source).canonicalize().unwrap_or_else(|_| PathBuf::from(&mount.source));
        if (!dev_number.is_empty() && mount.dev == dev_number) || source == dev_path {
            return Err(format!("{name} is mounted at {}; unmount it first", mount.mount_point.display()));
        }
    }
    if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
        if swaps.lines().skip(1).any(|l| l.split_whitespace().next() == Some(dev_path.to_str().unwrap_or(""))) {
            return Err(format!("{name} is in use as swap; swapoff it first"));
        }
    }
    let holders: Vec<String> = std::fs::read_dir(sys_dir.join("holders"))
        .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if !holders.is_empty() {
        return Err(format!("{name} is held by {} (LVM, RAID or encryption); release it first", holders.join(", ")));
    }
    Ok(())
}
