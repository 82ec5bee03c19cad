//! Live progress on stderr: a bar over cases with the current phase's operation count when stderr
//! is a terminal; one line per finished case otherwise (so CI logs show where a run is).

use crate::job::CasePlan;
use crate::report::model::CaseResult;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Progress display for one run.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    total: u64,
    finished: AtomicU64,
    current: Mutex<String>,
}

impl Progress {
    /// A display for `total` cases; `enabled = false` shows nothing.
    pub fn new(total: u64, enabled: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (enabled && terminal).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} cases  {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar
        });
        Progress { bar, lines: enabled && !terminal, total, finished: AtomicU64::new(0), current: Mutex::new(String::new()) }
    }

    /// A case begins.
    pub fn start_case(&self, case: &CasePlan) {
        *self.current.lock().expect("progress lock") = case.id.clone();
        if let Some(bar) = &self.bar {
            bar.set_message(case.id.clone());
        }
    }

    /// Called about every 50 ms while a phase runs.
    pub fn phase_tick(&self, phase: &str, ops_started: u64, planned: Option<u64>) {
        if let Some(bar) = &self.bar {
            let id = self.current.lock().expect("progress lock").clone();
            let ops = match planned {
                Some(p) => format!("{}/{p}", ops_started.min(p)),
                None => ops_started.to_string(),
            };
            bar.set_message(format!("{id}  {phase} {ops} ops"));
        }
    }

    /// A case finished.
    pub fn finish_case(&self, result: &CaseResult) {
        let finished = self.finished.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        if self.lines {
            eprintln!(
                "[{finished}/{}] {} {} in {}",
                self.total,
                result.case_id,
                result.status,
                crate::units::format_nanos(result.wall_ns)
            );
        }
        if result.status != "ok" {
            let why = result.failure.clone().unwrap_or_default();
            match &self.bar {
                Some(bar) => bar.println(format!("case {} failed: {why}", result.case_id)),
                None if self.lines => eprintln!("case {} failed: {why}", result.case_id),
                None => {}
            }
        }
    }

    /// The run is over.
    pub fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
