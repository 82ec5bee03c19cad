//! Checking a sweep before anything runs: every message names the field and the fix.
//!
//! Checks here need no disk and no root; what only the machine can tell (free space, O_DIRECT,
//! device in use) is checked by `target.rs` right before use. Never mutates the sweep.

use super::error::FioError;
use super::spec::{FioSweep, FsKind, TargetSpec};
use std::collections::BTreeSet;

/// fio options stowbench sets itself; `extra` may not override them.
pub const MANAGED_OPTIONS: &[&str] = &[
    "name",
    "filename",
    "directory",
    "filename_format",
    "opendir",
    "size",
    "filesize",
    "nrfiles",
    "bs",
    "blocksize",
    "rw",
    "readwrite",
    "rwmixread",
    "rwmixwrite",
    "numjobs",
    "iodepth",
    "runtime",
    "ramp_time",
    "direct",
    "buffered",
    "time_based",
    "ioengine",
    "group_reporting",
    "percentile_list",
    "lat_percentiles",
    "clat_percentiles",
    "output",
    "output-format",
];

/// Upper bound on cases per sweep: a typo like `iodepth = [1, 2, …, 4096]` × 6 modes should not
/// silently schedule days of runs.
pub const MAX_CASES: usize = 5_000;

impl FioSweep {
    /// Checks every field; the first problem found (of `mistakes`) is returned with the field
    /// name and a fix.
    pub fn validate(&self) -> Result<(), FioError> {
        self.mistakes().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every mistake of the sweep, each group's first (one per list field), so a job file's
    /// table is corrected in one pass rather than one mistake per run of `validate`.
    pub fn mistakes(&self) -> Vec<FioError> {
        let mut found: Vec<FioError> = self.check_lists();
        let checks = [self.check_name(), self.check_sizes(), self.check_times(), self.check_engine(), self.check_targets(), self.check_extra()];
        found.extend(checks.into_iter().filter_map(Result::err));
        if found.is_empty() {
            found.extend(self.check_case_count().err());
        }
        found
    }

    /// The limit on the sweep's expansion, once its lists are sound.
    fn check_case_count(&self) -> Result<(), FioError> {
        let cases = self.target.len()
            * self.size.len()
            * self.nrfiles.len()
            * self.bs.len()
            * self.rw.len()
            * self.numjobs.len()
            * self.iodepth.len()
            * self.repeat.max(1) as usize;
        if cases > MAX_CASES {
            return Err(self.invalid(
                "rw/bs/numjobs/iodepth/nrfiles/size/target",
                format!("the sweep expands to {cases} cases (limit {MAX_CASES}); split it into several [[fio]] tables"),
            ));
        }
        Ok(())
    }

    fn invalid(&self, field: &str, message: impl Into<String>) -> FioError {
        FioError::Invalid { sweep: self.name.clone(), field: field.to_string(), message: message.into() }
    }

    fn check_name(&self) -> Result<(), FioError> {
        let ok = !self.name.is_empty() && self.name.len() <= 64 && self.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if ok {
            Ok(())
        } else {
            Err(self.invalid("name", format!("\"{}\" must be 1 to 64 letters, digits, '-', '_' or '.'", self.name)))
        }
    }

    /// The lists and counts: at most one mistake per field.
    fn check_lists(&self) -> Vec<FioError> {
        let mut found = Vec::new();
        for (field, empty) in [
            ("target", self.target.is_empty()),
            ("rw", self.rw.is_empty()),
            ("bs", self.bs.is_empty()),
            ("size", self.size.is_empty()),
            ("numjobs", self.numjobs.is_empty()),
            ("iodepth", self.iodepth.is_empty()),
            ("nrfiles", self.nrfiles.is_empty()),
        ] {
            if empty {
                found.push(self.invalid(field, "is empty; give at least one value"));
            }
        }
        for (field, values, max) in [("numjobs", &self.numjobs, 1024u32), ("iodepth", &self.iodepth, 65_535), ("nrfiles", &self.nrfiles, 100_000)] {
            if let Some(bad) = values.iter().find(|v| **v == 0 || **v > max) {
                found.push(self.invalid(field, format!("{bad} is out of range; use 1 to {max}")));
            } else if let Some(dup) = first_duplicate(values.iter()) {
                found.push(self.invalid(field, format!("{dup} is listed twice; list each value once")));
            }
        }
        if let Some(dup) = first_duplicate(self.rw.iter().map(|m| m.label(self.rwmixread))) {
            found.push(self.invalid("rw", format!("{dup} is listed twice; list each mode once")));
        }
        if let Some(dup) = first_duplicate(self.bs.iter()) {
            found.push(self.invalid("bs", format!("{dup} is listed twice; list each size once")));
        }
        if let Some(dup) = first_duplicate(self.size.iter()) {
            found.push(self.invalid("size", format!("{dup} is listed twice; list each size once")));
        }
        if self.repeat == 0 || self.repeat > 100 {
            found.push(self.invalid("repeat", format!("{} is out of range; use 1 to 100", self.repeat)));
        }
        if self.rwmixread > 100 {
            found.push(self.invalid("rwmixread", format!("{} is not a percentage; use 0 to 100", self.rwmixread)));
        }
        found
    }

    fn check_sizes(&self) -> Result<(), FioError> {
        for bs in &self.bs {
            if bs.bytes() == 0 {
                return Err(self.invalid("bs", "0 bytes is not a block size; use e.g. \"8KiB\""));
            }
            if self.direct && bs.bytes() % 512 != 0 {
                return Err(self.invalid(
                    "bs",
                    format!(
                        "{bs} ({} bytes) is not a multiple of 512: direct I/O needs whole sectors; \
                             use e.g. 4KiB, or set direct = false",
                        bs.bytes()
                    ),
                ));
            }
        }
        let max_bs = self.bs.iter().max().map(|b| b.bytes()).unwrap_or(0);
        for size in &self.size {
            // A zero is check_lists' mistake, reported there.
            for &nrfiles in self.nrfiles.iter().filter(|n| **n > 0) {
                let n = u64::from(nrfiles);
                if size.bytes() % n != 0 {
                    return Err(self.invalid(
                        "size",
                        format!(
                            "{size} ({} bytes) does not split evenly over nrfiles = {nrfiles}; choose a size \
                                 that is a multiple of {nrfiles}",
                            size.bytes()
                        ),
                    ));
                }
                if size.bytes() / n < max_bs {
                    return Err(self.invalid(
                        "size",
                        format!(
                            "{size} over {nrfiles} files gives files smaller than the block size {}; \
                                 raise size or lower nrfiles",
                            crate::units::ByteSize(max_bs)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_times(&self) -> Result<(), FioError> {
        for (field, value) in [("runtime", self.runtime.0), ("ramp_time", self.ramp_time.0)] {
            if value % 1_000_000 != 0 {
                return Err(self.invalid(field, format!("{} is not a whole number of milliseconds; fio counts in ms", crate::units::Nanos(value))));
            }
        }
        if self.time_based && self.runtime.0 == 0 {
            return Err(self.invalid("runtime", "is 0 but time_based = true; give a runtime like \"30s\""));
        }
        Ok(())
    }

    fn check_engine(&self) -> Result<(), FioError> {
        if self.ioengine.is_synchronous() {
            if let Some(depth) = self.iodepth.iter().find(|d| **d > 1) {
                return Err(self.invalid(
                    "iodepth",
                    format!(
                        "{depth} has no effect with the synchronous ioengine {} (one I/O in flight per thread); \
                             use ioengine = \"libaio\" or \"io_uring\" for a queue-depth sweep, or iodepth = [1]",
                        self.ioengine.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_targets(&self) -> Result<(), FioError> {
        let mut labels = BTreeSet::new();
        for target in &self.target {
            let label = target.label();
            let label_ok = !label.is_empty() && label.len() <= 32 && label.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !label_ok {
                return Err(self.invalid("target.label", format!("\"{label}\" must be 1 to 32 letters, digits, '-', '_' or '.'")));
            }
            if !labels.insert(label.to_string()) {
                return Err(
                    self.invalid("target", format!("two targets have the label \"{label}\"; give each its own, e.g. {{ dir = \"/mnt/a\", label = \"nvme\" }}"))
                );
            }
            self.check_target(target)?;
        }
        Ok(())
    }

    fn check_target(&self, target: &TargetSpec) -> Result<(), FioError> {
        let max_data = self.max_data_bytes();
        match target {
            TargetSpec::Dir { path, .. } => {
                if path.as_os_str().is_empty() {
                    return Err(self.invalid("target", "the directory path is empty"));
                }
            }
            TargetSpec::Fs { fs, size, mkfs_options, mount_options, .. } => {
                if size.bytes() < fs.min_size_bytes() {
                    return Err(
                        self.invalid("target.size", format!("{size} is too small for {fs}; use at least {}", crate::units::ByteSize(fs.min_size_bytes())))
                    );
                }
                // Leave room for the journal and metadata: data may use at most 85 % of the filesystem.
                if max_data > size.bytes() / 100 * 85 {
                    return Err(self.invalid(
                        "target.size",
                        format!(
                            "the {fs} filesystem of {size} cannot hold the largest case's {max_data} bytes of files \
                                 (size × numjobs, at most 85 % of the filesystem); make it larger or the files smaller"
                        ),
                    ));
                }
                if *fs == FsKind::Tmpfs && !mkfs_options.trim().is_empty() {
                    return Err(self.invalid("target.mkfs_options", "tmpfs has no mkfs; put its options in mount_options"));
                }
                for text in [mkfs_options, mount_options] {
                    if text.chars().any(|c| c == '\n' || c == '\'' || c == '"') {
                        return Err(self.invalid("target options", format!("\"{text}\" contains a newline or quote")));
                    }
                }
            }
            TargetSpec::Device { device, confirm_device, .. } => {
                if device != confirm_device {
                    return Err(self.invalid(
                        "target.confirm_device",
                        format!(
                            "\"{}\" does not repeat the device \"{}\" exactly; writing to a raw device destroys \
                                 its contents, so the confirmation must match character for character",
                            confirm_device.display(),
                            device.display()
                        ),
                    ));
                }
                if self.nrfiles.iter().any(|n| *n != 1) {
                    return Err(self.invalid("nrfiles", "a raw device is one file: use nrfiles = [1] for device targets"));
                }
            }
        }
        Ok(())
    }

    /// Bytes of files the largest case needs.
    pub fn max_data_bytes(&self) -> u64 {
        let size = self.size.iter().map(|s| s.bytes()).max().unwrap_or(0);
        let jobs = if self.share_files { 1 } else { u64::from(*self.numjobs.iter().max().unwrap_or(&1)) };
        size.saturating_mul(jobs)
    }

    fn check_extra(&self) -> Result<(), FioError> {
        for (key, value) in &self.extra {
            let field = format!("extra.{key}");
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.invalid(&field, "option names are letters, digits and '_'"));
            }
            if MANAGED_OPTIONS.contains(&key.as_str()) {
                return Err(self.invalid(&field, format!("stowbench sets `{key}` itself; use the sweep's own field instead")));
            }
            if value.contains(['\n', '\r', ';', '#']) {
                return Err(self.invalid(&field, format!("\"{value}\" contains a newline, ';' or '#'")));
            }
            if let Some(trap) = fractional_with_suffix(value) {
                return Err(self.invalid(
                    &field,
                    format!(
                        "\"{trap}\" has a fraction before a unit; fio truncates it (2.6m is 2 bytes). \
                             Write the exact integer, e.g. 2726298"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Finds a token like "2.6m" or "1.5k": digits, '.', digits, then a letter.
fn fractional_with_suffix(value: &str) -> Option<&str> {
    value.split([',', ':', '-', '/', ' ']).find(|token| {
        let Some((whole, rest)) = token.split_once('.') else { return false };
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        !whole.is_empty() && whole.chars().all(|c| c.is_ascii_digit()) && digits > 0 && rest[digits..].starts_with(|c: char| c.is_ascii_alphabetic())
    })
}

fn first_duplicate<T: Ord + Clone + std::fmt::Display>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut seen = BTreeSet::new();
    values.into_iter().find(|v| !seen.insert(v.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_fractional_unit_traps() {
        assert_eq!(fractional_with_suffix("2.6m"), Some("2.6m"));
        assert_eq!(fractional_with_suffix("4k,1.5k"), Some("1.5k"));
        assert_eq!(fractional_with_suffix("4096"), None);
        assert_eq!(fractional_with_suffix("99.9"), None);
        assert_eq!(fractional_with_suffix("zipf:1.2"), None);
    }
}
