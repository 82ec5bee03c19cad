//! Live progress on stderr: a bar over cases with the current phase's operation count when stderr
//! is a terminal, nothing otherwise (like hyperfine); a failed case is reported either way.

use crate::job::CasePlan;
use crate::report::model::{CaseResult, CaseStatus};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Progress display for one run.
pub struct Progress {
    bar: Option<ProgressBar>,
    ticker: Option<Ticker>,
    lines: bool,
    current: Mutex<String>,
}

impl Progress {
    /// A display for `total` cases; `enabled = false` shows nothing.
    pub fn new(total: u64, enabled: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        match enabled && terminal {
            true => Self::drawn_on(total, ProgressDrawTarget::stderr()),
            false => Progress { bar: None, ticker: None, lines: enabled, current: Mutex::new(String::new()) },
        }
    }

    /// A bar drawn on `target`, kept moving by a ticker.
    fn drawn_on(total: u64, target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), target);
        bar.set_style(ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} cases  {msg}").expect("valid template").progress_chars("=> "));
        let ticker = Ticker::start(bar.clone());
        Progress { bar: Some(bar), ticker, lines: false, current: Mutex::new(String::new()) }
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
    pub fn done(&mut self) {
        if let Some(mut ticker) = self.ticker.take() {
            ticker.stop();
        }
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// How often the ticker redraws the bar.
const TICK_EVERY: Duration = Duration::from_millis(200);

/// Redraws the bar, so its elapsed time moves while a single operation runs for seconds: a lone
/// worker reports progress only between operations (runner::phase). Its thread leaves the file
/// table first (crate::threads) and touches no descriptor but stderr, so the lone worker stays
/// alone in the table. indicatif's own steady tick would share it.
struct Ticker {
    stopping: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    /// None when no thread can be started: the bar then moves between operations only.
    fn start(bar: ProgressBar) -> Option<Ticker> {
        let stopping = Arc::new(AtomicBool::new(false));
        let stop_seen = stopping.clone();
        let thread = std::thread::Builder::new()
            .spawn(move || {
                crate::threads::leave_file_table(&[]);
                crate::threads::name_current_thread("stowbench-tick");
                while !stop_seen.load(Ordering::Acquire) {
                    bar.tick();
                    std::thread::park_timeout(TICK_EVERY);
                }
            })
            .ok()?;
        Some(Ticker { stopping, thread: Some(thread) })
    }

    fn stop(&mut self) {
        self.stopping.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A terminal that keeps the last line drawn.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            if !s.trim().is_empty() {
                *self.0.lock().expect("screen lock") = s.to_string();
            }
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_elapsed_time_moves_while_no_progress_is_reported_and_the_ticker_keeps_its_own_file_table() {
        let screen = Screen::default();
        let mut progress = Progress::drawn_on(1, ProgressDrawTarget::term_like(Box::new(screen.clone())));
        // Nothing calls the progress from here on, as while a lone worker runs one long operation.
        let seen_at = std::time::Instant::now();
        let moved = loop {
            let line = screen.0.lock().expect("screen lock").clone();
            if line.starts_with("00:00:0") && !line.starts_with("00:00:00") {
                break true;
            }
            if seen_at.elapsed() > Duration::from_secs(30) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(moved, "the bar was not redrawn after its first second: {:?}", screen.0.lock().expect("screen lock"));
        let here = crate::threads::current_tid();
        let tickers: Vec<libc::pid_t> = std::fs::read_dir("/proc/self/task")
            .expect("list this process's threads")
            .filter_map(|task| task.ok()?.file_name().to_str()?.parse().ok())
            .filter(|tid| std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).is_ok_and(|comm| comm.trim_end() == "stowbench-tick"))
            .collect();
        assert!(!tickers.is_empty(), "the ticker thread names itself");
        for tid in tickers {
            assert_eq!(crate::threads::share_file_table(here, tid), Some(false), "ticker {tid} left the file table");
        }
        progress.done(); // joins the ticker: a run never leaves it behind
        assert!(progress.ticker.is_none());
    }
}
