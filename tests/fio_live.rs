//! Live fio runs: the null engine, a small file, the CLI, filesystems made on loop devices and
//! tmpfs (root), and the raw-device safety checks (root). Runtimes are 0.5–1 s so the whole file
//! stays well under a minute.

mod common;
mod fio_support;

use clap::Parser;
use fio_support::{fio_available, loops_backed_under, mounts_under, root_available};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use stowbench::fio::cli::{run as cli_run, FioArgs};
use stowbench::fio::device::check_device;
use stowbench::fio::{expand, prepare_target, render_job, run_case, run_sweep, FioCaseResult, FioError, FioSweep, RunOptions};

fn sweep(toml_text: &str) -> FioSweep {
    let sweep: FioSweep = toml::from_str(toml_text).unwrap_or_else(|e| panic!("{e}"));
    sweep.validate().unwrap_or_else(|e| panic!("{e}"));
    sweep
}

fn run_all(sweep: &FioSweep, work_dir: &Path) -> Vec<FioCaseResult> {
    let mut results = Vec::new();
    run_sweep(sweep, work_dir, "t1", &RunOptions::default(), |(case, outcome)| {
        results.push(outcome.unwrap_or_else(|e| panic!("{}: {e}", case.id)));
        true
    })
    .unwrap();
    results
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn null_engine_sweep_runs_fio_and_leaves_the_directory_as_found() {
    if !fio_available("null_engine_sweep") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("precious.txt"), "mine").unwrap();
    let text = format!(
        "name = \"null\"\ntarget = \"{}\"\nrw = [\"randread\"]\nbs = [\"4KiB\"]\niodepth = [1, 8]\nnumjobs = [2]\n\
         size = \"1MiB\"\nioengine = \"null\"\nruntime = \"500ms\"\nramp_time = \"0s\"",
        tmp.path().display()
    );
    let results = run_all(&sweep(&text), tmp.path());
    assert_eq!(results.len(), 2);
    for r in &results {
        assert!(r.fio_version.starts_with("fio-"), "{}", r.fio_version);
        assert!(r.iops > 10_000.0, "{}: null engine did {} IOPS", r.case_id, r.iops);
        let read = r.read.as_ref().unwrap();
        assert!(read.lat_ns_p50.is_some() && read.histogram_ns.is_some(), "json+ by default");
        assert!(r.write.is_none());
        assert!(r.job_file.contains("ioengine=null\n") && r.job_file.contains("numjobs=2\n"));
        assert_eq!(r.target.kind, "dir");
        assert!(r.fio_jobs_json.is_some());
        assert!(r.writeback_settle.is_none(), "the null engine writes nothing, so nothing is written back");
    }
    assert_eq!(results[1].iodepth, 8);
    assert_eq!(entries(tmp.path()), ["precious.txt"], "only our namespace was removed");
}

#[test]
fn small_file_cases_do_real_io_and_reuse_or_replace_files() {
    if !fio_available("small_file_cases") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let text = format!(
        "name = \"file\"\ntarget = \"{}\"\nrw = [\"randrw:70\"]\nbs = [\"4KiB\"]\niodepth = [4]\nsize = [\"8MiB\", \"4MiB\"]\n\
         runtime = \"1s\"\nramp_time = \"0s\"",
        tmp.path().display()
    );
    let sweep = sweep(&text);
    let cases = expand(&sweep);
    let target = prepare_target(&sweep.target[0], tmp.path(), "t2").unwrap();
    let data = target.data_path().to_path_buf();
    let first = run_case(&cases[0], &target, &RunOptions::default()).unwrap();
    assert_eq!(std::fs::metadata(data.join("stow.0.0")).unwrap().len(), 8 << 20);
    let second = run_case(&cases[1], &target, &RunOptions::default()).unwrap();
    assert_eq!(std::fs::metadata(data.join("stow.0.0")).unwrap().len(), 4 << 20, "a new layout replaces the old files");
    for r in [&first, &second] {
        let (read, write) = (r.read.as_ref().unwrap(), r.write.as_ref().unwrap());
        assert!(read.total_ios > 0 && write.total_ios > 0, "{}", r.case_id);
        // fio's bytes per second agree with its bytes and runtime (to its 1 ms runtime resolution).
        let derived = read.io_bytes as f64 / (read.runtime_ns as f64 / 1e9);
        assert!((derived / read.bw_bytes_per_s as f64 - 1.0).abs() < 0.01, "{derived} vs {}", read.bw_bytes_per_s);
        assert_eq!(r.job_file, render_job(&cases[if r.size_bytes == 8 << 20 { 0 } else { 1 }], &data));
        assert!(r.target.fs_type.is_some(), "the directory's filesystem is reported");
        let settled = r.writeback_settle.as_ref().unwrap_or_else(|| panic!("{}: no write-back before it", r.case_id));
        assert_eq!((settled.scope.as_str(), &settled.filesystems, &settled.error), ("filesystems", &vec![data.clone()], &None));
    }
    drop(target);
    assert!(entries(tmp.path()).is_empty(), "dropping the target removes its namespace");
}

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: FioArgs,
}

#[test]
fn cli_dry_run_creates_nothing_and_a_run_writes_the_run_report() {
    if !fio_available("cli") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().display().to_string();
    let (results, charts) = (tmp.path().join("results"), tmp.path().join("charts.csv"));
    let (results_arg, charts_arg) = (results.display().to_string(), charts.display().to_string());
    let base =
        ["x", "--target", &dir, "--work-dir", &dir, "--ioengine", "null", "--rw", "read,randread", "--size", "1MiB", "--runtime", "500ms", "--ramp-time", "0s"];
    let never = AtomicBool::new(false);
    let dry = Wrapper::parse_from(base.iter().chain(&["--iodepth", "1..4", "--dry-run"]));
    assert_eq!(cli_run(&dry.args, Vec::new(), &never), Ok(0));
    assert!(entries(tmp.path()).is_empty(), "a dry run creates nothing");
    let real = Wrapper::parse_from(base.iter().chain(&["--iodepth", "1,2", "--out", &results_arg, "--csv", &charts_arg, "--no-progress"]));
    assert_eq!(cli_run(&real.args, vec!["stowbench".into(), "fio".into()], &never), Ok(0));
    // The same report as `stowbench run` writes: schema, run id, environment, fio cases.
    let run_dir = std::fs::read_dir(&results).unwrap().next().unwrap().unwrap().path();
    let report = common::assert_valid_report(&run_dir.join("report.json"));
    assert_eq!(report["fio_cases"].as_array().unwrap().len(), 4);
    assert_eq!((report["status"].as_str(), report["name"].as_str()), (Some("complete"), Some("cli")));
    assert_eq!(report["command"], serde_json::json!(["stowbench", "fio"]));
    assert!(report["environment"]["kernel"].as_str().is_some_and(|k| !k.is_empty()));
    let chart_lines = std::fs::read_to_string(&charts).unwrap().lines().count();
    assert_eq!(chart_lines, 1 + 4, "header + read and randread at 2 queue depths");
    assert_eq!(entries(tmp.path()), ["charts.csv", "results"], "the run's work directory is removed");
    let bad = Wrapper::parse_from(["x", "--target", &dir, "--bs", "2.6m"]);
    assert!(cli_run(&bad.args, Vec::new(), &never).unwrap_err().message.contains("--bs"));
    let old_flag = Wrapper::parse_from(["x", "--target", &dir, "--json", "out.json"]);
    assert!(cli_run(&old_flag.args, Vec::new(), &never).unwrap_err().message.contains("--out DIR"));
}

#[test]
fn made_filesystems_are_created_used_reported_and_removed() {
    if !fio_available("made_filesystems") || !root_available("made_filesystems") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let text = "name = \"mk\"\nrw = [\"randwrite\"]\nbs = [\"8KiB\"]\niodepth = [4]\nsize = \"16MiB\"\nruntime = \"1s\"\nramp_time = \"0s\"\n\
        target = [{ fs = \"xfs\", size = \"320MiB\" }, { fs = \"ext4\", size = \"64MiB\", mount_options = \"noatime\" }, \
                  { fs = \"btrfs\", size = \"128MiB\" }, { fs = \"tmpfs\", size = \"64MiB\" }]";
    let results = run_all(&sweep(text), tmp.path());
    let fs: Vec<&str> = results.iter().map(|r| r.target.fs_type.as_deref().unwrap()).collect();
    assert_eq!(fs, ["xfs", "ext4", "btrfs", "tmpfs"]);
    for r in &results {
        assert!(r.iops > 0.0 && r.write.as_ref().unwrap().total_ios > 0, "{}", r.case_id);
        assert!(r.target.made_by_stowbench && r.target.mount_options_effective.is_some());
        if r.target.fs_type.as_deref() != Some("tmpfs") {
            let mkfs = r.target.mkfs_command.as_deref().unwrap();
            assert!(mkfs.starts_with(&format!("mkfs.{} ", r.target_label)) && mkfs.contains("/dev/loop"), "{mkfs}");
            assert_eq!(r.target.loop_direct_io, Some(true));
        }
    }
    assert!(results[1].target.mount_options_effective.as_deref().unwrap().contains("noatime"));
    assert!(results[1].target.mkfs_command.as_deref().unwrap().contains("lazy_itable_init=0"));
    assert!(mounts_under(tmp.path()).is_empty(), "mounts left: {:?}", mounts_under(tmp.path()));
    assert!(loops_backed_under(tmp.path()).is_empty(), "loop devices left: {:?}", loops_backed_under(tmp.path()));
    assert!(entries(tmp.path()).is_empty(), "left behind: {:?}", entries(tmp.path()));
}

/// A loop device over a file with an MBR holding one Linux partition from sector 2048 to the end.
struct PartitionedLoop {
    dev: PathBuf,
}

impl PartitionedLoop {
    fn new(image: &Path, size_bytes: u64) -> PartitionedLoop {
        let mut mbr = vec![0u8; 512];
        let sectors = (size_bytes / 512 - 2048) as u32;
        mbr[446..462].copy_from_slice(&[0, 0xfe, 0xff, 0xff, 0x83, 0xfe, 0xff, 0xff, 0, 8, 0, 0, 0, 0, 0, 0]);
        mbr[458..462].copy_from_slice(&sectors.to_le_bytes());
        mbr[510] = 0x55;
        mbr[511] = 0xaa;
        std::fs::write(image, &mbr).unwrap();
        std::fs::OpenOptions::new().write(true).open(image).unwrap().set_len(size_bytes).unwrap();
        let out = Command::new("losetup").args(["--find", "--show", "--partscan"]).arg(image).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        PartitionedLoop { dev }
    }

    /// A device node for partition 1, made in `dir`: containers often lack udev, so /dev/loopNp1
    /// may never appear even though the kernel created the partition.
    fn partition_node(&self, dir: &Path) -> PathBuf {
        let name = format!("{}p1", self.dev.file_name().unwrap().to_string_lossy());
        let sys = PathBuf::from(format!("/sys/class/block/{name}/dev"));
        for attempt in 0..100 {
            if sys.exists() {
                break;
            }
            // Some kernels skip the partition scan at attach time; ask for it explicitly.
            if attempt == 10 {
                run_ok("partx", &["-a", self.dev.to_str().unwrap()]);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let numbers = std::fs::read_to_string(&sys).unwrap_or_else(|e| panic!("{}: {e}", sys.display()));
        let (major, minor) = numbers.trim().split_once(':').unwrap();
        let node = dir.join(name);
        let c_path = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
        let dev = libc::makedev(major.parse().unwrap(), minor.parse().unwrap());
        // SAFETY: mknod with a valid C path; creates a block node inside the test's own directory.
        assert_eq!(unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFBLK | 0o600, dev) }, 0, "mknod {}", node.display());
        node
    }
}

impl Drop for PartitionedLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

fn run_ok(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn raw_device_needs_exact_confirmation_and_no_mounted_partition() {
    if !fio_available("raw_device") || !root_available("raw_device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let disk = PartitionedLoop::new(&tmp.path().join("disk.img"), 64 << 20);
    let dev = disk.dev.clone();
    let refused = |result: Result<_, FioError>, words: &str| match result {
        Err(FioError::DeviceRefused { reason, .. }) => assert!(reason.contains(words), "{reason}"),
        other => panic!("expected a refusal mentioning {words}, got {other:?}"),
    };
    refused(check_device(&dev, Path::new("/dev/loop999")), "does not repeat");
    refused(check_device(&dev, &PathBuf::from(format!("{} ", dev.display()))), "does not repeat");
    refused(check_device(tmp.path(), tmp.path()), "not a block device");
    // Mount the partition: the whole disk must now be refused.
    let part = disk.partition_node(tmp.path());
    run_ok("mkfs.ext4", &["-q", part.to_str().unwrap()]);
    let mnt = tmp.path().join("m");
    std::fs::create_dir(&mnt).unwrap();
    run_ok("mount", &[part.to_str().unwrap(), mnt.to_str().unwrap()]);
    let while_mounted = check_device(&dev, &dev);
    run_ok("umount", &[mnt.to_str().unwrap()]);
    refused(while_mounted, "p1 is mounted");
    // Unmounted and confirmed: fio may read it.
    let facts = check_device(&dev, &dev).unwrap();
    assert_eq!(facts.size_bytes, 64 << 20);
    let text = format!(
        "name = \"raw\"\ntarget = {{ device = \"{0}\", confirm_device = \"{0}\" }}\nrw = [\"randread\"]\nbs = [\"4KiB\"]\n\
         iodepth = [4]\nsize = \"16MiB\"\nruntime = \"1s\"\nramp_time = \"0s\"",
        dev.display()
    );
    let work = tmp.path().join("work");
    let results = run_all(&sweep(&text), &work);
    assert_eq!(results[0].target.kind, "device");
    assert!(results[0].job_file.contains(&format!("filename={}\n", dev.display())));
    assert!(results[0].read.as_ref().unwrap().total_ios > 0);
    assert!(entries(&work).is_empty());
}
