//! One operation of a worker: key-state bookkeeping, the timed backend call with retries, and the
//! payload work around it — generating bodies, hashing and checking what gets return.
//!
//! The payload work is stowbench's own, not the storage's: it is timed apart (`OwnTime`) and
//! taken out of each operation's latency **and** out of the worker's timestamps, so neither the
//! latency percentiles nor the throughput windows carry it. In closed-loop phases so is the
//! bookkeeping between operations (`OwnTime::bookkeeping_ns`). Its cost is reported per phase.

use super::keytable::{Miss, Snapshot};
use super::phase::PhaseContext;
use crate::backend::{BResult, BackendError, ErrorKind, Session};
use crate::clock::Clock;
use crate::stats::WorkerStats;
use crate::workload::keys::write_key_name;
use crate::workload::op::Op;
use crate::workload::payload::{DamageKind, DigestSink, Mismatch, HEADER_BYTES};
use std::cell::Cell;
use std::io::{Read, Write};
use std::sync::atomic::Ordering;

/// A worker's own time so far, in clock nanoseconds.
#[derive(Default)]
pub struct OwnTime {
    /// Making put bodies (and their digests).
    pub generation_ns: Cell<u64>,
    /// Hashing and checking what gets returned.
    pub verification_ns: Cell<u64>,
    /// The bookkeeping between one operation's timed call and the next one's: recording the
    /// last, choosing and naming the next key, the progress line (closed-loop phases only; in
    /// open-loop ones that gap is mostly the wait for the schedule, which is the storage's idle
    /// time, not ours).
    pub bookkeeping_ns: Cell<u64>,
}

impl OwnTime {
    pub(super) fn total(&self) -> u64 {
        self.generation_ns.get() + self.verification_ns.get() + self.bookkeeping_ns.get()
    }

    /// The worker's storage clock: real time with its own work taken out.
    pub fn now_ns(&self, clock: &dyn Clock) -> u64 {
        clock.now_ns() - self.total()
    }

    /// Runs `f` and books its time to `cell`.
    pub(super) fn spend<T>(&self, clock: &dyn Clock, cell: &Cell<u64>, f: impl FnOnce() -> T) -> T {
        let t = clock.now_ns();
        let r = f();
        cell.set(cell.get() + clock.now_ns() - t);
        r
    }
}

/// One worker's view while it runs operations.
pub struct Worker<'a, 'c> {
    /// The phase.
    pub ctx: &'a PhaseContext<'c>,
    /// Its session.
    pub session: &'a mut dyn Session,
    /// Its catalog connection, in file-server phases.
    pub catalog: Option<&'a mut dyn crate::backend::catalog::Catalog>,
    /// Its measurements.
    pub stats: &'a mut WorkerStats,
    /// Its own time.
    pub own: OwnTime,
    /// Reused for key names, so naming a key allocates nothing.
    pub name: String,
    /// The key of the operation in progress (named in the report when it fails).
    pub key: u64,
    /// The clock reading that ended the last timed call.
    pub timed_end_ns: u64,
    /// The same moment on the worker's storage clock (its own work taken out): where the
    /// operation ends in the timeline, whatever bookkeeping follows before it is recorded.
    pub ended_ns: u64,
    /// The own time booked by then (`ended_ns` plus this is the real time of that end).
    pub ended_own_ns: u64,
    /// Whether the last put (or upload) was stored (acknowledged by the backend).
    pub last_put_stored: bool,
    /// Contents this worker uploaded first, which its duplicate uploads repeat.
    pub fresh: super::fileserver::FreshContents,
    /// Open-loop phases: the intended start of the current operation (storage clock).
    pub intended_ns: Option<u64>,
    /// Its retry backoff and budget (see `retry`).
    pub retry: super::retry::Retrier,
    /// When the last operation ended well (storage clock; the worker's start before any did).
    pub last_success_ns: u64,
    /// Set when every operation failed for `give_up_after`: the worker stops.
    pub gave_up: bool,
    /// The phase's `op_timeout` watchdog and this worker's slot in it.
    pub watchdog: Option<(&'a super::watchdog::Watchdog, usize)>,
    /// The verifying sink of the last get, kept for the next: a get resets it instead of making
    /// a new one (a 400-byte copy between operations, which every throughput figure would carry).
    pub spare_sink: Option<Box<DigestSink>>,
    /// Closed-loop phases: where the last operation's accounting ended, as (that clock reading,
    /// the own time booked by then). The next timed call books the time since as bookkeeping
    /// (less any own time booked in between), with the reading that starts it: no extra one.
    pub gap_mark: Option<(u64, u64)>,
    /// Whether gaps between operations are booked (closed-loop phases).
    pub book_gaps: bool,
}

pub(super) fn is_not_found<T>(r: &BResult<T>) -> bool {
    matches!(r, Err(e) if e.kind == ErrorKind::NotFound)
}

impl Worker<'_, '_> {
    /// Whether the phase's bytes stop has been reached, claiming `size` more bytes; a phase
    /// still short of its `min_duration` goes on regardless.
    pub fn bytes_stop_reached(&self, size: u64) -> bool {
        let ctx = self.ctx;
        ctx.stop.bytes.is_some_and(|limit| ctx.bytes_claimed.fetch_add(size, Ordering::Relaxed) >= limit) && !self.before_min_duration()
    }

    /// Whether this worker has run for less than the phase's `min_duration` (wall time, as the
    /// phase's `duration`), so a count or bytes stop must wait.
    pub fn before_min_duration(&self) -> bool {
        self.ctx.stop.min_duration_ns.is_some_and(|min| self.ctx.clock.now_ns() < self.stats.start_ns.saturating_add(min))
    }

    /// One operation; returns false when a bytes stop says the phase is over.
    pub fn one_op(&mut self, op: Op, key: u64, index: u64) -> bool {
        let mut name = std::mem::take(&mut self.name);
        write_key_name(&mut name, key);
        self.key = key;
        let more = self.dispatch(op, key, index, &name);
        self.name = name;
        more
    }

    fn dispatch(&mut self, op: Op, key: u64, index: u64, name: &str) -> bool {
        match op {
            Op::Put => return self.put(key, index, name),
            Op::Get => return self.get(key, index, name),
            Op::Upload => return self.upload(key, index, name),
            Op::Download => return self.download(key, index, name),
            Op::Hash | Op::Register | Op::Lookup => unreachable!("steps are never drawn as operations (the plan refuses them)"),
            Op::Head => {
                let snapshot = self.ctx.keys.snapshot(key);
                let (result, latency, retries) = self.timed(|w| w.session.head(name).map(|_| 0));
                if !(is_not_found(&result) && self.count_miss(op, self.ctx.keys.classify_read_miss(&snapshot), latency)) {
                    self.finish(op, index, latency, retries, result);
                }
            }
            Op::Delete => {
                let snapshot = self.ctx.keys.begin_delete(key);
                let (result, latency, retries) = self.timed(|w| w.session.delete(name).map(|()| 0));
                if is_not_found(&result) && self.count_miss(op, self.ctx.keys.classify_delete_miss(&snapshot), latency) {
                    self.ctx.keys.end_delete(&snapshot, Some(false));
                } else {
                    self.ctx.keys.end_delete(&snapshot, result.as_ref().ok().map(|_| true));
                    self.finish(op, index, latency, retries, result);
                }
            }
        }
        true
    }

    fn put(&mut self, key: u64, index: u64, name: &str) -> bool {
        let ctx = self.ctx;
        self.last_put_stored = false;
        let ticket = ctx.keys.begin_put(key);
        let generation = ticket.generation;
        let size = ctx.payload.size_of(key, generation);
        if self.bytes_stop_reached(size) {
            ctx.keys.abandon_put(ticket);
            return false;
        }
        let mut digest = None;
        let (result, latency, retries) = self.timed(|w| {
            let mut body = SelfTimed { inner: ctx.payload.reader(key, generation), clock: ctx.clock, own: &w.own.generation_ns };
            let r = w.session.put(name, &mut body, size);
            digest = body.inner.digest();
            r
        });
        if is_not_found(&result) && ctx.keys.classify_put_miss(&ticket) == Miss::Raced {
            ctx.keys.end_put(ticket, None);
            self.count_miss(Op::Put, Miss::Raced, latency);
            return true;
        }
        let stored = result.as_ref().ok().map(|()| {
            // The reader hashed the body as the backend read it; a backend that acknowledged a put
            // without reading every byte (it should not) gets the digest computed anew.
            let digest = digest.unwrap_or_else(|| self.own.spend(ctx.clock, &self.own.generation_ns, || ctx.payload.digest_of(key, generation)));
            (size, digest)
        });
        self.last_put_stored = stored.is_some();
        ctx.keys.end_put(ticket, stored);
        self.finish(Op::Put, index, latency, retries, result.map(|()| size));
        true
    }

    fn get(&mut self, key: u64, index: u64, name: &str) -> bool {
        let ctx = self.ctx;
        let snapshot = ctx.keys.snapshot(key);
        // A phase stopped by bytes counts what gets read as well as what puts write: the size
        // the key was stored with (a missing key moves nothing).
        let size = snapshot.known().map(|(_, size)| size).unwrap_or(0);
        if self.bytes_stop_reached(size) {
            return false;
        }
        // A spare sink was reset when it was put back, outside the timed window; only a retry
        // resets it inside, as the check covers what the last attempt sent.
        let mut sink = self.spare_sink.take().unwrap_or_default();
        let mut retrying = false;
        let (result, latency, retries) = self.timed(|w| {
            if ctx.verify {
                if std::mem::replace(&mut retrying, true) {
                    sink.reset();
                }
                w.session.get(name, &mut SelfTimed { inner: &mut *sink, clock: ctx.clock, own: &w.own.verification_ns })
            } else {
                w.session.get(name, &mut std::io::sink())
            }
        });
        if is_not_found(&result) && self.count_miss(Op::Get, ctx.keys.classify_read_miss(&snapshot), latency) {
            self.put_back(sink);
            return true;
        }
        let outcome = match &result {
            Ok(_) if ctx.verify => Some(self.check(key, name, &snapshot, &sink)),
            Err(e) if ctx.verify && e.kind == ErrorKind::Corrupt => Some(Err(self.found_by_backend(key, name, &snapshot, e))),
            _ => None,
        };
        match outcome {
            Some(outcome) => {
                // The check's own time runs from the timed call's last clock reading, so checking
                // costs one clock read of its own.
                let checked = self.count_check(outcome).and(result);
                let now = ctx.clock.now_ns();
                self.own.verification_ns.set(self.own.verification_ns.get() + now - self.timed_end_ns);
                self.mark_gap(now);
                self.finish(Op::Get, index, latency, retries, checked);
            }
            None => self.finish(Op::Get, index, latency, retries, result),
        }
        self.put_back(sink);
        true
    }

    /// Keeps the sink for the next get, reset here, between operations, so that forgetting the
    /// last object costs no time inside the next one's window.
    fn put_back(&mut self, mut sink: Box<DigestSink>) {
        sink.reset();
        self.spare_sink = Some(sink);
    }

    /// The backend refused the object by its own check (pack's record checksum, which it checks
    /// after streaming the value): read it again through the verifier so the report names the
    /// damage from the bytes as it does for every other backend. When those bytes are right, the
    /// damage lies where only the backend looks (its record header or checksum): kind `other`.
    /// A backend may also refuse before sending a byte (row + file backends compare the file's
    /// length with the row's first): nothing was seen then, so the kind is `other`, with the
    /// backend's message. Right bytes that stop short are `truncated`, as without the check.
    fn found_by_backend(&mut self, key: u64, name: &str, snapshot: &Snapshot, e: &BackendError) -> Mismatch {
        let hint = snapshot.known().map_or(0, |(g, _)| g);
        let mut verifier = self.ctx.payload.verifier(key, hint);
        let _ = self.session.get(name, &mut verifier); // it fails again: its error is `e`
        match verifier.finish() {
            Err(mut m) if m.kind == DamageKind::Truncated && m.actual_bytes == Some(0) => {
                (m.kind, m.actual_bytes) = (DamageKind::Other, None);
                m.detail = format!("the backend refused the object before sending a byte: {e}");
                m
            }
            Err(mut m) => {
                m.detail = format!("{} (the backend's own check failed too: {e})", m.detail);
                m
            }
            Ok(()) => Mismatch::other(name, 0, format!("the backend reports the object damaged ({e}), but the bytes it returned are right")),
        }
    }

    /// Checks a get by its digest; only a mismatch (or a version whose digest was not recorded)
    /// regenerates, and a mismatch is read again byte by byte to say where the object differs.
    fn check(&mut self, key: u64, name: &str, snapshot: &Snapshot, sink: &DigestSink) -> Result<(), Mismatch> {
        let payload = &self.ctx.payload;
        let hint = snapshot.known().map_or(0, |(g, _)| g);
        let generation = payload.generation_in(key, sink.head()).or((sink.len() < HEADER_BYTES as u64).then_some(hint));
        let fine = generation.is_some_and(|g| {
            sink.len() == payload.size_of(key, g)
                && self.ctx.keys.digest_matches(key, g, sink.digest()).unwrap_or_else(|| payload.digest_of(key, g) == sink.digest())
        });
        if fine {
            return Ok(());
        }
        let mut verifier = payload.verifier(key, hint);
        let again = self.session.get(name, &mut verifier);
        match (again, verifier.finish()) {
            (Ok(_), Err(m)) => Err(m),
            (Ok(_), Ok(())) => Err(Mismatch::other(
                name,
                0,
                "the bytes read differed from what was put (digest mismatch), but a second read matched: damaged in transfer or a racing write".into(),
            )),
            (Err(e), _) => Err(Mismatch::other(name, 0, format!("digest mismatch, and reading it again failed: {e}"))),
        }
    }

    /// Counts a verification; a mismatch becomes a `Corrupt` error.
    pub(super) fn count_check(&mut self, outcome: Result<(), Mismatch>) -> BResult<()> {
        self.stats.verified += 1;
        outcome.map_err(|m| {
            self.stats.mismatches += 1;
            let message = m.line();
            if self.stats.mismatched.len() < crate::report::model::MISMATCHES_LISTED {
                self.stats.mismatched.push(m);
            }
            BackendError::new(ErrorKind::Corrupt, message)
        })
    }

    /// Counts a `NotFound` that is a miss (of an absent key, or one a concurrent delete removed)
    /// of the operation whose last timed call just ended, after `latency_ns`; returns false for
    /// lost data, which stays an error. A miss is work the storage did (a lookup that found
    /// nothing, as slow as an S3 404 may be): its time counts in the phase's window as any
    /// operation's, and its latency is kept apart from the successes'.
    pub(super) fn count_miss(&mut self, op: Op, miss: Miss, latency_ns: u64) -> bool {
        let raced = match miss {
            Miss::Absent => false,
            Miss::Raced => true,
            Miss::Lost => return false,
        };
        self.stats.miss(op, raced, latency_ns);
        self.stats.end_ns = self.ended_ns;
        self.stats.end_own_ns = self.ended_own_ns;
        true
    }

    /// Runs `attempt` up to 1 + retries times; returns the result, the attempts' time without our
    /// own payload work, and the retries used.
    fn timed<T>(&mut self, attempt: impl FnMut(&mut Self) -> BResult<T>) -> (BResult<T>, u64, u32) {
        let now = self.ctx.clock.now_ns();
        if let Some((at, own_then)) = self.gap_mark.take() {
            let booked_since = self.own.total() - own_then;
            let gap = now.saturating_sub(at).saturating_sub(booked_since);
            self.own.bookkeeping_ns.set(self.own.bookkeeping_ns.get() + gap);
        }
        let start = now - self.own.total();
        let (result, retries) = self.within_deadline(attempt);
        (result, self.ended_ns - start, retries)
    }

    /// Notes `now` (a clock reading) as where the operation's accounting ended: the gap from here
    /// to the next timed call is bookkeeping, in closed-loop phases.
    pub(super) fn mark_gap(&mut self, now: u64) {
        if self.book_gaps {
            self.gap_mark = Some((now, self.own.total()));
        }
    }

    /// Runs `attempt` up to 1 + retries times under the phase's `op_timeout` (the watchdog cuts
    /// the worker's connections once it passes); notes the end in `timed_end_ns`. Returns the
    /// result — a cut one as a `timeout` — and the retries used.
    pub(super) fn within_deadline<T>(&mut self, mut attempt: impl FnMut(&mut Self) -> BResult<T>) -> (BResult<T>, u32) {
        let clock = self.ctx.clock;
        let mut retries = 0;
        let dog = self.watchdog;
        if let Some((dog, w)) = dog {
            dog.arm(w);
        }
        let cut = |dog: Option<(&super::watchdog::Watchdog, usize)>| dog.is_some_and(|(dog, w)| dog.fired(w));
        loop {
            match attempt(self) {
                // The deadline covers the operation, retries and backoff included: a cut one (also
                // one whose deadline passed while it backed off) is over.
                Err(e) if !cut(dog) && self.retry.again(e.kind, retries, self.ctx.retries, clock) && !cut(dog) => retries += 1,
                other => {
                    self.timed_end_ns = clock.now_ns();
                    self.ended_own_ns = self.own.total();
                    self.ended_ns = self.timed_end_ns - self.ended_own_ns;
                    self.mark_gap(self.timed_end_ns);
                    let was_cut = dog.is_some_and(|(dog, w)| dog.disarm(w));
                    let other = match other {
                        Err(e) if was_cut => Err(BackendError::new(
                            ErrorKind::Timeout,
                            format!(
                                "no answer within op_timeout = {}; the operation was cut off there ({})",
                                crate::units::Nanos(self.ctx.op_timeout_ns),
                                e.message
                            ),
                        )),
                        other => other,
                    };
                    return (other, retries);
                }
            }
        }
    }

    /// Records the outcome of the operation whose last timed call just ended. It ends where that
    /// call did (`ended_ns`): the bookkeeping between the call and this record takes no clock
    /// reading of its own, and falls in the gap before the next operation.
    pub(super) fn finish(&mut self, op: Op, index: u64, latency: u64, retries: u32, result: BResult<u64>) {
        let end = self.ended_ns;
        self.stats.end_ns = end;
        self.stats.end_own_ns = self.ended_own_ns;
        match result {
            Ok(bytes) => {
                // Only successes refill the retry budget: failures must drain it.
                self.retry.succeeded();
                self.stats.success(op, index, end, latency, bytes, retries);
                if let Some(intended) = self.intended_ns {
                    self.stats.response(op, end.saturating_sub(intended));
                }
            }
            Err(e) => {
                let key = self.key;
                let retried = if retries > 0 { format!(" (after {retries} retries)") } else { String::new() };
                self.stats.failure(op, end, e.kind, retries, || format!("{} {}: {}{retried}", op.name(), crate::workload::keys::key_name(key), e.message));
                let patience = self.ctx.give_up_after_ns;
                if patience > 0 && end.saturating_sub(self.last_success_ns) >= patience {
                    self.gave_up = true;
                    self.stats.gave_up = true;
                }
                return;
            }
        }
        self.last_success_ns = end;
    }
}

/// Wraps our own payload generator or checker and books the time spent inside it to `own`.
pub(super) struct SelfTimed<'c, T> {
    pub(super) inner: T,
    pub(super) clock: &'c dyn Clock,
    pub(super) own: &'c Cell<u64>,
}

impl<T: Read> Read for SelfTimed<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let t = self.clock.now_ns();
        let r = self.inner.read(buf);
        self.own.set(self.own.get() + self.clock.now_ns() - t);
        r
    }
}

impl<T: Write> Write for SelfTimed<'_, T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let t = self.clock.now_ns();
        let r = self.inner.write(buf);
        self.own.set(self.own.get() + self.clock.now_ns() - t);
        r
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
