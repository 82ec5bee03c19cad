//! One measured phase: worker threads behind a start barrier, each with its own session, issuing
//! operations until a stop condition, recording into their own stats.
//!
//! Timing covers only the backend call (see `ops` for how our own payload work, and in closed-loop
//! phases the bookkeeping between operations, is kept out of latencies and windows). Bodies
//! stream in both directions, so no object is ever held whole.

use super::keytable::{KeySpace, KeyTable};
use super::ops::{OwnTime, Worker};
use crate::backend::catalog::Catalog;
use crate::backend::sockets::CutHandle;
use crate::backend::Session;
use crate::clock::Clock;
use crate::job::{PhasePlan, Stop};
use crate::stats::WorkerStats;
use crate::workload::keys::{unit, KeyChooser};
use crate::workload::op::Op;
use crate::workload::payload::PayloadSpec;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

/// What every worker of a phase shares.
pub struct PhaseContext<'a> {
    /// The phase.
    pub phase: &'a PhasePlan,
    /// Stop condition (the phase's, or its warm-up's).
    pub stop: Stop,
    /// Whether this is the phase's warm-up (it draws its own random streams).
    pub warmup: bool,
    /// Distinct keys.
    pub objects: u64,
    /// How payloads are made.
    pub payload: PayloadSpec,
    /// Check gets.
    pub verify: bool,
    /// Retries per failed operation.
    pub retries: u32,
    /// A worker stops after failing without a success for this long (0: never).
    pub give_up_after_ns: u64,
    /// An operation still running after this long is cut and fails as a timeout (0: never).
    pub op_timeout_ns: u64,
    /// File server: the fraction of uploads that repeat an earlier upload's content.
    pub duplicates: f64,
    /// Key state.
    pub keys: &'a KeyTable,
    /// The keys this process writes and reads (its own, unless keys are shared by ranks).
    pub key_space: KeySpace,
    /// Whether this phase's reads address every rank's keys (shared keys, and no deletes in the
    /// phase: a delete by another rank would make a read's miss unclassifiable here).
    pub reads_all: bool,
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
    /// The phase's time origin (its timeline's zero), when the ranks of a multi-host run agreed
    /// on one; None: the clock's reading as the phase starts.
    pub origin_ns: Option<u64>,
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
/// What the watchdog cuts for each worker: its session's connections and, in a file-server
/// phase, its catalog's (either may be the one a silent server holds). `None` when some worker
/// has nothing to cut: its operations are local calls.
fn worker_cuts(sessions: &[Box<dyn Session>], catalogs: &[Box<dyn Catalog>]) -> Option<Vec<CutHandle>> {
    (0..sessions.len())
        .map(|w| {
            let mut cuts: Vec<CutHandle> = sessions[w].cut_handle().into_iter().collect();
            cuts.extend(catalogs.get(w).and_then(|c| c.cut_handle()));
            match cuts.len() {
                0 => None,
                1 => cuts.pop(),
                _ => Some(Arc::new(move || cuts.iter().for_each(|cut| cut())) as CutHandle),
            }
        })
        .collect()
}

/// `catalogs` holds one catalog connection per session for file-server phases, else nothing.
pub fn run(ctx: &PhaseContext, sessions: &mut [Box<dyn Session>], catalogs: &mut [Box<dyn Catalog>], on_wait: impl Fn()) -> Result<Vec<WorkerStats>, String> {
    let barrier = Barrier::new(sessions.len());
    // A worker that panicked (a backend bug) fails the phase: the others stop as on Ctrl-C
    // instead of running out a `duration` for a result that will not be reported.
    let panicked = AtomicBool::new(false);
    let origin = if ctx.clock.is_virtual() { 0 } else { ctx.origin_ns.unwrap_or_else(|| ctx.clock.now_ns()) };
    let width = ctx.index_width();
    let workers = sessions.len() as u64;
    let watchdog = match ctx.op_timeout_ns {
        0 => None,
        timeout => {
            let cuts = worker_cuts(sessions, catalogs).ok_or_else(|| {
                "op_timeout needs a connection to cut when an operation overruns, and this backend's operations are \
                 local calls, which cannot be abandoned; remove op_timeout (it is for server backends)"
                    .to_string()
            })?;
            Some(super::watchdog::Watchdog::new(timeout, cuts))
        }
    };
    let watchdog = watchdog.as_ref();
    if sessions.len() == 1 && watchdog.is_none() {
        // A lone worker runs on this thread, which would otherwise only wait: then no other
        // thread of the process uses its file table (the helpers keep their own, see
        // crate::threads), and the kernel takes no reference per system call, as for fio's
        // and kvtest's single-threaded processes. It does this thread's chores between operations.
        // A virtual clock is this thread's own, and goes on from the phases before: the phase
        // starts where it stands now, as a new worker thread's starts at zero.
        let origin = if ctx.clock.is_virtual() { ctx.clock.now_ns() } else { origin };
        let mut stats = WorkerStats::new(origin, width);
        let catalog = catalogs.first_mut().map(|c| -> &mut dyn Catalog { c.as_mut() });
        let chores = Chores { run: &on_wait, next_ns: ctx.clock.now_ns() };
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker(ctx, sessions[0].as_mut(), catalog, 0, 1, Place::Alone(chores), &mut stats)));
        return ran.map(|()| vec![stats]).map_err(|panic| panicked_message(ctx, 0, panic));
    }
    std::thread::scope(|scope| {
        if let Some(dog) = watchdog {
            scope.spawn(|| dog.watch());
        }
        let mut catalogs = catalogs.iter_mut().map(|c| {
            let c: &mut dyn Catalog = c.as_mut();
            Some(c)
        });
        let handles: Vec<_> = sessions
            .iter_mut()
            .enumerate()
            .map(|(w, session)| {
                let (barrier, panicked) = (&barrier, &panicked);
                let catalog = catalogs.next().flatten();
                // Named, so `top -H`, perf and the tests can tell a worker from the other threads.
                let thread = std::thread::Builder::new().name(format!("worker-{w}"));
                thread
                    .spawn_scoped(scope, move || {
                        let mut stats = WorkerStats::new(origin, width);
                        barrier.wait();
                        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            worker(ctx, session.as_mut(), catalog, w as u64, workers, Place::Among(watchdog), &mut stats)
                        }));
                        if let Err(panic) = ran {
                            panicked.store(true, Ordering::Relaxed);
                            std::panic::resume_unwind(panic);
                        }
                        stats
                    })
                    .expect("spawn a worker thread")
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            on_wait();
            if panicked.load(Ordering::Relaxed) {
                ctx.interrupted.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_nanos(CHORES_EVERY_NS));
        }
        if let Some(dog) = watchdog {
            dog.stop();
        }
        handles.into_iter().enumerate().map(|(w, h)| h.join().map_err(|panic| panicked_message(ctx, w, panic))).collect()
    })
}

fn panicked_message(ctx: &PhaseContext, w: usize, panic: Box<dyn std::any::Any + Send>) -> String {
    let what = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
    format!("worker {w} panicked in phase {}: {}", ctx.phase.label, what.unwrap_or_else(|| "(no message)".into()))
}

/// How often the phase's thread does its chores (progress, passing on a Ctrl-C): while workers
/// run, between its sleeps; as the lone worker, between operations.
const CHORES_EVERY_NS: u64 = 50_000_000;

/// Where a worker runs.
enum Place<'t> {
    /// On a thread of its own among the phase's workers, under the phase's watchdog if any.
    Among(Option<&'t super::watchdog::Watchdog>),
    /// Alone, on the phase's thread, doing that thread's chores.
    Alone(Chores<'t>),
}

/// The chores of the phase's thread, done by a lone worker running on it.
struct Chores<'t> {
    run: &'t dyn Fn(),
    /// When they are next due, in clock nanoseconds.
    next_ns: u64,
}

impl Chores<'_> {
    fn when_due(&mut self, now_ns: u64) {
        if now_ns >= self.next_ns {
            (self.run)();
            self.next_ns = now_ns + CHORES_EVERY_NS;
        }
    }
}

fn worker(ctx: &PhaseContext, session: &mut dyn Session, catalog: Option<&mut dyn Catalog>, w: u64, workers: u64, place: Place, stats: &mut WorkerStats) {
    let (watchdog, mut chores) = match place {
        Place::Among(watchdog) => (watchdog, None),
        Place::Alone(chores) => (None, Some(chores)),
    };
    let (mut chooser, mut mix_rng) = worker_streams(ctx, w);
    // Shared keys: reads draw from every rank's keys, writes from this rank's own range.
    let mut all_keys = ctx.reads_all.then(|| KeyChooser::new(ctx.phase.key_order, ctx.key_space.all, ctx.seed, !stream_of(ctx, w)));
    let mix_total = total_weight(&ctx.phase.mix);
    stats.start_ns = ctx.clock.now_ns();
    stats.end_ns = stats.start_ns;
    // The deadline is wall time, our own work included: a 30 s phase lasts 30 s.
    let deadline = ctx.stop.duration_ns.map(|d| stats.start_ns + d);
    let mut worker = Worker {
        ctx,
        session,
        // Reborrowed so the catalog's trait object takes the worker's lifetime, as the session's does.
        catalog: match catalog {
            Some(c) => Some(&mut *c),
            None => None,
        },
        stats,
        own: OwnTime::default(),
        name: String::new(),
        key: 0,
        timed_end_ns: 0,
        ended_ns: 0,
        ended_own_ns: 0,
        last_put_stored: false,
        fresh: super::fileserver::FreshContents::new(ctx.seed, w),
        intended_ns: None,
        retry: super::retry::Retrier::new(ctx.seed ^ stream_of(ctx, w), w),
        last_success_ns: 0,
        gave_up: false,
        watchdog: watchdog.map(|dog| (dog, w as usize)),
        spare_sink: None,
        gap_mark: None,
        book_gaps: false,
    };
    worker.last_success_ns = worker.own.now_ns(ctx.clock);
    // Open-loop phases start operations on a schedule (the warm-up runs flat out: it is untimed).
    let mut schedule =
        ctx.phase.rate.filter(|_| !ctx.warmup).map(|rate| super::schedule::Schedule::new(rate, w, workers, worker.stats.start_ns, stream_of(ctx, w)));
    if schedule.is_some() && !ctx.clock.is_virtual() {
        super::schedule::precise_sleeps();
    }
    worker.stats.schedule = schedule.as_ref().map(|s| s.tally());
    // Closed loop: the time before the first operation and between operations is stowbench's,
    // and comes out of the storage clock (as hyperfine takes its shell's start-up out).
    worker.book_gaps = schedule.is_none();
    worker.mark_gap(worker.stats.start_ns);
    // A fixed share per worker (w, w + workers, …): under simulated time so results never depend
    // on OS scheduling, and when the phase asks each thread for an even share of its count.
    let strided = ctx.clock.is_virtual() || (ctx.phase.even_split && ctx.stop.count.is_some());
    // Closed loop on the shared counter: the workers end together, whatever own time each had.
    worker.stats.pool = (schedule.is_none() && !strided).then_some(0);
    let mut batch = claim_batch(ctx.stop, workers);
    let mut claimed = 0..0;
    let mut recent = RecentPuts::new(ctx.phase.read_recent);
    let ops_per_iteration = if ctx.phase.sequence { ctx.phase.mix.len() } else { 1 };
    let mut iterations = 0u64;
    'iterations: loop {
        if let Some(chores) = chores.as_mut() {
            chores.when_due(worker.timed_end_ns);
        }
        if ctx.interrupted.load(Ordering::Relaxed) || deadline.is_some_and(|d| ctx.clock.now_ns() >= d) {
            break;
        }
        let index = if strided {
            ctx.next_op.fetch_add(1, Ordering::Relaxed);
            w + iterations * workers
        } else {
            if claimed.is_empty() {
                let from = ctx.next_op.fetch_add(batch, Ordering::Relaxed);
                claimed = from..from + batch;
            }
            claimed.next().expect("a claimed range is never empty here")
        };
        if ctx.stop.count.is_some_and(|c| index >= c) {
            if !worker.before_min_duration() {
                break;
            }
            // Held open past its count, the phase claims indexes as an uncounted one does: a
            // small count's batch of one would have every worker write the shared counter on
            // every operation.
            batch = claim_batch(Stop::default(), workers);
        }
        if let Some(schedule) = schedule.as_mut() {
            match wait_for_start(&mut worker, schedule, deadline, chores.as_mut()) {
                Some(lag) => worker.stats.schedule.as_mut().expect("an open-loop worker has a tally").started(lag),
                None => break,
            }
        }
        iterations += 1;
        for step in 0..ops_per_iteration {
            let op = if ctx.phase.sequence { ctx.phase.mix[step].0 } else { pick(&ctx.phase.mix, mix_total, &mut mix_rng) };
            let key = match (recent.key(op), all_keys.as_mut()) {
                (Some(key), _) => key,
                (None, Some(all)) if op.reads() => all.next(ctx.key_space.reads_from + index, ctx.key_space.all),
                (None, _) => ctx.key_space.first + chooser.next(index, ctx.objects),
            };
            if !worker.one_op(op, key, index) || worker.gave_up {
                break 'iterations;
            }
            if op.writes() && worker.last_put_stored {
                recent.push(key);
            }
        }
    }
    let own = worker.own;
    stats.generation_ns = own.generation_ns.get();
    stats.verification_ns = own.verification_ns.get();
    stats.bookkeeping_ns = own.bookkeeping_ns.get();
    stats.end_ns = stats.end_ns.max(stats.start_ns);
}

/// Waits until the schedule's next start (storage clock) and sets it as the current operation's
/// intended start; returns how late the start is, or None when the phase ends first (its
/// deadline, Ctrl-C).
fn wait_for_start(worker: &mut Worker, schedule: &mut super::schedule::Schedule, deadline: Option<u64>, mut chores: Option<&mut Chores>) -> Option<u64> {
    let (ctx, clock) = (worker.ctx, worker.ctx.clock);
    let intended_ns = schedule.next_start_ns();
    // The deadline is wall time, our own work included; the schedule is storage time.
    if deadline.is_some_and(|d| intended_ns + worker.own.total() >= d) {
        return None;
    }
    loop {
        let now = worker.own.now_ns(clock);
        if now >= intended_ns {
            worker.intended_ns = Some(intended_ns);
            return Some(now - intended_ns);
        }
        if let Some(chores) = chores.as_mut() {
            chores.when_due(clock.now_ns());
        }
        if ctx.interrupted.load(Ordering::Relaxed) {
            return None;
        }
        // Sleep until the OS's usual wake-up delay before the start, then spin the rest, so
        // starts are on time without a core spinning between them. In slices, so Ctrl-C is
        // seen within 100 ms even at one operation a minute.
        let left = intended_ns - now;
        let early = schedule.wake_early_ns();
        if left > early {
            let nap = (left - early).min(100_000_000);
            clock.sleep_ns(nap);
            schedule.learn_oversleep(worker.own.now_ns(clock).saturating_sub(now + nap));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The keys of a worker's latest puts in a phase with `read_recent = n`, so its gets and heads
/// read the n-th newest. Before the worker has put n objects, they read the oldest it has put;
/// before its first put, the key order chooses.
struct RecentPuts {
    rank: usize,
    keys: std::collections::VecDeque<u64>,
}

impl RecentPuts {
    fn new(read_recent: Option<u64>) -> RecentPuts {
        // Grown as puts come, never reserved up front: read_recent may exceed what a worker puts.
        let rank = usize::try_from(read_recent.unwrap_or(0)).unwrap_or(usize::MAX);
        RecentPuts { rank, keys: std::collections::VecDeque::new() }
    }

    /// The key operation `op` reads, if it is a read that follows recent puts.
    fn key(&self, op: Op) -> Option<u64> {
        (op.reads() && self.rank > 0).then(|| self.keys.front().copied()).flatten()
    }

    fn push(&mut self, key: u64) {
        if self.rank == 0 {
            return;
        }
        if self.keys.len() == self.rank {
            self.keys.pop_front();
        }
        self.keys.push_back(key);
    }
}

/// Operation indexes a worker claims at once. Claiming one at a time makes every worker write
/// the shared counter, and with sequential keys puts neighbouring keys' state (one cache line) from
/// different cores; a run of indexes per worker avoids both, while a short counted phase still
/// spreads its operations over every worker (at least 256 batches each).
fn claim_batch(stop: Stop, workers: u64) -> u64 {
    const MOST: u64 = 64;
    match stop.count {
        Some(count) => (count / (workers * 256)).clamp(1, MOST),
        None => MOST,
    }
}

/// The key chooser and the operation-mix generator of worker `w`: distinct for every phase (by
/// its label), for a phase's warm-up and for every worker, and the same on every run with one seed.
fn worker_streams(ctx: &PhaseContext, w: u64) -> (KeyChooser, Xoshiro256PlusPlus) {
    let stream = stream_of(ctx, w);
    let chooser = KeyChooser::new(ctx.phase.key_order, ctx.objects, ctx.seed, stream);
    (chooser, Xoshiro256PlusPlus::seed_from_u64(ctx.seed ^ stream.rotate_left(32) ^ 0x6d69_785f_7267))
}

/// The random stream of worker `w` in this phase (or its warm-up).
fn stream_of(ctx: &PhaseContext, w: u64) -> u64 {
    let part = if ctx.warmup { "warmup" } else { "measured" };
    crate::hash::xxh3_64(format!("{}/{part}/{w}", ctx.phase.label).as_bytes())
}

/// The sum of a mix's weights, in u64: they are u32 each, and two near u32::MAX would wrap a u32
/// sum (a mix that never draws its second operation).
fn total_weight(mix: &[(Op, u32)]) -> u64 {
    mix.iter().map(|&(_, wt)| u64::from(wt)).sum()
}

/// Draws an operation of `mix` by weight; `total` is `total_weight(mix)`.
fn pick(mix: &[(Op, u32)], total: u64, rng: &mut Xoshiro256PlusPlus) -> Op {
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

#[cfg(test)]
mod tests {
    //! Forces the interleavings of issue 9 with sessions that hold an operation until another
    //! worker's operation has reached the backend, so the outcome never depends on scheduling.
    use super::*;
    use crate::backend::{BResult, BackendError};
    use crate::clock::MonotonicClock;
    use crate::workload::keys::KeyOrder;
    use crate::workload::size::SizeSpec;
    use std::collections::HashSet;
    use std::io::{Read, Write};
    use std::sync::{Arc, Condvar, Mutex};

    #[derive(Default)]
    struct Gate {
        stored: HashSet<String>,
        gets_in_flight: u32,
        deletes_arrived: u32,
        deletes_done: u32,
    }

    /// Gets wait until a delete has finished; deletes wait until a get (or, in a phase without
    /// gets, every other delete) has reached the backend.
    struct GatedSession {
        gate: Arc<(Mutex<Gate>, Condvar)>,
        deleters: u32,
        readers: u32,
    }

    impl Session for GatedSession {
        fn put(&mut self, _: &str, _: &mut dyn Read, _: u64) -> BResult<()> {
            unreachable!("these phases never put")
        }
        fn get(&mut self, key: &str, _: &mut dyn Write) -> BResult<u64> {
            let (lock, cv) = &*self.gate;
            let mut g = lock.lock().unwrap();
            g.gets_in_flight += 1;
            cv.notify_all();
            let deleters = self.deleters;
            g = cv.wait_while(g, |g| deleters > 0 && g.deletes_done == 0).unwrap();
            if g.stored.contains(key) {
                unreachable!("the delete ran first")
            }
            Err(BackendError::not_found(key))
        }
        fn delete(&mut self, key: &str) -> BResult<()> {
            let (lock, cv) = &*self.gate;
            let mut g = lock.lock().unwrap();
            g.deletes_arrived += 1;
            cv.notify_all();
            let (readers, deleters) = (self.readers, self.deleters);
            g = cv.wait_while(g, |g| if readers > 0 { g.gets_in_flight < readers } else { g.deletes_arrived < deleters }).unwrap();
            let removed = g.stored.remove(key);
            g.deletes_done += 1;
            cv.notify_all();
            if removed {
                Ok(())
            } else {
                Err(BackendError::not_found(key))
            }
        }
        fn head(&mut self, _: &str) -> BResult<u64> {
            unreachable!("these phases never head")
        }
    }

    fn plan(mix: Vec<(Op, u32)>, count: u64) -> PhasePlan {
        PhasePlan { label: "mix".into(), mix, stop: Stop { count: Some(count), ..Stop::default() }, ..PhasePlan::single(Op::Put, KeyOrder::Sequential) }
    }

    fn context<'a>(phase: &'a PhasePlan, keys: &'a KeyTable, seed: u64, interrupted: &'a AtomicBool) -> PhaseContext<'a> {
        PhaseContext {
            phase,
            stop: phase.stop,
            warmup: false,
            objects: 1,
            payload: PayloadSpec::new(seed, 0.0, SizeSpec::Fixed { bytes: 100 }),
            verify: true,
            retries: 0,
            give_up_after_ns: 0,
            op_timeout_ns: 0,
            duplicates: 0.0,
            keys,
            key_space: KeySpace::own(1),
            reads_all: false,
            clock: &MonotonicClock,
            interrupted,
            seed,
            next_op: AtomicU64::new(0),
            bytes_claimed: AtomicU64::new(0),
            origin_ns: None,
        }
    }

    /// A clock whose every reading takes 10 ns, shared with a store whose calls take 1 µs: time
    /// that depends on nothing but the code that runs.
    struct StepClock(AtomicU64);

    impl crate::clock::Clock for StepClock {
        fn now_ns(&self) -> u64 {
            self.0.fetch_add(10, Ordering::Relaxed)
        }
    }

    struct SteppedStore {
        clock: Arc<StepClock>,
        objects: std::collections::HashMap<String, Vec<u8>>,
    }

    impl Session for SteppedStore {
        fn put(&mut self, key: &str, body: &mut dyn Read, _: u64) -> BResult<()> {
            let mut bytes = Vec::new();
            body.read_to_end(&mut bytes).map_err(|e| BackendError::new(crate::backend::ErrorKind::Other, e.to_string()))?;
            self.clock.0.fetch_add(1_000, Ordering::Relaxed);
            self.objects.insert(key.to_string(), bytes);
            Ok(())
        }
        fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
            self.clock.0.fetch_add(1_000, Ordering::Relaxed);
            let bytes = self.objects.get(key).ok_or_else(|| BackendError::not_found(key))?;
            sink.write_all(bytes).map_err(|e| BackendError::new(crate::backend::ErrorKind::Other, e.to_string()))?;
            Ok(bytes.len() as u64)
        }
        fn delete(&mut self, _: &str) -> BResult<()> {
            unreachable!("these phases never delete")
        }
        fn head(&mut self, _: &str) -> BResult<u64> {
            unreachable!("these phases never head")
        }
    }

    /// In a closed loop, stowbench's own time between operations (recording, choosing the next
    /// key) comes out of the worker's clock with its payload work: a lone worker's window is
    /// exactly the time its operations took, the bookkeeping is reported beside it, and the
    /// payloads were still checked.
    #[test]
    fn a_lone_closed_loop_workers_window_is_the_time_its_operations_took() {
        let clock = Arc::new(StepClock(AtomicU64::new(1_000_000)));
        let mut sessions: Vec<Box<dyn Session>> = vec![Box::new(SteppedStore { clock: clock.clone(), objects: Default::default() })];
        let keys = KeyTable::new(50);
        let flag = AtomicBool::new(false);
        for op in [Op::Put, Op::Get] {
            let phase = PhasePlan { stop: Stop { count: Some(200), ..Stop::default() }, ..PhasePlan::single(op, KeyOrder::Sequential) };
            let ctx = PhaseContext { objects: 50, keys: &keys, clock: &*clock, ..context(&phase, &keys, 1, &flag) };
            let stats = run(&ctx, &mut sessions, &mut [], || ()).unwrap().pop().unwrap();
            assert_eq!(stats.attempted(), 200, "{op:?}");
            assert_eq!(stats.end_ns - stats.start_ns, stats.latency_sum_ns(), "{op:?}: the window is the operations' time");
            assert!(stats.bookkeeping_ns >= 200 * 10, "{op:?}: each gap holds at least the clock reading that ends it");
            if op == Op::Get {
                assert_eq!((stats.verified, stats.mismatches), (200, 0));
                assert!(stats.verification_ns > 0);
            }
            // It drew from the phase's counter, and its last end less its own time by then is
            // where its clock says the phase ended (stats::merge takes a pool's mean own time).
            assert_eq!(stats.pool, Some(0), "{op:?}");
            let own = stats.generation_ns + stats.verification_ns + stats.bookkeeping_ns;
            assert!(stats.end_own_ns > 0 && stats.end_own_ns <= own, "{op:?}: {} of {own}", stats.end_own_ns);
        }
        // An even split gives each worker a fixed share: no pool.
        let phase = PhasePlan { stop: Stop { count: Some(200), ..Stop::default() }, even_split: true, ..PhasePlan::single(Op::Get, KeyOrder::Sequential) };
        let ctx = PhaseContext { objects: 50, keys: &keys, clock: &*clock, ..context(&phase, &keys, 1, &flag) };
        assert_eq!(run(&ctx, &mut sessions, &mut [], || ()).unwrap().pop().unwrap().pool, None);
    }

    /// A get phase with a minimum duration reads every object (its count: one pass) and then
    /// goes over them again until the minimum has passed; a bytes stop waits for it the same way.
    #[test]
    fn a_minimum_duration_holds_a_counted_phase_open() {
        let clock = Arc::new(StepClock(AtomicU64::new(1_000_000)));
        let mut sessions: Vec<Box<dyn Session>> = vec![Box::new(SteppedStore { clock: clock.clone(), objects: Default::default() })];
        let keys = KeyTable::new(50);
        let flag = AtomicBool::new(false);
        let puts = PhasePlan { stop: Stop { count: Some(50), ..Stop::default() }, ..PhasePlan::single(Op::Put, KeyOrder::Sequential) };
        let ctx = PhaseContext { objects: 50, keys: &keys, clock: &*clock, ..context(&puts, &keys, 1, &flag) };
        run(&ctx, &mut sessions, &mut [], || ()).unwrap();
        // Each get takes 1 µs of the store's time and a few 10 ns clock readings: 50 gets pass
        // well inside 200 µs, so the minimum decides.
        for stop in [Stop { count: Some(50), ..Stop::default() }, Stop { bytes: Some(50 * 100), ..Stop::default() }] {
            let stop = Stop { min_duration_ns: Some(200_000), ..stop };
            let gets = PhasePlan { stop, ..PhasePlan::single(Op::Get, KeyOrder::Sequential) };
            let ctx = PhaseContext { objects: 50, keys: &keys, clock: &*clock, ..context(&gets, &keys, 1, &flag) };
            let stats = run(&ctx, &mut sessions, &mut [], || ()).unwrap().pop().unwrap();
            let wall = stats.end_ns - stats.start_ns + stats.bookkeeping_ns + stats.verification_ns;
            assert!(wall >= 200_000, "{stop:?}: ran {wall} ns");
            assert!((150..200).contains(&stats.attempted()), "{stop:?}: {} gets", stats.attempted());
            assert_eq!(stats.mismatches, 0);
        }
        // Without the minimum, the count alone stops it.
        let gets = PhasePlan { stop: Stop { count: Some(50), ..Stop::default() }, ..PhasePlan::single(Op::Get, KeyOrder::Sequential) };
        let ctx = PhaseContext { objects: 50, keys: &keys, clock: &*clock, ..context(&gets, &keys, 1, &flag) };
        assert_eq!(run(&ctx, &mut sessions, &mut [], || ()).unwrap().pop().unwrap().attempted(), 50);
    }

    /// Two weights near u32::MAX draw both operations about evenly (their u32 sum would wrap
    /// and draw only the first).
    #[test]
    fn weights_near_the_u32_limit_still_draw_every_operation() {
        let mix = [(Op::Get, 4_000_000_000), (Op::Put, 4_000_000_000)];
        let total = total_weight(&mix);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let puts = (0..1000).filter(|_| pick(&mix, total, &mut rng) == Op::Put).count();
        assert!((400..600).contains(&puts), "{puts} puts in 1000 draws");
    }

    /// A seed whose first picks are `want[w]` for worker w.
    fn seed_picking(phase: &PhasePlan, want: &[Op]) -> u64 {
        let (keys, flag) = (KeyTable::new(1), AtomicBool::new(false));
        (0..10_000)
            .find(|&seed| {
                let ctx = context(phase, &keys, seed, &flag);
                want.iter().enumerate().all(|(w, op)| pick(&phase.mix, total_weight(&phase.mix), &mut worker_streams(&ctx, w as u64).1) == *op)
            })
            .expect("some seed picks these operations")
    }

    fn run_gated(phase: &PhasePlan, want: &[Op], stored: bool) -> crate::report::model::PhaseResult {
        let keys = KeyTable::new(1);
        let ticket = keys.begin_put(0);
        keys.end_put(ticket, Some((100, 0)));
        let gate = Arc::new((Mutex::new(Gate::default()), Condvar::new()));
        if stored {
            gate.0.lock().unwrap().stored.insert(crate::workload::keys::key_name(0));
        }
        let readers = want.iter().filter(|op| **op == Op::Get).count() as u32;
        let deleters = want.len() as u32 - readers;
        let mut sessions: Vec<Box<dyn Session>> =
            want.iter().map(|_| Box::new(GatedSession { gate: gate.clone(), deleters, readers }) as Box<dyn Session>).collect();
        let flag = AtomicBool::new(false);
        let ctx = context(phase, &keys, seed_picking(phase, want), &flag);
        crate::stats::merge("mix", run(&ctx, &mut sessions, &mut [], || ()).unwrap(), 0)
    }

    /// (successes, misses, raced misses, errors) of `op`.
    fn totals(r: &crate::report::model::PhaseResult, op: Op) -> (u64, u64, u64, u64) {
        let o = &r.ops[op.name()];
        (o.count, o.misses, o.raced_misses, o.errors.values().sum())
    }

    #[test]
    fn a_get_overtaken_by_a_delete_is_a_raced_miss_not_an_error() {
        let phase = plan(vec![(Op::Get, 1), (Op::Delete, 1)], 2);
        let stats = run_gated(&phase, &[Op::Get, Op::Delete], true);
        assert_eq!(totals(&stats, Op::Get), (0, 1, 1, 0), "(count, misses, raced, errors) of the get");
        assert_eq!(totals(&stats, Op::Delete), (1, 0, 0, 0));
    }

    #[test]
    fn two_deletes_of_one_key_give_one_success_and_one_raced_miss() {
        let phase = plan(vec![(Op::Delete, 1), (Op::Get, 1)], 2);
        let stats = run_gated(&phase, &[Op::Delete, Op::Delete], true);
        assert_eq!(totals(&stats, Op::Delete), (1, 1, 1, 0));
    }

    #[test]
    fn a_present_key_that_nothing_deleted_and_cannot_be_found_is_an_error() {
        let phase = plan(vec![(Op::Get, 1), (Op::Delete, 1)], 2);
        // The delete finds nothing as well: with no other delete beside it, both are lost data.
        let stats = run_gated(&phase, &[Op::Get, Op::Delete], false);
        let delete = totals(&stats, Op::Delete);
        assert_eq!(delete, (0, 0, 0, 1), "a delete of a present key that finds nothing, alone: an error");
        assert_eq!(totals(&stats, Op::Get), (0, 1, 1, 0), "the get overlapped that delete: raced");

        let gets_only = plan(vec![(Op::Get, 1)], 1);
        let stats = run_gated(&gets_only, &[Op::Get], false);
        assert_eq!(totals(&stats, Op::Get), (0, 0, 0, 1), "never deleted, not found: lost data is an error");
    }

    /// Stores what is put and records every operation's name and key, in order.
    #[derive(Default)]
    struct RecordingSession {
        stored: std::collections::HashMap<String, Vec<u8>>,
        log: Arc<Mutex<Vec<(Op, String)>>>,
    }

    impl Session for RecordingSession {
        fn put(&mut self, key: &str, body: &mut dyn Read, _: u64) -> BResult<()> {
            let mut bytes = Vec::new();
            body.read_to_end(&mut bytes)?;
            self.stored.insert(key.to_string(), bytes);
            self.log.lock().unwrap().push((Op::Put, key.to_string()));
            Ok(())
        }
        fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
            self.log.lock().unwrap().push((Op::Get, key.to_string()));
            let bytes = self.stored.get(key).ok_or_else(|| BackendError::not_found(key))?;
            sink.write_all(bytes)?;
            Ok(bytes.len() as u64)
        }
        fn delete(&mut self, _: &str) -> BResult<()> {
            unreachable!("this phase never deletes")
        }
        fn head(&mut self, key: &str) -> BResult<u64> {
            self.log.lock().unwrap().push((Op::Head, key.to_string()));
            self.stored.get(key).map(|b| b.len() as u64).ok_or_else(|| BackendError::not_found(key))
        }
    }

    #[test]
    fn a_sequence_runs_in_order_and_reads_the_nth_newest_put() {
        let phase = PhasePlan {
            label: "sequence put-get-head".into(),
            mix: vec![(Op::Put, 1), (Op::Get, 1), (Op::Head, 1)],
            stop: Stop { count: Some(7), ..Stop::default() },
            sequence: true,
            read_recent: Some(3),
            ..PhasePlan::single(Op::Put, KeyOrder::Sequential)
        };
        let (keys, flag) = (KeyTable::new(7), AtomicBool::new(false));
        let mut ctx = context(&phase, &keys, 1, &flag);
        ctx.objects = 7;
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut sessions: Vec<Box<dyn Session>> = vec![Box::new(RecordingSession { log: log.clone(), ..Default::default() })];
        let workers = run(&ctx, &mut sessions, &mut [], || ()).unwrap();
        let stats = crate::stats::merge("sequence", workers, 0);
        assert_eq!(totals(&stats, Op::Get), (7, 0, 0, 0), "every read found what was put, verified");
        // Iteration i puts key i, then reads the 3rd newest put: key i-2, or key 0 before that.
        let name = crate::workload::keys::key_name;
        let mut want = Vec::new();
        for i in 0..7u64 {
            let read = name(i.saturating_sub(2));
            want.extend([(Op::Put, name(i)), (Op::Get, read.clone()), (Op::Head, read)]);
        }
        assert_eq!(*log.lock().unwrap(), want);
    }

    #[test]
    fn an_even_split_gives_each_worker_its_own_share_of_the_count() {
        let phase = PhasePlan { stop: Stop { count: Some(10), ..Stop::default() }, even_split: true, ..PhasePlan::single(Op::Put, KeyOrder::Sequential) };
        let (keys, flag) = (KeyTable::new(10), AtomicBool::new(false));
        let mut ctx = context(&phase, &keys, 1, &flag);
        ctx.objects = 10;
        let logs: Vec<_> = (0..4).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        let mut sessions: Vec<Box<dyn Session>> =
            logs.iter().map(|log| Box::new(RecordingSession { log: log.clone(), ..Default::default() }) as Box<dyn Session>).collect();
        run(&ctx, &mut sessions, &mut [], || ()).unwrap();
        // Worker w puts keys w, w + 4, …: the same on every run, however the threads are scheduled.
        for (w, log) in logs.iter().enumerate() {
            let want: Vec<_> = (w as u64..10).step_by(4).map(|k| (Op::Put, crate::workload::keys::key_name(k))).collect();
            assert_eq!(*log.lock().unwrap(), want, "worker {w}");
        }
    }

    #[test]
    fn a_get_phase_stopped_by_bytes_stops_after_reading_them() {
        let (keys, flag) = (KeyTable::new(10), AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut sessions: Vec<Box<dyn Session>> = vec![Box::new(RecordingSession { log: log.clone(), ..Default::default() })];
        let puts = PhasePlan { stop: Stop { count: Some(10), ..Stop::default() }, ..PhasePlan::single(Op::Put, KeyOrder::Sequential) };
        let mut ctx = context(&puts, &keys, 1, &flag);
        ctx.objects = 10;
        run(&ctx, &mut sessions, &mut [], || ()).unwrap();
        // Objects are 100 bytes (see `context`): 300 bytes is three gets.
        let gets = PhasePlan { stop: Stop { bytes: Some(300), ..Stop::default() }, ..PhasePlan::single(Op::Get, KeyOrder::Sequential) };
        let mut ctx = context(&gets, &keys, 1, &flag);
        ctx.objects = 10;
        let stats = crate::stats::merge("get", run(&ctx, &mut sessions, &mut [], || ()).unwrap(), 0);
        assert_eq!(totals(&stats, Op::Get), (3, 0, 0, 0));
    }

    /// Puts that take 10 ms, or (`panics`) a put that panics at once, like a backend bug.
    struct SlowOrPanicking {
        panics: bool,
    }

    impl Session for SlowOrPanicking {
        fn put(&mut self, _: &str, body: &mut dyn Read, _: u64) -> BResult<()> {
            assert!(!self.panics, "injected backend bug");
            std::io::copy(body, &mut std::io::sink())?;
            std::thread::sleep(std::time::Duration::from_millis(10));
            Ok(())
        }
        fn get(&mut self, _: &str, _: &mut dyn Write) -> BResult<u64> {
            unreachable!("this phase only puts")
        }
        fn delete(&mut self, _: &str) -> BResult<()> {
            unreachable!("this phase only puts")
        }
        fn head(&mut self, _: &str) -> BResult<u64> {
            unreachable!("this phase only puts")
        }
    }

    #[test]
    fn a_panicking_worker_stops_the_others_instead_of_running_out_the_duration() {
        let phase = PhasePlan { stop: Stop { duration_ns: Some(60_000_000_000), ..Stop::default() }, ..PhasePlan::single(Op::Put, KeyOrder::Uniform) };
        let (keys, flag) = (KeyTable::new(10), AtomicBool::new(false));
        let mut ctx = context(&phase, &keys, 1, &flag);
        ctx.objects = 10;
        let mut sessions: Vec<Box<dyn Session>> = vec![Box::new(SlowOrPanicking { panics: true }), Box::new(SlowOrPanicking { panics: false })];
        let started = std::time::Instant::now();
        let Err(err) = run(&ctx, &mut sessions, &mut [], || ()) else { panic!("a panicking worker fails the phase") };
        assert!(err.contains("worker 0 panicked") && err.contains("injected backend bug"), "{err}");
        // Generous for a loaded machine; the phase would otherwise last its 60 s.
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "the other worker ran on for {:?}", started.elapsed());
    }
}
