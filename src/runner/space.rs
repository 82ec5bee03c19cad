//! Disk space. A job that needs more space than the filesystems holding its data have free is
//! refused before any data is written (unless the user overrides the check), and a filesystem
//! that fills during a case ends the run with the figures: every later case would fail the same
//! way, and a full disk hurts whatever else lives on it.

use super::existing_ancestor;
use super::phase::effective_stop;
use crate::fio::spec::{FsKind, TargetSpec};
use crate::host::filesystem_space;
use crate::job::{CasePlan, PhasePlan, Plan, Stop};
use crate::units::format_bytes;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Files occupy whole blocks: a 100-byte object takes 4 KiB on ext4 and xfs.
const BLOCK: u64 = 4096;

/// A record's bytes besides its value in a store that appends every put (pack's header and key,
/// zip's local header, name and directory entry): an allowance, not a format's exact figure.
const RECORD_OVERHEAD: u64 = 128;

/// Space one case (or one filesystem image a fio sweep makes) will occupy under one path.
#[derive(Debug, Clone)]
pub struct Need {
    /// The case's id, or the fio sweep's name for an image.
    pub case_id: String,
    pub path: PathBuf,
    pub objects: u64,
    pub object_bytes: u64,
    /// For a store that keeps replaced values until compaction (pack, zip): how many values the
    /// case writes, preload and warmups included; `Appended::Unbounded` when a phase's puts are
    /// bounded only by time.
    pub appended: Appended,
    /// For a fio sweep's made filesystem: its type. The image is one "object" of the filesystem's
    /// size, and it is removed after its sweep even with `--keep`.
    pub image: Option<&'static str>,
}

/// How many values a store that keeps replaced values will hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The store replaces in place (or frees what it replaces): the keys set the size.
    NotKept,
    /// Every value written stays: this many.
    Counted(u64),
    /// Every value written stays, and a phase bounded only by time writes as many as it can.
    Unbounded,
}

impl Need {
    /// Every key stored once at the case's mean size, rounded up to whole blocks: what the case
    /// holds at its fullest when overwrites replace and deletes free. A store that keeps
    /// replaced values holds every value the case writes instead.
    pub fn of(case: &CasePlan, path: &Path, keeps_replaced_values: bool) -> Need {
        let appended = if keeps_replaced_values { values_written(case) } else { Appended::NotKept };
        Need { case_id: case.id.clone(), path: path.to_path_buf(), objects: case.objects, object_bytes: case.size.mean_bytes(), appended, image: None }
    }

    /// The loop image of a filesystem a fio sweep makes, under `path`. It is sparse, but the
    /// filesystem in it can fill it (fio's files, its journal): on a disk with less free space the
    /// loop device fails with I/O errors halfway ("mkfs.ext4: Input/output error" was all a user
    /// saw), and whatever else lives on that disk runs out of space with it.
    pub fn image(sweep: &str, fs: &'static str, bytes: u64, path: &Path) -> Need {
        Need { case_id: sweep.to_string(), path: path.to_path_buf(), objects: 1, object_bytes: bytes, appended: Appended::NotKept, image: Some(fs) }
    }

    /// Saturating: a size near u64::MAX (accepted by the job file) must read as "too large",
    /// not wrap to a few bytes and let the run fill the disk.
    fn bytes(&self) -> u64 {
        // A store that appends lays its records end to end: a 1 KiB value takes about 1 KiB, not
        // a block (counting blocks refused a million 1 KiB objects through pack 3.8 GiB for 1.1).
        let record = self.object_bytes.saturating_add(RECORD_OVERHEAD);
        match self.appended {
            Appended::NotKept => self.objects.saturating_mul(self.object_bytes.div_ceil(BLOCK).max(1).saturating_mul(BLOCK)),
            Appended::Counted(values) => values.saturating_mul(record),
            Appended::Unbounded => self.objects.saturating_mul(record),
        }
    }

    /// What to lower to make the case smaller.
    fn smaller(&self) -> &'static str {
        if self.image.is_some() {
            return "make the filesystem smaller (the fio target's size in a job file, --fs-size with stowbench fio)";
        }
        match self.appended {
            Appended::Counted(values) if values > self.objects => "lower the count or bytes of the phases that put",
            _ => "lower objects or dataset",
        }
    }

    /// The bytes stored, in words: `bytes` stops at u64::MAX (16 EiB), which a job can pass
    /// (10^8 objects of 1 TiB), and is then a floor, not an estimate.
    fn amount(&self) -> String {
        match self.bytes() {
            u64::MAX => format!("more than {}", format_bytes(u64::MAX)),
            bytes => format!("about {}", format_bytes(bytes)),
        }
    }

    /// What the case stores, in words, for the refusal.
    fn said(&self) -> String {
        let size = format_bytes(self.object_bytes);
        if let Some(fs) = self.image {
            return format!(
                "fio sweep \"{}\" makes its {fs} filesystem of {size} on a loop image (sparse, but the filesystem in it can fill it)",
                self.case_id
            );
        }
        let stores = match self.appended {
            Appended::Counted(values) if values > self.objects => format!(
                "{} ({values} values of {size} written to {} keys: the store keeps every replaced value until it is compacted)",
                self.amount(),
                self.objects
            ),
            Appended::Unbounded => format!(
                "at least {} ({} objects of {size}; the store keeps every replaced value until it is compacted, and a phase bounded \
                 only by time writes more)",
                format_bytes(self.bytes()),
                self.objects
            ),
            _ => format!("{} ({} objects of {size})", self.amount(), self.objects),
        };
        format!("case {} stores {stores}", self.case_id)
    }
}

/// The loop images `plan`'s fio sweeps make under `dir`, one sweep's targets after another
/// (a tmpfs lives in memory: `fio::target` checks that against the memory available).
pub fn fio_images(plan: &Plan, dir: &Path) -> Vec<Need> {
    let mut images = Vec::new();
    for sweep in &plan.fio {
        for target in &sweep.target {
            if let TargetSpec::Fs { fs, size, .. } = target {
                if *fs != FsKind::Tmpfs {
                    images.push(Need::image(&sweep.name, fs.name(), size.bytes(), dir));
                }
            }
        }
    }
    images
}

/// How many values a case writes: the preload's, then each phase's puts (warmup included).
fn values_written(case: &CasePlan) -> Appended {
    let workload = &case.workload;
    let mut total = if workload.preload { case.objects } else { 0 };
    for phase in &workload.phases {
        for stop in phase.warmup.iter().chain([&phase.stop]) {
            match puts_until(phase, &effective_stop(*stop, case.objects), case.size.mean_bytes()) {
                Some(puts) => total = total.saturating_add(puts),
                None => return Appended::Unbounded,
            }
        }
    }
    Appended::Counted(total)
}

/// The puts of `phase` until `stop`: the expected share of its operations (a random mix draws
/// puts at their weight), or every iteration's puts in a sequence; `None` when only time bounds
/// them. Several stops: the first reached ends the phase, so the smallest bound holds. A count
/// with a `min_duration` bounds nothing: the phase goes on past it until the minimum has passed.
fn puts_until(phase: &PhasePlan, stop: &Stop, mean_bytes: u64) -> Option<u64> {
    let weight = |writes: bool| phase.mix.iter().filter(|(op, _)| !writes || op.writes()).map(|(_, w)| u64::from(*w)).sum::<u64>();
    let (puts, all) = (weight(true), weight(false));
    if puts == 0 {
        return Some(0);
    }
    let by_count = stop.count.filter(|_| stop.min_duration_ns.is_none()).map(|n| {
        if phase.sequence {
            n.saturating_mul(puts)
        } else {
            n.saturating_mul(puts).div_ceil(all.max(1))
        }
    });
    // A bytes stop counts every operation's bytes, so puts move at most that many.
    let by_bytes = stop.bytes.map(|b| (b / mean_bytes.max(1)).saturating_add(1));
    by_count.into_iter().chain(by_bytes).min()
}

/// "the tmpfs mounted at /mnt/small": the run's own directories are gone when the message is read.
fn filesystem_name(p: &Path) -> String {
    match crate::host::filesystem_of(existing_ancestor(p)) {
        Some(fs) => format!("the {} filesystem mounted at {}", fs.fs_type, fs.mount_point),
        None => format!("the filesystem holding {}", existing_ancestor(p).display()),
    }
}

/// Refuses a run whose cases will not fit. Cases run one after another and each removes its data
/// when done, so a filesystem must hold its largest case; with `keep` every case's data stays, so
/// it must hold them all, and the largest fio image beside them (images go after their sweep).
pub fn check(needs: &[Need], keep: bool) -> Result<(), String> {
    let mut by_device: BTreeMap<u64, Vec<&Need>> = BTreeMap::new();
    for need in needs {
        let Ok(meta) = std::fs::metadata(existing_ancestor(&need.path)) else { continue };
        by_device.entry(meta.dev()).or_default().push(need);
    }
    for needs in by_device.values() {
        let Ok(space) = filesystem_space(existing_ancestor(&needs[0].path)) else { continue };
        let (required, what, smaller) = if keep {
            let (images, cases): (Vec<&&Need>, Vec<&&Need>) = needs.iter().partition(|n| n.image.is_some());
            let largest_image = images.iter().map(|n| n.bytes()).max().unwrap_or(0);
            let total = cases.iter().fold(largest_image, |total, n| total.saturating_add(n.bytes()));
            let image = if largest_image > 0 { format!(" and a fio filesystem image of {}", format_bytes(largest_image)) } else { String::new() };
            let what = format!("the run keeps every case's data (--keep): {} cases{image} store about {} together", cases.len(), format_bytes(total));
            (total, what, "lower objects, dataset or the phases' counts")
        } else {
            let Some(largest) = needs.iter().max_by_key(|n| n.bytes()) else { continue };
            (largest.bytes(), largest.said(), largest.smaller())
        };
        if required > space.free_bytes {
            return Err(format!(
                "not enough disk space: {what} in {}, which has {} free (of {}). Nothing was written. Free space there, {smaller}, \
                 point --work-dir (or the target's path) at a larger filesystem, or pass --no-space-check to run anyway",
                filesystem_name(&needs[0].path),
                format_bytes(space.free_bytes),
                format_bytes(space.total_bytes)
            ));
        }
    }
    Ok(())
}

/// What to say when a case ran out of space: where, and how much is free now.
pub fn exhausted(case_id: &str, data_paths: &[PathBuf]) -> String {
    let at = data_paths.first().map(|p| existing_ancestor(p).to_path_buf()).unwrap_or_default();
    let figures = filesystem_space(&at)
        .map(|s| format!("{} free of {} now, after the case's data was removed", format_bytes(s.free_bytes), format_bytes(s.total_bytes)))
        .unwrap_or_else(|e| format!("free space unknown: {e}"));
    format!(
        "{} ran out of space during case {case_id} ({figures}); the run stopped there, as every later case would fail the \
         same way. Free space or point --work-dir (or the target's path) at a larger filesystem, then run again",
        filesystem_name(&at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A size near u64::MAX once wrapped the case's need to 0 bytes, and the preload wrote until
    /// the disk was full.
    #[test]
    fn a_need_too_large_to_count_is_refused_not_wrapped() {
        let dir = tempfile::tempdir().unwrap();
        let need = |objects, object_bytes| Need {
            case_id: "fs/w/huge/t1/r1".into(),
            path: dir.path().to_path_buf(),
            objects,
            object_bytes,
            appended: Appended::NotKept,
            image: None,
        };
        assert_eq!(need(10, u64::MAX).bytes(), u64::MAX);
        assert_eq!(need(1, u64::MAX - 1).bytes(), u64::MAX);
        for keep in [false, true] {
            let refused = check(&[need(10, u64::MAX), need(10, u64::MAX)], keep).unwrap_err();
            assert!(refused.starts_with("not enough disk space"), "{refused}");
        }
        // 10^8 objects of 1 TiB are about 95 EiB: the figure says it is past what it can count.
        let said = need(100_000_000, 1 << 40).said();
        assert!(said.contains("stores more than 16.0 EiB (100000000 objects of"), "{said}");
        check(&[need(1, 4096)], false).unwrap();
    }

    fn case_of(phases: &str) -> CasePlan {
        let job = format!("version = 1\n[[target]]\nname = \"p\"\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [\"1MiB\"]\nobjects = 10\n{phases}");
        crate::job::load_text(&job, "test.toml").unwrap().cases.remove(0)
    }

    /// pack and zip keep every replaced value until compaction: ten keys overwritten a million
    /// times hold a million values, not ten. The check counted keys only, and such a run filled
    /// the disk.
    #[test]
    fn a_store_that_keeps_replaced_values_needs_room_for_every_put() {
        let overwrites =
            case_of("[[workload.phase]]\nmix = { put = 1 }\ncount = 1000000\n[[workload.phase]]\nmix = { get = 3, put = 1 }\ncount = 400\nwarmup_count = 40\n");
        assert_eq!(values_written(&overwrites), Appended::Counted(1_000_000 + 100 + 10));
        let dir = tempfile::tempdir().unwrap();
        let kept = Need::of(&overwrites, dir.path(), true);
        assert_eq!(kept.bytes(), 1_000_110 * ((1 << 20) + RECORD_OVERHEAD));
        let refused = check(&[kept], false).unwrap_err();
        assert!(refused.contains("1000110 values of 1.00 MiB written to 10 keys"), "{refused}");
        // The same case on a store that replaces in place needs its ten keys.
        check(&[Need::of(&overwrites, dir.path(), false)], false).unwrap();

        // A bytes stop bounds puts; a phase bounded only by time does not.
        assert_eq!(values_written(&case_of("[[workload.phase]]\nmix = { put = 1 }\nbytes = \"10MiB\"\n")), Appended::Counted(11));
        let timed = case_of("[[workload.phase]]\nmix = { put = 1 }\nduration = \"1s\"\n");
        assert_eq!(values_written(&timed), Appended::Unbounded);
        assert_eq!(values_written(&case_of("[[workload.phase]]\nmix = { get = 1 }\nduration = \"1s\"\n")), Appended::Counted(10), "preload only");
    }

    /// A phase with no stop makes one pass over the objects, so its puts are counted; a count
    /// held open by `min_duration` is not a bound. The default pass was once read as "bounded
    /// only by time", and a million 1 KiB objects through pack were refused for want of 3.8 GiB.
    #[test]
    fn a_default_pass_is_counted_and_a_count_held_open_is_not() {
        let one_pass = case_of("[[workload.phase]]\nmix = { put = 1 }\n[[workload.phase]]\nmix = { get = 1 }\n");
        assert_eq!(values_written(&one_pass), Appended::Counted(10));
        let held_open = case_of("[[workload.phase]]\nmix = { put = 1 }\ncount = 10\nmin_duration = \"1s\"\n");
        assert_eq!(values_written(&held_open), Appended::Unbounded);
        let bytes_too = case_of("[[workload.phase]]\nmix = { put = 1 }\ncount = 10\nmin_duration = \"1s\"\nbytes = \"5MiB\"\n");
        assert_eq!(values_written(&bytes_too), Appended::Counted(6), "a bytes stop still bounds it");
    }

    /// Each sweep's image is removed after its sweep, even with `--keep`: a kept run needs its
    /// cases' data and the largest image, not every image at once.
    #[test]
    fn a_kept_run_needs_its_cases_and_the_largest_image() {
        let dir = tempfile::tempdir().unwrap();
        let tib = 1u64 << 40;
        let case = Need {
            case_id: "fs/w/1MiB/t1/r1".into(),
            path: dir.path().to_path_buf(),
            objects: 1,
            object_bytes: 1 << 20,
            appended: Appended::NotKept,
            image: None,
        };
        let needs = [case, Need::image("e3", "ext4", 200 * tib, dir.path()), Need::image("e3", "xfs", 100 * tib, dir.path())];
        let kept = check(&needs, true).unwrap_err();
        assert!(kept.contains("1 cases and a fio filesystem image of 200 TiB store about 200 TiB together"), "{kept}");
        let one_at_a_time = check(&needs, false).unwrap_err();
        assert!(one_at_a_time.contains("fio sweep \"e3\" makes its ext4 filesystem of 200 TiB on a loop image"), "{one_at_a_time}");
    }

    /// Records of an appending store lie end to end: small values take their own size, not a
    /// block each, while one file per object does take a block.
    #[test]
    fn an_appending_store_needs_its_records_not_a_block_per_object() {
        let need =
            |appended| Need { case_id: "pack/w/1KiB/t4/r1".into(), path: PathBuf::from("/"), objects: 1_000_000, object_bytes: 1024, appended, image: None };
        assert_eq!(need(Appended::Counted(1_000_000)).bytes(), 1_000_000 * (1024 + RECORD_OVERHEAD));
        assert_eq!(need(Appended::Counted(10)).bytes(), 10 * (1024 + RECORD_OVERHEAD), "only what was put is stored");
        assert_eq!(need(Appended::Unbounded).bytes(), 1_000_000 * (1024 + RECORD_OVERHEAD));
        assert_eq!(need(Appended::NotKept).bytes(), 1_000_000 * BLOCK);
    }
}
