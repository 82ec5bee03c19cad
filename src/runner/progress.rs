//! Live progress on stderr: a bar over cases with the current phase's operation count when stderr
//! is a terminal, nothing otherwise (like hyperfine); a failed case is reported either way.

use crate::job::CasePlan;
use crate::report::model::{CaseResult, CaseStatus};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;

/// Progress display for one run.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    current: Mutex<String>,
}

impl Progress {
    /// A display for `total` cases; `enabled = false` shows nothing.
    pub fn new(total: u64, enabled: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (enabled && terminal).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} cases  {msg}").expect("valid template").progress_chars("=> "));
            bar
        });
        Progress { bar, lines: enabled && !terminal, current: Mutex::new(String::new()) }
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
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        if result.status != CaseStatus::Ok {
            let why = result.failure.clone().unwrap_or_default();
            match &self.bar {
                Some(bar) => bar.println(format!("case {} failed: {why}", result.case_id)),
                None if self.lines => crate::say!("case {} failed: {why}", result.case_id),
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
