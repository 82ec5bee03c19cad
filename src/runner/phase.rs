//! One measured phase: worker threads behind a start barrier, each with its own session, issuing
//! operations until a stop condition, recording into their own stats.
//!
//! Timing covers only the backend call. Payloads up to `PREBUFFER_MAX_BYTES` are generated before
//! the clock starts and verified after it stops; larger ones stream through the generator or the
//! verifier, whose own time is measured and subtracted, so no object is ever held whole.

use super::keytable::KeyTable;
use crate::backend::{BResult, ErrorKind, Session};
use crate::clock::Clock;
use crate::job::{Op, PhasePlan, Stop};
use crate::stats::WorkerStats;
use crate::workload::keys::{unit, KeyChooser};
use crate::workload::payload::{Mismatch, PayloadSpec};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

/// Objects up to this size are generated and checked outside the timed region, in bytes.
pub const PREBUFFER_MAX_BYTES: u64 = 4 << 20;

/// What every worker of a phase shares.
pub struct PhaseContext<'a> {
    /// The phase.
    pub phase: &'a PhasePlan,
    /// Stop condition (the phase's, or its warm-up's).
    pub stop: Stop,
    /// Distinct keys.
    pub objects: u64,
    /// How payloads are made.
    pub payload: PayloadSpec,
    /// Check gets.
    pub verify: bool,
    /// Retries per failed operation.
    pub retries: u32,
    /// Key state.
    pub keys: &'a KeyTable,
    /// The clock.
    pub clock: &'a dyn Clock,
    /// Set on Ctrl-C.
    pub interrupted: &'a AtomicBool,
    /// Seed for key and mix choices.
    pub seed: u64,
    /// Operations started so far (all workers); also read by the progress display.
    pub next_op: AtomicU64,
    /// Bytes claimed so far (for a bytes stop).
    pub bytes_claimed: AtomicU64,
    /// Objects verified, mismatches, and the first mismatch.
    pub verification: Mutex<(u64, u64, Option<Mismatch>)>,
}

impl<'a> PhaseContext<'a> {
    /// Operations per index bucket: about 100 buckets over a counted phase.
    pub fn index_width(&self) -> u64 {
        match (self.stop.count, self.stop.bytes) {
            (Some(count), _) => count.div_ceil(100).max(1),
            (None, Some(bytes)) => (bytes / self.payload.size.mean_bytes().max(1)).div_ceil(100).max(1),
            (None, None) => 64,
        }
    }
}

/// The default stop of a phase with no stop condition: one pass over the key space.
pub fn effective_stop(stop: Stop, objects: u64) -> Stop {
    if stop.count.is_none() && stop.duration_ns.is_none() && stop.bytes.is_none() {
        Stop { count: Some(objects), ..stop }
    } else {
        stop
    }
}

/// Runs the phase on `sessions` (one thread each); returns per-worker stats, or what a worker
/// thread panicked with (a backend bug), so the case fails instead of the whole run.
pub fn run(ctx: &PhaseContext, sessions: &mut [Box<dyn Session>], on_wait: impl Fn()) -> Result<Vec<WorkerStats>, String> {
    let barrier = Barrier::new(sessions.len());
    let origin = if ctx.clock.is_virtual() { 0 } else { ctx.clock.now_ns() };
    let width = ctx.index_width();
    let workers = sessions.len() as u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .iter_mut()
            .enumerate()
            .map(|(w, session)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut stats = WorkerStats::new(origin, width);
                    barrier.wait();
                    worker(ctx, session.as_mut(), w as u64, workers, &mut stats);
                    stats
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            on_wait();
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        handles
            .into_iter()
            .enumerate()
            .map(|(w, h)| {
                h.join().map_err(|panic| {
                    let what = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                    format!("worker {w} panicked in phase {}: {}", ctx.phase.label, what.unwrap_or_else(|| "(no message)".into()))
                })
            })
            .collect()
    })
}

/// Reusable per-worker buffers.
struct Buffers {
    body: Vec<u8>,
    read: Vec<u8>,
}

fn worker(ctx: &PhaseContext, session: &mut dyn Session, w: u64, workers: u64, stats: &mut WorkerStats) {
    let stream = w + 1 + (ctx.phase.label.len() as u64) * 1000;
    let mut chooser = KeyChooser::new(ctx.phase.key_order, ctx.objects, ctx.seed, stream);
    let mut mix_rng = Xoshiro256PlusPlus::seed_from_u64(ctx.seed ^ (stream << 32));
    let total_weight: u32 = ctx.phase.mix.iter().map(|(_, wt)| wt).sum();
    let mut bufs = Buffers { body: Vec::new(), read: Vec::new() };
    stats.start_ns = ctx.clock.now_ns();
    stats.end_ns = stats.start_ns;
    let deadline = ctx.stop.duration_ns.map(|d| stats.start_ns + d);
    loop {
        if ctx.interrupted.load(Ordering::Relaxed) || deadline.is_some_and(|d| ctx.clock.now_ns() >= d) {
            break;
        }
        let index = if ctx.clock.is_virtual() {
            // Simulated time: a fixed share per worker, so results never depend on OS scheduling.
            let local = stats.attempted() + stats.misses();
            ctx.next_op.fetch_add(1, Ordering::Relaxed);
            w + local * workers
        } else {
            ctx.next_op.fetch_add(1, Ordering::Relaxed)
        };
        if ctx.stop.count.is_some_and(|c| index >= c) {
            break;
        }
        let op = pick(&ctx.phase.mix, total_weight, &mut mix_rng);
        let key = chooser.next(index, ctx.objects);
        if !one_op(ctx, session, op, key, index, &mut bufs, stats) {
            break;
        }
    }
    stats.end_ns = stats.end_ns.max(stats.start_ns);
}

fn pick(mix: &[(Op, u32)], total: u32, rng: &mut Xoshiro256PlusPlus) -> Op {
    if mix.len() == 1 {
        return mix[0].0;
    }
    let mut x = unit(rng) * total as f64;
    for (op, weight) in mix {
        if x < *weight as f64 {
            return *op;
        }
        x -= *weight as f64;
    }
    mix[mix.len() - 1].0
}

fn retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Timeout | ErrorKind::Conflict | ErrorKind::Connection | ErrorKind::Io | ErrorKind::Other)
}

/// Runs `attempt` up to 1 + retries times; returns the result, the attempts' time not spent in
/// our own payload code, and the retries used.
fn timed<T>(ctx: &PhaseContext, mut attempt: impl FnMut() -> (BResult<T>, u64)) -> (BResult<T>, u64, u32) {
    let start = ctx.clock.now_ns();
    let mut own_ns = 0;
    let mut retries = 0;
    loop {
        let (result, own) = attempt();
        own_ns += own;
        match result {
            Err(e) if retries < ctx.retries && retryable(e.kind) => retries += 1,
            other => return (other, (ctx.clock.now_ns() - start).saturating_sub(own_ns), retries),
        }
    }
}

/// One operation; returns false when a bytes stop says the phase is over.
fn one_op(ctx: &PhaseContext, session: &mut dyn Session, op: Op, key: u64, index: u64, bufs: &mut Buffers, stats: &mut WorkerStats) -> bool {
    let name = crate::workload::keys::key_name(key);
    match op {
        Op::Put => {
            let generation = ctx.keys.next_generation(key);
            let size = ctx.payload.size_of(key, generation);
            if let Some(limit) = ctx.stop.bytes {
                if ctx.bytes_claimed.fetch_add(size, Ordering::Relaxed) >= limit {
                    return false;
                }
            }
            let small = size <= PREBUFFER_MAX_BYTES;
            if small {
                bufs.body.clear();
                ctx.payload.reader(key, generation).read_to_end(&mut bufs.body).expect("generation never fails");
            }
            let (result, latency, retries) = timed(ctx, || {
                if small {
                    (session.put(&name, &mut &bufs.body[..], size), 0)
                } else {
                    let mut body = SelfTimed { inner: ctx.payload.reader(key, generation), clock: ctx.clock, own_ns: 0 };
                    let r = session.put(&name, &mut body, size);
                    (r, body.own_ns)
                }
            });
            finish(ctx, stats, op, index, latency, retries, result.map(|()| size), |_| ctx.keys.stored(key, generation, size));
        }
        Op::Get => {
            let known = ctx.keys.get(key);
            let expected_size = known.map(|(g, _)| ctx.payload.size_of(key, g)).unwrap_or(0);
            let hint = known.map(|(g, _)| g).unwrap_or(0);
            if !ctx.verify || expected_size <= PREBUFFER_MAX_BYTES {
                let (result, latency, retries) = timed(ctx, || {
                    bufs.read.clear();
                    if ctx.verify {
                        (session.get(&name, &mut bufs.read), 0)
                    } else {
                        (session.get(&name, &mut std::io::sink()), 0)
                    }
                });
                if known.is_none() && is_not_found(&result) {
                    stats.miss(op);
                    return true;
                }
                let checked = result.and_then(|n| if ctx.verify { check(ctx, ctx.payload.verify(key, hint, &bufs.read)).map(|()| n) } else { Ok(n) });
                finish(ctx, stats, op, index, latency, retries, checked, |_| ());
            } else {
                let mut outcome = None;
                let (result, latency, retries) = timed(ctx, || {
                    let mut sink = SelfTimed { inner: ctx.payload.verifier(key, hint), clock: ctx.clock, own_ns: 0 };
                    let r = session.get(&name, &mut sink);
                    let own = sink.own_ns;
                    outcome = Some(sink.inner.finish());
                    (r, own)
                });
                let checked = result.and_then(|n| check(ctx, outcome.expect("at least one attempt ran")).map(|()| n));
                finish(ctx, stats, op, index, latency, retries, checked, |_| ());
            }
        }
        Op::Delete | Op::Head => {
            let known = ctx.keys.get(key);
            let (result, latency, retries) =
                timed(ctx, || if op == Op::Delete { (session.delete(&name).map(|()| 0), 0) } else { (session.head(&name).map(|_| 0), 0) });
            if known.is_none() && is_not_found(&result) {
                stats.miss(op);
                return true;
            }
            finish(ctx, stats, op, index, latency, retries, result, |_| if op == Op::Delete { ctx.keys.deleted(key) });
        }
    }
    true
}

fn is_not_found<T>(r: &BResult<T>) -> bool {
    matches!(r, Err(e) if e.kind == ErrorKind::NotFound)
}

/// Counts a verification and turns a mismatch into a `Corrupt` error.
fn check(ctx: &PhaseContext, outcome: Result<(), Mismatch>) -> BResult<()> {
    let mut v = ctx.verification.lock().expect("verification lock");
    v.0 += 1;
    match outcome {
        Ok(()) => Ok(()),
        Err(m) => {
            v.1 += 1;
            let message = format!("{}: at byte {}: {}", m.key, m.offset_bytes, m.detail);
            v.2.get_or_insert(m);
            Err(crate::backend::BackendError::new(ErrorKind::Corrupt, message))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(ctx: &PhaseContext, stats: &mut WorkerStats, op: Op, index: u64, latency: u64, retries: u32, result: BResult<u64>, on_ok: impl FnOnce(u64)) {
    let end = ctx.clock.now_ns();
    stats.end_ns = end;
    match result {
        Ok(bytes) => {
            on_ok(bytes);
            stats.success(op, index, end, latency, bytes, retries);
        }
        Err(e) => stats.failure(op, end, e.kind, retries),
    }
}

/// Wraps our own payload generator or verifier and measures the time spent inside it, so that
/// time can be taken out of the operation's latency.
struct SelfTimed<'c, T> {
    inner: T,
    clock: &'c dyn Clock,
    own_ns: u64,
}

impl<T: Read> Read for SelfTimed<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let t = self.clock.now_ns();
        let r = self.inner.read(buf);
        self.own_ns += self.clock.now_ns() - t;
        r
    }
}

impl<T: Write> Write for SelfTimed<'_, T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let t = self.clock.now_ns();
        let r = self.inner.write(buf);
        self.own_ns += self.clock.now_ns() - t;
        r
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
