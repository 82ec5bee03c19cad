//! Rendering one case as the exact fio job file text that is checked, run and reported.
//!
//! Every size is a plain integer byte count and every time an integer with `ms`: fio truncates
//! fractions (`size=2.6m` is 2 bytes), so a value with a fraction never reaches it. Rendering is
//! a pure function (golden-file tested); it must never touch the disk.

use super::case::FioCase;
use super::spec::TargetSpec;
use std::fmt::Write;
use std::path::Path;

/// Latency percentiles requested from fio (at most 20, fio's limit).
pub const PERCENTILES: &str = "1:5:10:25:50:75:90:95:99:99.5:99.9:99.95:99.99";

/// The job file text for `case`, doing I/O in `target_path`: the data directory for directory and
/// filesystem targets, the device node for raw-device targets.
pub fn render_job(case: &FioCase, target_path: &Path) -> String {
    let mut out = String::new();
    let mut line = |text: &str| {
        out.push_str(text);
        out.push('\n');
    };
    line(&format!("; stowbench fio job file for case {}", case.id));
    line("; sizes are integer bytes and times integer milliseconds: fio truncates fractions (2.6m is 2 bytes)");
    line("[global]");
    line(&format!("ioengine={}", case.ioengine.name()));
    line(&format!("direct={}", u8::from(case.direct)));
    line(&format!("time_based={}", u8::from(case.time_based)));
    line(&format!("runtime={}ms", case.runtime.0 / 1_000_000));
    line(&format!("ramp_time={}ms", case.ramp_time.0 / 1_000_000));
    line("group_reporting=1");
    // Total latency (submission + completion) is what an application sees; report its percentiles.
    line("lat_percentiles=1");
    line("clat_percentiles=0");
    line(&format!("percentile_list={PERCENTILES}"));
    line(&target_lines(case, target_path));
    line(&format!("size={}", case.size.bytes()));
    line("");
    line(&format!("[{}]", case.job_name()));
    line(&format!("rw={}", case.rw.pattern.name()));
    if let Some(percent) = case.rwmixread_percent {
        line(&format!("rwmixread={percent}"));
    }
    line(&format!("bs={}", case.bs.bytes()));
    line(&format!("numjobs={}", case.numjobs));
    line(&format!("iodepth={}", case.iodepth));
    if !case.extra.is_empty() {
        line("; extra options from the sweep");
        for (key, value) in &case.extra {
            line(&format!("{key}={value}"));
        }
    }
    out
}

/// The lines that point fio at the target: `filename=` for a device, `directory=` and the file
/// naming for directories (names leave out the job name so consecutive cases reuse the files).
fn target_lines(case: &FioCase, target_path: &Path) -> String {
    let path = escape_path(target_path);
    let mut text = String::new();
    match case.target {
        TargetSpec::Device { .. } => {
            let _ = write!(text, "filename={path}");
        }
        TargetSpec::Dir { .. } | TargetSpec::Fs { .. } => {
            let name = if case.share_files { "stow.$filenum" } else { "stow.$jobnum.$filenum" };
            let _ = write!(text, "directory={path}\nfilename_format={name}\nnrfiles={}", case.nrfiles);
        }
    }
    text
}

/// fio splits `directory` and `filename` on ':'; a literal colon is written `\:`.
fn escape_path(path: &Path) -> String {
    path.display().to_string().replace(':', "\\:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colons_are_escaped() {
        assert_eq!(escape_path(Path::new("/mnt/a:b")), "/mnt/a\\:b");
    }
}
