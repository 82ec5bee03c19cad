//! `[[fio]]` tables: parsing, validation messages, expansion, and job files against golden files.
//! Regenerate the golden files with `UPDATE_GOLDEN=1 cargo test --release --test fio_render`.

mod fio_support;

use serde::Deserialize;
use std::path::{Path, PathBuf};
use stowbench::fio::{expand, render_job, FioSweep};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    fio: Vec<FioSweep>,
}

fn sweeps(toml_text: &str) -> Result<Vec<FioSweep>, String> {
    toml::from_str::<JobFile>(toml_text).map(|j| j.fio).map_err(|e| e.to_string())
}

fn one(toml_text: &str) -> FioSweep {
    let mut list = sweeps(toml_text).unwrap_or_else(|e| panic!("{e}"));
    list.remove(0)
}

/// The validation message (or parse error) for a table.
fn problem(toml_text: &str) -> String {
    match sweeps(toml_text) {
        Err(e) => e,
        Ok(list) => list[0].validate().expect_err("expected a validation error").to_string(),
    }
}

const E3: &str = r#"
[[fio]]
name = "e3"
target = [{ fs = "xfs", size = "2GiB" }, { fs = "ext4", size = "2GiB", mount_options = "noatime" }]
rw = ["read", "randread", "write", "randwrite"]
bs = ["8KiB", "64KiB", "512KiB"]
numjobs = [1, 2, 4]
iodepth = [1, 2, 4, 8, 16, 32, 64, 128]
size = "50MB"
runtime = "30s"
ramp_time = "2s"
"#;

#[test]
fn e3_table_expands_to_the_full_matrix_with_stable_ids() {
    let sweep = one(E3);
    sweep.validate().unwrap();
    let cases = expand(&sweep);
    assert_eq!(cases.len(), 2 * 4 * 3 * 3 * 8);
    assert_eq!(cases[0].id, "fio/e3/xfs/read/bs8KiB/j1/qd1/f1/s50MB");
    assert_eq!(cases.last().unwrap().id, "fio/e3/ext4/randwrite/bs512KiB/j4/qd128/f1/s50MB");
    let ids: std::collections::BTreeSet<_> = cases.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), cases.len(), "case ids must be unique");
    // Expanding twice gives the same order.
    assert_eq!(expand(&sweep), cases);
    assert!(sweep.direct && sweep.time_based, "direct and time_based default to true");
}

struct Golden {
    file: &'static str,
    toml: &'static str,
    case_id: &'static str,
    target_path: &'static str,
}

const GOLDEN: &[Golden] = &[
    Golden {
        file: "e3_xfs_randread_bs8KiB_j4_qd16.fio",
        toml: E3,
        case_id: "fio/e3/xfs/randread/bs8KiB/j4/qd16/f1/s50MB",
        target_path: "/run/sb/stowbench-fio-r1-xfs/mnt/data",
    },
    Golden {
        file: "e4_dir_randrw70_f8_shared.fio",
        toml: r#"
[[fio]]
name = "e4"
target = { dir = "/srv/data", label = "array1" }
rw = ["randrw:70"]
bs = ["8KiB"]
numjobs = [16]
iodepth = [4]
nrfiles = [1, 2, 4, 8, 16]
size = "160GiB"
share_files = true
extra = { norandommap = true, randrepeat = 0, fsync_on_close = 1 }
"#,
        case_id: "fio/e4/array1/randrw70/bs8KiB/j16/qd4/f8/s160GiB",
        target_path: "/srv/data/stowbench-fio-r1-array1/data",
    },
    Golden {
        file: "device_write_psync_not_time_based.fio",
        toml: r#"
[[fio]]
name = "raw"
target = { device = "/dev/sdz", confirm_device = "/dev/sdz" }
rw = ["write"]
bs = ["512KiB"]
iodepth = [1]
size = "2.6MB"
ioengine = "psync"
time_based = false
runtime = "1m"
ramp_time = "0s"
"#,
        case_id: "fio/raw/sdz/write/bs512KiB/j1/qd1/f1/s2.6MB",
        target_path: "/dev/sdz",
    },
    Golden {
        file: "null_buffered_fractional_times.fio",
        toml: r#"
[[fio]]
name = "harness"
target = "/tmp/x:y"
rw = ["randread", "rw"]
rwmixread = 25
bs = ["4KiB"]
numjobs = [2]
iodepth = [32]
size = "1MiB"
ioengine = "null"
direct = false
runtime = "1.5s"
ramp_time = "250ms"
"#,
        case_id: "fio/harness/dir/rw25/bs4KiB/j2/qd32/f1/s1MiB",
        target_path: "/tmp/x:y/stowbench-fio-r1-dir/data",
    },
];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fio")
}

#[test]
fn job_files_match_the_golden_files() {
    let update = std::env::var("UPDATE_GOLDEN").is_ok();
    for golden in GOLDEN {
        let sweep = one(golden.toml);
        sweep.validate().unwrap_or_else(|e| panic!("{}: {e}", golden.file));
        let cases = expand(&sweep);
        let case = cases.iter().find(|c| c.id == golden.case_id).unwrap_or_else(|| panic!("no case {}", golden.case_id));
        let text = render_job(case, Path::new(golden.target_path));
        let path = golden_dir().join(golden.file);
        if update {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
        assert_eq!(text, expected, "{} differs from its golden file", golden.file);
    }
}

#[test]
fn rendered_sizes_and_times_are_plain_integers() {
    for golden in GOLDEN {
        let sweep = one(golden.toml);
        for case in expand(&sweep) {
            let text = render_job(&case, Path::new(golden.target_path));
            for line in text.lines().filter(|l| !l.starts_with(';')) {
                let Some((key, value)) = line.split_once('=') else { continue };
                match key {
                    "size" | "bs" | "nrfiles" | "numjobs" | "iodepth" => {
                        assert!(value.chars().all(|c| c.is_ascii_digit()), "{}: {line}", case.id)
                    }
                    "runtime" | "ramp_time" => {
                        let digits = value.strip_suffix("ms").unwrap_or("x");
                        assert!(digits.chars().all(|c| c.is_ascii_digit()), "{}: {line}", case.id)
                    }
                    _ => {}
                }
            }
        }
    }
    // "2.6MB" is exactly 2,600,000 bytes, never fio's 2.
    let device = one(GOLDEN[2].toml);
    assert!(render_job(&expand(&device)[0], Path::new("/dev/sdz")).contains("\nsize=2600000\n"));
}

#[test]
fn golden_job_files_pass_fio_parse_only() {
    if !fio_support::fio_available("golden_job_files_pass_fio_parse_only") {
        return;
    }
    for entry in std::fs::read_dir(golden_dir()).unwrap().flatten() {
        let out = std::process::Command::new("fio").arg("--parse-only").arg(entry.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !stderr.contains("dropped"), "{}: {stderr}", entry.path().display());
    }
}

#[test]
fn parse_errors_name_the_field() {
    let base = |extra: &str| format!("[[fio]]\nname = \"t\"\ntarget = \"/tmp\"\nrw = [\"randread\"]\nbs = [\"4KiB\"]\nsize = \"1MiB\"\n{extra}");
    assert!(problem(&base("iodepht = [1]")).contains("unknown field `iodepht`"));
    assert!(problem("[[fio]]\nname = \"t\"\ntarget = \"/tmp\"\nrw = [\"reed\"]\nbs = [\"4KiB\"]\nsize = \"1MiB\"").contains("unknown rw mode \"reed\""));
    let fio_style = "[[fio]]\nname = \"t\"\ntarget = \"/tmp\"\nrw = [\"read\"]\nbs = [\"2.6m\"]\nsize = \"1MiB\"";
    assert!(problem(fio_style).contains("unknown unit \"m\""), "{}", problem(fio_style));
    let target = |t: &str| format!("[[fio]]\nname = \"t\"\ntarget = {t}\nrw = [\"read\"]\nbs = [\"4KiB\"]\nsize = \"1MiB\"");
    assert!(problem(&target("{ fs = \"xfs\", sise = \"1GiB\" }")).contains("unknown field `sise`"));
    assert!(problem(&target("{ fs = \"zfs\", size = \"1GiB\" }")).contains("unknown filesystem \"zfs\""));
    assert!(problem(&target("{ fs = \"xfs\" }")).contains("needs `size`"));
    assert!(problem(&target("{ device = \"/dev/sdz\" }")).contains("confirm_device = \"/dev/sdz\""));
    assert!(problem(&target("{ dir = \"/a\", fs = \"xfs\" }")).contains("exactly one of"));
    assert!(problem(&target("\"/tmp\"\nruntime = \"30\"")).contains("no unit"));
    assert!(problem(&target("5")).contains("neither a directory path"));
}

#[test]
fn validation_errors_name_the_field_and_the_fix() {
    // Defaults for the keys a case does not set itself (TOML refuses duplicate keys).
    let table = |body: &str| {
        let mut text = String::from("[[fio]]\n");
        for (key, value) in [("name", "\"t\""), ("rw", "[\"randread\"]"), ("bs", "[\"4KiB\"]"), ("size", "\"64MiB\"")] {
            if !body.starts_with(&format!("{key} =")) && !body.contains(&format!("\n{key} =")) {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        text + body
    };
    let cases = [
        ("target = { device = \"/dev/sdz\", confirm_device = \"/dev/sdy\" }", "target.confirm_device", "character for character"),
        ("target = \"/tmp\"\nioengine = \"psync\"\niodepth = [1, 8]", "iodepth", "libaio"),
        ("target = \"/tmp\"\nextra = { zonesize = \"2.6m\" }", "extra.zonesize", "2.6m is 2 bytes"),
        ("target = \"/tmp\"\nextra = { filename = \"/dev/sda\" }", "extra.filename", "sets `filename` itself"),
        ("target = { fs = \"xfs\", size = \"100MiB\" }", "target.size", "at least 300MiB"),
        ("target = { fs = \"ext4\", size = \"64MiB\" }\nnumjobs = [4]", "target.size", "85 %"),
        ("target = [\"/tmp\", \"/var/tmp\"]", "target", "label"),
        ("target = \"/tmp\"\nruntime = \"1500us\"", "runtime", "milliseconds"),
        ("target = \"/tmp\"\nnrfiles = [3]", "size", "multiple of 3"),
        ("target = \"/tmp\"\nnumjobs = [0]", "numjobs", "1 to 1024"),
        ("target = \"/tmp\"\nbs = [\"1000B\"]", "bs", "multiple of 512"),
        ("target = \"/tmp\"\nname = \"a b\"", "name", "letters"),
        ("target = { fs = \"tmpfs\", size = \"1GiB\", mkfs_options = \"-m 0\" }", "target.mkfs_options", "mount_options"),
        ("target = { device = \"/dev/sdz\", confirm_device = \"/dev/sdz\" }\nnrfiles = [2]", "nrfiles", "one file"),
    ];
    for (body, field, hint) in cases {
        let message = problem(&table(body));
        assert!(message.contains(&format!("field `{field}`")), "{body}\n=> {message}");
        assert!(message.contains(hint), "{body}\n=> {message} (expected hint \"{hint}\")");
    }
}

#[test]
fn repeats_are_whole_passes_with_their_own_ids() {
    let sweep = one("[[fio]]\nname = \"r\"\ntarget = \"/tmp\"\nrw = [\"read\"]\nbs = [\"4KiB\"]\niodepth = [1, 2]\nsize = \"1MiB\"\nrepeat = 2");
    sweep.validate().unwrap();
    let ids: Vec<String> = expand(&sweep).into_iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [
            "fio/r/dir/read/bs4KiB/j1/qd1/f1/s1MiB/r1",
            "fio/r/dir/read/bs4KiB/j1/qd2/f1/s1MiB/r1",
            "fio/r/dir/read/bs4KiB/j1/qd1/f1/s1MiB/r2",
            "fio/r/dir/read/bs4KiB/j1/qd2/f1/s1MiB/r2",
        ]
    );
    assert!(problem("[[fio]]\nname = \"r\"\ntarget = \"/tmp\"\nrw = [\"read\"]\nbs = [\"4KiB\"]\nsize = \"1MiB\"\nrepeat = 0").contains("field `repeat`"));
}

/// A chart point's p99 of a mixed pattern is the worse direction's: a randrw mix whose writes
/// wait 1.9 ms once showed its reads' 165 µs alone.
#[test]
fn a_mixed_pattern_point_keeps_its_slower_direction_p99() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/fio-a.json")).unwrap();
    let report: stowbench::report::model::RunReport = serde_json::from_str(&text).unwrap();
    let mut case = report.fio_cases.iter().find(|c| c.read.is_some()).unwrap().clone();
    let mut write = case.read.clone().unwrap();
    write.lat_ns_p99 = Some(1_940_000);
    case.read.as_mut().unwrap().lat_ns_p99 = Some(165_000);
    case.write = Some(write);
    let charts = stowbench::fio::series::iops_vs_iodepth(std::slice::from_ref(&case), case.numjobs);
    let p99: Vec<Option<u64>> = charts.iter().flat_map(|c| &c.series).flat_map(|s| &s.points).map(|p| p.lat_ns_p99).collect();
    assert_eq!(p99, [Some(1_940_000)]);
}
