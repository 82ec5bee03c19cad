//! The `[[fio]]` sweep as written in a job file (or built from `stowbench fio` flags).
//!
//! A sweep is a small matrix: targets × sizes × file counts × block sizes × rw modes × thread
//! counts × queue depths. This module only describes and parses it; `validate.rs` checks it and
//! `expand.rs` turns it into cases. It must never touch the disk.

use crate::units::{ByteSize, Nanos};
use serde::{de, Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// One `[[fio]]` table: a matrix of fio cases run against one or more targets.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FioSweep {
    /// Name of the sweep; part of every case id. Letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// Where the I/O goes: one target or a list (a directory path, a made filesystem, a raw device).
    #[serde(deserialize_with = "one_or_many")]
    pub target: Vec<TargetSpec>,
    /// Access patterns: read, write, randread, randwrite, rw, randrw, or a mix like "randrw:70"
    /// (70 % reads).
    pub rw: Vec<RwMode>,
    /// Block sizes (bytes; written with units like "8KiB").
    pub bs: Vec<ByteSize>,
    /// Thread counts (fio `numjobs`); results are summed over the threads.
    #[serde(default = "default_one_list")]
    pub numjobs: Vec<u32>,
    /// Outstanding I/O per thread (fio `iodepth`).
    #[serde(default = "default_one_list")]
    pub iodepth: Vec<u32>,
    /// Number of files each thread's `size` is split over (fio `nrfiles`).
    #[serde(default = "default_one_list")]
    pub nrfiles: Vec<u32>,
    /// Bytes of file data per thread (split evenly over `nrfiles` files); one value or a list.
    #[serde(deserialize_with = "one_or_many")]
    pub size: Vec<ByteSize>,
    /// Measured time per case (nanoseconds; written like "30s"). Whole milliseconds.
    #[serde(default = "default_runtime")]
    pub runtime: Nanos,
    /// Warm-up time per case before measuring starts (nanoseconds; "2s"). Whole milliseconds.
    #[serde(default = "default_ramp_time")]
    pub ramp_time: Nanos,
    /// Direct I/O (O_DIRECT), bypassing the page cache. Default true.
    #[serde(default = "default_true")]
    pub direct: bool,
    /// Run for `runtime` even if the files were covered (fio `time_based`). Default true.
    #[serde(default = "default_true")]
    pub time_based: bool,
    /// fio I/O engine. Default libaio.
    #[serde(default)]
    pub ioengine: IoEngine,
    /// Read percentage for mixed modes written without one ("randrw"). Default 50.
    #[serde(default = "default_rwmixread")]
    pub rwmixread: u8,
    /// All threads share one set of files instead of one set each. Default false (fio's default).
    #[serde(default)]
    pub share_files: bool,
    /// Runs of every combination (count, default 1); repeats of a target run as whole passes over
    /// its matrix, so they are spread in time rather than back to back.
    #[serde(default = "default_repeat")]
    pub repeat: u32,
    /// Extra raw fio options, added to every job file as `key=value` and checked by `fio --parse-only`.
    #[serde(default, deserialize_with = "extra_map")]
    pub extra: BTreeMap<String, String>,
    /// Write back the dirty pages before each case, untimed (as `sync` between fio runs by
    /// hand), so a case does not pay for the writes the one before left. Default true.
    #[serde(default = "default_true")]
    pub settle_writeback: bool,
}

fn default_one_list() -> Vec<u32> {
    vec![1]
}
fn default_runtime() -> Nanos {
    Nanos(30_000_000_000)
}
fn default_ramp_time() -> Nanos {
    Nanos(2_000_000_000)
}
fn default_true() -> bool {
    true
}
fn default_repeat() -> u32 {
    1
}
fn default_rwmixread() -> u8 {
    50
}

/// Where a sweep's I/O goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetSpec {
    /// An existing directory; stowbench works inside a marked subdirectory of it.
    Dir {
        /// The directory.
        path: PathBuf,
        /// Label in case ids and charts (default "dir").
        label: String,
    },
    /// A filesystem stowbench makes for the run (loop device over a sparse file, or tmpfs). Root only.
    Fs {
        /// Filesystem type.
        fs: FsKind,
        /// Size of the filesystem in bytes.
        size: ByteSize,
        /// Extra options for mkfs, split on whitespace (not used for tmpfs).
        mkfs_options: String,
        /// Mount options (`mount -o`), comma-separated; empty for the defaults.
        mount_options: String,
        /// Label in case ids and charts (default: the filesystem type).
        label: String,
    },
    /// A raw block device. Destroys its contents on writes: needs `confirm_device` equal to `device`.
    Device {
        /// The block device path, e.g. /dev/sdb.
        device: PathBuf,
        /// Must repeat `device` exactly to confirm.
        confirm_device: PathBuf,
        /// Label in case ids and charts (default: the device name, e.g. "sdb").
        label: String,
    },
}

impl TargetSpec {
    /// The label used in case ids, tables and chart series.
    pub fn label(&self) -> &str {
        match self {
            TargetSpec::Dir { label, .. } | TargetSpec::Fs { label, .. } | TargetSpec::Device { label, .. } => label,
        }
    }
}

/// Filesystems stowbench can make for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsKind {
    /// ext4 on a loop device.
    Ext4,
    /// XFS on a loop device (at least 300 MiB).
    Xfs,
    /// Btrfs on a loop device (at least 128 MiB).
    Btrfs,
    /// tmpfs (memory); its size counts against RAM.
    Tmpfs,
}

impl FsKind {
    /// All kinds, for messages.
    pub const ALL: [FsKind; 4] = [FsKind::Ext4, FsKind::Xfs, FsKind::Btrfs, FsKind::Tmpfs];

    /// The name as written in job files and by the kernel.
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
            FsKind::Tmpfs => "tmpfs",
        }
    }

    /// Parses "ext4", "xfs", "btrfs" or "tmpfs".
    pub fn parse(text: &str) -> Result<FsKind, String> {
        FsKind::ALL.into_iter().find(|k| k.name() == text.trim()).ok_or_else(|| format!("unknown filesystem \"{text}\"; use one of ext4, xfs, btrfs, tmpfs"))
    }

    /// The smallest filesystem size its mkfs accepts (bytes), rounded up to a safe value.
    pub fn min_size_bytes(self) -> u64 {
        match self {
            FsKind::Xfs => 300 << 20,
            FsKind::Btrfs => 128 << 20,
            FsKind::Ext4 => 16 << 20,
            FsKind::Tmpfs => 1 << 20,
        }
    }
}

impl fmt::Display for FsKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// fio I/O engines stowbench offers (others could hide behind unknown behaviour, so they are refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoEngine {
    /// Linux native asynchronous I/O (honours iodepth with direct I/O).
    #[default]
    Libaio,
    /// Linux io_uring (honours iodepth).
    IoUring,
    /// pread/pwrite, one I/O at a time per thread (iodepth must be 1).
    Psync,
    /// read/write with lseek, one I/O at a time per thread (iodepth must be 1).
    Sync,
    /// POSIX aio (glibc threads).
    Posixaio,
    /// No I/O at all: measures fio's own overhead.
    Null,
}

impl IoEngine {
    /// The fio name of the engine.
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Libaio => "libaio",
            IoEngine::IoUring => "io_uring",
            IoEngine::Psync => "psync",
            IoEngine::Sync => "sync",
            IoEngine::Posixaio => "posixaio",
            IoEngine::Null => "null",
        }
    }

    /// Parses an engine name.
    pub fn parse(text: &str) -> Result<IoEngine, String> {
        let all = [IoEngine::Libaio, IoEngine::IoUring, IoEngine::Psync, IoEngine::Sync, IoEngine::Posixaio, IoEngine::Null];
        all.into_iter()
            .find(|e| e.name() == text.trim())
            .ok_or_else(|| format!("unknown ioengine \"{text}\"; use one of libaio, io_uring, psync, sync, posixaio, null"))
    }

    /// Whether the engine keeps at most one I/O in flight per thread, whatever iodepth says.
    pub fn is_synchronous(self) -> bool {
        matches!(self, IoEngine::Psync | IoEngine::Sync)
    }
}

/// The access pattern of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct RwMode {
    /// fio's `rw` value: read, write, randread, randwrite, rw or randrw.
    pub pattern: RwPattern,
    /// Read percentage for mixed patterns (fio `rwmixread`); None means the sweep's `rwmixread`.
    pub read_percent: Option<u8>,
}

/// fio `rw` values stowbench offers (trim is left out: it discards data on real devices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RwPattern {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    Randread,
    /// Random writes.
    Randwrite,
    /// Sequential mixed reads and writes.
    Rw,
    /// Random mixed reads and writes.
    Randrw,
}

impl RwPattern {
    /// fio's name.
    pub fn name(self) -> &'static str {
        match self {
            RwPattern::Read => "read",
            RwPattern::Write => "write",
            RwPattern::Randread => "randread",
            RwPattern::Randwrite => "randwrite",
            RwPattern::Rw => "rw",
            RwPattern::Randrw => "randrw",
        }
    }

    /// Whether reads and writes are mixed.
    pub fn is_mixed(self) -> bool {
        matches!(self, RwPattern::Rw | RwPattern::Randrw)
    }
}

impl RwMode {
    /// Parses "randread", "randrw" or "randrw:70" (70 % reads); "readwrite" is fio's alias of "rw".
    pub fn parse(text: &str) -> Result<RwMode, String> {
        let help = "use read, write, randread, randwrite, rw or randrw, and for mixes optionally a read \
                    percentage like randrw:70";
        let (name, mix) = match text.trim().split_once(':') {
            Some((n, m)) => (n, Some(m)),
            None => (text.trim(), None),
        };
        let pattern = match name {
            "read" => RwPattern::Read,
            "write" => RwPattern::Write,
            "randread" => RwPattern::Randread,
            "randwrite" => RwPattern::Randwrite,
            "rw" | "readwrite" => RwPattern::Rw,
            "randrw" => RwPattern::Randrw,
            _ => return Err(format!("unknown rw mode \"{text}\"; {help}")),
        };
        let read_percent = match mix {
            None => None,
            Some(_) if !pattern.is_mixed() => return Err(format!("rw mode \"{text}\": only rw and randrw take a read percentage")),
            Some(m) => match m.trim().parse::<u8>() {
                Ok(p) if p <= 100 => Some(p),
                _ => return Err(format!("rw mode \"{text}\": the read percentage must be 0 to 100")),
            },
        };
        Ok(RwMode { pattern, read_percent })
    }

    /// Short label for case ids: "randread", "randrw70".
    pub fn label(self, default_mix: u8) -> String {
        if self.pattern.is_mixed() {
            format!("{}{}", self.pattern.name(), self.read_percent.unwrap_or(default_mix))
        } else {
            self.pattern.name().to_string()
        }
    }
}

impl<'de> Deserialize<'de> for RwMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        RwMode::parse(&text).map_err(de::Error::custom)
    }
}

/// The raw shape of a target table; turned into a `TargetSpec` with clear messages.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    dir: Option<PathBuf>,
    fs: Option<String>,
    size: Option<ByteSize>,
    mkfs_options: Option<String>,
    mount_options: Option<String>,
    device: Option<PathBuf>,
    confirm_device: Option<PathBuf>,
    label: Option<String>,
}

impl TargetSpec {
    /// A directory target with the default label.
    pub fn dir(path: impl Into<PathBuf>) -> TargetSpec {
        TargetSpec::Dir { path: path.into(), label: "dir".to_string() }
    }

    /// A made filesystem with default options and label.
    pub fn fs(fs: FsKind, size: ByteSize) -> TargetSpec {
        TargetSpec::Fs { fs, size, mkfs_options: String::new(), mount_options: String::new(), label: fs.name().to_string() }
    }

    /// A raw device target; `confirm` must equal `device` (checked by `validate` and again before use).
    pub fn device(device: impl Into<PathBuf>, confirm: impl Into<PathBuf>) -> TargetSpec {
        let device = device.into();
        let label = device.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "device".into());
        TargetSpec::Device { device, confirm_device: confirm.into(), label }
    }

    fn from_raw(raw: RawTarget) -> Result<TargetSpec, String> {
        let kinds = [raw.dir.is_some(), raw.fs.is_some(), raw.device.is_some()];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err("a target needs exactly one of `dir = \"/path\"`, `fs = \"ext4\"` (with `size`) or \
                        `device = \"/dev/x\"` (with `confirm_device`)"
                .into());
        }
        let mut spec = if let Some(path) = raw.dir {
            if raw.size.is_some() || raw.mkfs_options.is_some() || raw.mount_options.is_some() || raw.confirm_device.is_some() {
                return Err("a `dir` target takes only `label`; size and options belong to `fs` targets".into());
            }
            TargetSpec::dir(path)
        } else if let Some(fs) = raw.fs {
            let fs = FsKind::parse(&fs)?;
            let size = raw.size.ok_or("an `fs` target needs `size`, e.g. { fs = \"xfs\", size = \"1GiB\" }")?;
            if raw.confirm_device.is_some() {
                return Err("`confirm_device` belongs to `device` targets".into());
            }
            TargetSpec::Fs {
                fs,
                size,
                mkfs_options: raw.mkfs_options.unwrap_or_default(),
                mount_options: raw.mount_options.unwrap_or_default(),
                label: fs.name().to_string(),
            }
        } else {
            let device = raw.device.unwrap_or_default();
            if raw.size.is_some() || raw.mkfs_options.is_some() || raw.mount_options.is_some() {
                return Err("a `device` target takes only `confirm_device` and `label`; `size` is the sweep's".into());
            }
            let confirm = raw.confirm_device.ok_or_else(|| {
                format!("writing to raw device {} destroys its contents: add `confirm_device = \"{}\"` to confirm", device.display(), device.display())
            })?;
            TargetSpec::device(device, confirm)
        };
        if let Some(label) = raw.label {
            set_label(&mut spec, label);
        }
        Ok(spec)
    }
}

fn set_label(spec: &mut TargetSpec, new: String) {
    match spec {
        TargetSpec::Dir { label, .. } | TargetSpec::Fs { label, .. } | TargetSpec::Device { label, .. } => *label = new,
    }
}

impl<'de> Deserialize<'de> for TargetSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(path) => Ok(TargetSpec::dir(path)),
            value @ serde_json::Value::Object(_) => {
                let raw: RawTarget = serde_json::from_value(value).map_err(|e| de::Error::custom(format!("target: {e}")))?;
                TargetSpec::from_raw(raw).map_err(|e| de::Error::custom(format!("target: {e}")))
            }
            other => Err(de::Error::custom(format!(
                "target {other} is neither a directory path (\"/srv/bench\") nor a table like \
                 {{ fs = \"xfs\", size = \"2GiB\" }} or {{ device = \"/dev/sdz\", confirm_device = \"/dev/sdz\" }}"
            ))),
        }
    }
}

/// Accepts one value or a list of values.
fn one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    // Going through a Value keeps the inner error message (an untagged enum would swallow it).
    let value = serde_json::Value::deserialize(d)?;
    let result = match value {
        serde_json::Value::Array(_) => Vec::<T>::deserialize(value),
        other => T::deserialize(other).map(|one| vec![one]),
    };
    result.map_err(de::Error::custom)
}

/// Accepts extra fio options as strings, integers or booleans; all become strings.
fn extra_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| {
            let text = match v {
                serde_json::Value::String(s) => s,
                serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
                serde_json::Value::Bool(b) => u8::from(b).to_string(),
                other => return Err(de::Error::custom(format!("extra.{k} = {other}: use a string, an integer or a boolean"))),
            };
            Ok((k, text))
        })
        .collect()
}
