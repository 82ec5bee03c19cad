//! Clocks for the runner: for real backends the CPU's time-stamp counter where the kernel itself
//! trusts it (as fio's `clocksource=cpu`), else the monotonic clock; a virtual one for `sim`.
//!
//! The virtual clock keeps one time per thread, advanced only by the `sim` backend, so tests of
//! the runner, statistics and reports are exact and repeatable whatever the machine is doing.

use std::cell::Cell;
use std::sync::OnceLock;

/// A source of nanosecond timestamps; only differences between readings are meaningful.
pub trait Clock: Send + Sync {
    /// Nanoseconds since an arbitrary origin, never decreasing on one thread.
    fn now_ns(&self) -> u64;
    /// Whether time is virtual (sim) rather than measured.
    fn is_virtual(&self) -> bool {
        false
    }
    /// Lets `ns` nanoseconds pass on this thread (an open-loop worker waiting for its next start).
    fn sleep_ns(&self, ns: u64) {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
    }
}

/// The operating system's monotonic clock.
pub struct MonotonicClock;

/// CLOCK_MONOTONIC in nanoseconds. Read directly rather than through `Instant::elapsed`, whose
/// checked subtraction and u128 conversion cost a third of a reading, and the runner reads the
/// clock several times per operation (callgrind: 520 instructions per operation before).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the local we pass; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC_COARSE in nanoseconds: the time of the last timer tick (a few milliseconds
/// behind), read without the TSC. For ages measured in tenths of a second on every operation,
/// where a full reading would cost as much as the runner's own (sqlite's held snapshot).
pub fn coarse_monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `monotonic_ns`; CLOCK_MONOTONIC_COARSE exists on Linux since 2.6.32.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The first reading, so timestamps start near zero.
fn origin_ns() -> u64 {
    static ORIGIN: OnceLock<u64> = OnceLock::new();
    *ORIGIN.get_or_init(monotonic_ns)
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        // Never below the origin: CLOCK_MONOTONIC does not go back.
        monotonic_ns().saturating_sub(origin_ns())
    }
}

/// Which clock times the operations of real backends (`stowbench run --clock`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClockChoice {
    /// The TSC where it is usable, else `clock_gettime`.
    #[default]
    Auto,
    /// The TSC; refused where it is not usable.
    Tsc,
    /// `clock_gettime(CLOCK_MONOTONIC)`.
    Monotonic,
}

impl ClockChoice {
    /// The names `--clock` takes.
    pub const NAMES: [&'static str; 3] = ["auto", "tsc", "monotonic"];

    /// Parses a `--clock` value.
    pub fn parse(text: &str) -> Result<ClockChoice, String> {
        match text {
            "auto" => Ok(ClockChoice::Auto),
            "tsc" => Ok(ClockChoice::Tsc),
            "monotonic" => Ok(ClockChoice::Monotonic),
            other => Err(format!("\"{other}\" is not a clock; use auto, tsc or monotonic")),
        }
    }
}

/// The clock a run times real backends with, and what to say of it in the report. Made only by
/// `choose`, so `tsc` is set exactly when `clock` is the TSC.
pub struct MeasuringClock {
    clock: std::sync::Arc<dyn Clock>,
    /// Its rate and why it was chosen.
    detail: String,
    /// The TSC itself when `clock` is it, for the drift check (`None` for `clock_gettime`).
    tsc: Option<std::sync::Arc<TscClock>>,
}

impl MeasuringClock {
    /// Picks the clock for `choice`. A vDSO `clock_gettime` cost 40–50 ns on this project's
    /// machines and `rdtsc` 13–18 ns, and a verified get reads the clock five times
    /// (docs/performance/sqlite-vs-kvtest.md, "The clock"). Refused only when the TSC was asked for by name and
    /// cannot be trusted.
    pub fn choose(choice: ClockChoice) -> Result<MeasuringClock, String> {
        let monotonic = |why: String| MeasuringClock::monotonic(format!("clock_gettime(CLOCK_MONOTONIC); {why}"));
        if choice == ClockChoice::Monotonic {
            return Ok(monotonic("asked for with --clock monotonic".into()));
        }
        match TscClock::calibrated() {
            Ok(tsc) => Ok(MeasuringClock::tsc(tsc)),
            Err(why) if choice == ClockChoice::Tsc => Err(format!("--clock tsc: the TSC cannot time this run: {why}; use --clock monotonic (or auto)")),
            Err(why) => Ok(monotonic(format!("the TSC is not used: {why}"))),
        }
    }

    fn monotonic(detail: String) -> MeasuringClock {
        MeasuringClock { clock: std::sync::Arc::new(MonotonicClock), detail, tsc: None }
    }

    /// One `Arc` of the TSC serves both as the run's clock and for the drift check.
    fn tsc(tsc: std::sync::Arc<TscClock>) -> MeasuringClock {
        let detail = format!(
            "the CPU's invariant time-stamp counter read directly, at {:.3} GHz (calibrated against CLOCK_MONOTONIC over {} ms); the kernel's clocksource is tsc",
            tsc.ticks_per_ns(),
            CALIBRATION.as_millis()
        );
        MeasuringClock { clock: tsc.clone(), detail, tsc: Some(tsc) }
    }

    /// The clock.
    pub fn clock(&self) -> &std::sync::Arc<dyn Clock> {
        &self.clock
    }

    /// Its rate and why it was chosen, for the report.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// "tsc" or "clock_gettime", as the report names it.
    pub fn source(&self) -> &'static str {
        if self.tsc.is_some() {
            "tsc"
        } else {
            "clock_gettime"
        }
    }

    /// How far the TSC's time ran from CLOCK_MONOTONIC since calibration, in parts per million
    /// (None for `clock_gettime`): a check that the calibration held over the run.
    pub fn drift_ppm(&self) -> Option<f64> {
        self.tsc.as_ref().map(|tsc| tsc.drift_ppm())
    }
}

/// How long the TSC is calibrated against CLOCK_MONOTONIC: a paired reading is good to about
/// 50 ns, so the rate is good to about 2.5 parts per million.
const CALIBRATION: std::time::Duration = std::time::Duration::from_millis(20);

/// The CPU's time-stamp counter, converted to nanoseconds in `MonotonicClock`'s frame (the two
/// read the same time to within the calibration's error). Used only where the kernel's own
/// clocksource is the TSC, which means the kernel found it invariant and in step across CPUs.
pub struct TscClock {
    anchor_ticks: u64,
    anchor_ns: u64,
    /// Nanoseconds per tick, in units of 2^-32.
    ns_per_tick_q32: u64,
}

thread_local! {
    /// The last TSC reading of this thread: readings on one thread never go back, even if the
    /// thread moved to a CPU whose counter is a few cycles behind.
    static LAST_TSC_NS: Cell<u64> = const { Cell::new(0) };
}

impl TscClock {
    /// Calibrates once per process (20 ms); the reason when the TSC is not to be trusted.
    pub fn calibrated() -> Result<std::sync::Arc<TscClock>, String> {
        static ONCE: OnceLock<Result<std::sync::Arc<TscClock>, String>> = OnceLock::new();
        ONCE.get_or_init(|| {
            tsc_unusable().map_or(Ok(()), Err)?;
            let (ticks0, ns0) = paired_reading();
            std::thread::sleep(CALIBRATION);
            let (ticks1, ns1) = paired_reading();
            let (ticks, ns) = (ticks1.saturating_sub(ticks0), ns1.saturating_sub(ns0));
            let per_ns = ticks as f64 / ns.max(1) as f64;
            if !(0.1..=20.0).contains(&per_ns) {
                return Err(format!("its rate came out at {per_ns:.3} GHz, which no CPU runs at"));
            }
            Ok(std::sync::Arc::new(TscClock { anchor_ticks: ticks0, anchor_ns: ns0, ns_per_tick_q32: (((ns as u128) << 32) / ticks as u128) as u64 }))
        })
        .clone()
    }

    /// Ticks per nanosecond: the TSC's rate in GHz.
    pub fn ticks_per_ns(&self) -> f64 {
        (1u64 << 32) as f64 / self.ns_per_tick_q32 as f64
    }

    fn ns_at(&self, ticks: u64) -> u64 {
        self.anchor_ns + ((ticks.saturating_sub(self.anchor_ticks) as u128 * self.ns_per_tick_q32 as u128) >> 32) as u64
    }

    fn drift_ppm(&self) -> f64 {
        let (ticks, ns) = paired_reading();
        let elapsed = ns.saturating_sub(self.anchor_ns).max(1) as f64;
        (self.ns_at(ticks) as f64 - ns as f64) / elapsed * 1e6
    }
}

impl Clock for TscClock {
    fn now_ns(&self) -> u64 {
        let ns = self.ns_at(read_tsc());
        LAST_TSC_NS.with(|last| {
            let ns = ns.max(last.get());
            last.set(ns);
            ns
        })
    }
}

/// A TSC reading and the `MonotonicClock` time at its moment: the best of a few tries, each the
/// middle of two TSC readings around one `clock_gettime`.
fn paired_reading() -> (u64, u64) {
    (0..9)
        .map(|_| {
            let before = read_tsc();
            let ns = MonotonicClock.now_ns();
            let after = read_tsc();
            (after.saturating_sub(before), before / 2 + after / 2, ns)
        })
        .min_by_key(|&(width, ..)| width)
        .map(|(_, ticks, ns)| (ticks, ns))
        .unwrap_or_default()
}

#[cfg(target_arch = "x86_64")]
fn read_tsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and only reads a counter. Not serialising (as
    // fio's): it may run a few cycles early, far below an operation's time.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn read_tsc() -> u64 {
    0
}

/// Why the TSC cannot time a run here, if it cannot: the kernel must use it as its own
/// clocksource (it checks that the counter is invariant and in step across CPUs, and switches
/// away when it is not) and the CPU must say it is invariant.
fn tsc_unusable() -> Option<String> {
    if cfg!(not(target_arch = "x86_64")) {
        return Some("this is not an x86-64 CPU".into());
    }
    let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource").unwrap_or_default();
    let source = source.trim();
    if source != "tsc" {
        return Some(format!("the kernel's clocksource is {}, not tsc", if source.is_empty() { "unknown" } else { source }));
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> =
        cpuinfo.lines().find_map(|l| l.strip_prefix("flags")).map(|f| f.trim_start_matches([' ', '\t', ':']).split_whitespace().collect()).unwrap_or_default();
    let missing: Vec<&str> = ["constant_tsc", "nonstop_tsc"].into_iter().filter(|f| !flags.contains(f)).collect();
    (!missing.is_empty()).then(|| format!("the CPU does not say its TSC is invariant (no {} in /proc/cpuinfo)", missing.join(", ")))
}

thread_local! {
    static VIRTUAL_NS: Cell<u64> = const { Cell::new(0) };
}

/// Virtual time, one counter per thread, starting at zero on every new thread.
pub struct VirtualClock;

impl VirtualClock {
    /// Advances this thread's virtual time by `ns`.
    pub fn advance(ns: u64) {
        VIRTUAL_NS.with(|t| t.set(t.get() + ns));
    }
}

impl Clock for VirtualClock {
    fn now_ns(&self) -> u64 {
        VIRTUAL_NS.with(|t| t.get())
    }
    fn is_virtual(&self) -> bool {
        true
    }
    fn sleep_ns(&self, ns: u64) {
        VirtualClock::advance(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_names_parse_and_a_wrong_one_is_named() {
        assert_eq!(ClockChoice::NAMES.map(|n| ClockChoice::parse(n).unwrap()), [ClockChoice::Auto, ClockChoice::Tsc, ClockChoice::Monotonic]);
        assert_eq!(ClockChoice::parse("cpu").unwrap_err(), "\"cpu\" is not a clock; use auto, tsc or monotonic");
    }

    #[test]
    fn monotonic_is_used_when_asked_for() {
        let chosen = MeasuringClock::choose(ClockChoice::Monotonic).unwrap();
        assert_eq!((chosen.source(), chosen.drift_ppm()), ("clock_gettime", None));
        assert!(chosen.detail.contains("--clock monotonic"), "{}", chosen.detail);
    }

    /// Where the kernel keeps time with the TSC (this project's machines do), the TSC clock must
    /// read the monotonic clock's time at its rate, and never go back on a thread; elsewhere
    /// `auto` falls back and `tsc` is refused with the reason.
    #[test]
    fn the_tsc_clock_keeps_the_monotonic_clocks_time_or_is_refused_with_a_reason() {
        match tsc_unusable() {
            None => {
                let chosen = MeasuringClock::choose(ClockChoice::Auto).unwrap();
                assert_eq!(chosen.source(), "tsc", "{}", chosen.detail);
                let tsc = TscClock::calibrated().unwrap();
                assert!((0.1..=20.0).contains(&tsc.ticks_per_ns()));
                let mut last = tsc.now_ns();
                for _ in 0..1_000_000 {
                    let now = tsc.now_ns();
                    assert!(now >= last, "went back from {last} to {now}");
                    last = now;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
                // A wrong rate (or fixed-point slip) is off by far more; the calibration is
                // good to a few ppm, and each paired reading is the best of nine.
                let drift = chosen.drift_ppm().unwrap();
                assert!(drift.abs() < 1000.0, "drift {drift} ppm");
                let (a, b) = (tsc.now_ns(), MonotonicClock.now_ns());
                assert!(a.abs_diff(b) < 50_000_000, "tsc {a} against monotonic {b}");
            }
            Some(why) => {
                let refused = MeasuringClock::choose(ClockChoice::Tsc).err().unwrap();
                assert!(refused.contains(&why), "{refused}");
                let chosen = MeasuringClock::choose(ClockChoice::Auto).unwrap();
                assert_eq!(chosen.source(), "clock_gettime");
                assert!(chosen.detail.contains(&why), "{}", chosen.detail);
            }
        }
    }
}
