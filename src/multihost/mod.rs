//! One job over many client hosts: `mpirun -np N [--hostfile H] stowbench run JOB` (cargo
//! feature `mpi`; docs/multi-host.md). Each rank runs its share of every case's workers
//! (`share`) in a namespace of its own; the ranks start every phase at one barrier, exchange
//! their workers' statistics after it, so that every rank merges all of them as if one process
//! had run every worker, and merge their case results at the end (`merge`). Only rank 0 writes
//! the report.
//!
//! Every exchange is an all-gather that every rank makes at the same point of a case. A rank
//! that fails (or is interrupted) leaves the case and sends "left" at its next exchange, which is
//! the exchange the others are at: they end the case there too, and all meet once more to send
//! their results. So a failure never leaves a rank waiting alone, and the failing rank's message
//! reaches the report.

pub mod merge;
pub mod share;

use crate::clock::Clock;
use crate::error::{Error, Kind};
use crate::job::plan::KeySharing;
use crate::job::{CasePlan, Plan};
use crate::report::model::{CaseResult, RankInfo, RankPhase, RunReport};
use crate::runner::keytable::{KeySpace, KeyTable};
use crate::runner::ranks::{Ranks, Stops};
use crate::stats::WorkerStats;
use mpi::datatype::PartitionMut;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};

/// Whether this process was started by an MPI launcher (mpirun, mpiexec, srun with PMIx).
pub fn launched() -> bool {
    crate::host::started_by_mpirun()
}

/// Ping-pong rounds per rank when measuring clock offsets; the round with the smallest round
/// trip gives the offset.
const CLOCK_ROUNDS: usize = 32;

/// The tag of a stop notice: a point-to-point message (the case's number) that a rank whose
/// share of a phase ended early sends every other rank, which polls for it while its workers run.
/// The collectives carry no tag of their own to collide with.
const STOP_TAG: mpi::Tag = 0x5354;

/// The prefix of the reason a rank gives when it ended a case because another rank left it: the
/// case's failure is the other rank's own message, not this.
pub const ENDED_BY_ANOTHER: &str = "ended because rank";

/// The ranks of an MPI job.
pub struct MpiRanks {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    /// Every rank's host, pid and clock, once `start_run` has measured them.
    infos: RefCell<Vec<RankInfo>>,
    /// Whether the current case has been ended by some rank (no exchanges left but the results).
    case_over: Cell<bool>,
    /// Whether the case's clock is virtual (sim): nothing to align.
    virtual_clock: Cell<bool>,
    /// This case's phases as each rank ran them: (label, one per rank).
    phases: RefCell<Vec<(String, Vec<RankPhase>)>>,
    /// The job's `[mpi] keys`, its seed, and with shared keys this rank's keys of each case (by
    /// case index), once `local_plan` has read the job.
    sharing: Cell<KeySharing>,
    job_seed: Cell<u64>,
    key_spaces: RefCell<Vec<KeySpace>>,
    /// Cases ended so far: the current case's number, which a stop notice carries.
    cases_ended: Cell<u64>,
    /// Whether this rank has sent, or received, a stop notice for the current case.
    stop_sent: Cell<bool>,
    stop_seen: Cell<bool>,
    /// Keeps MPI initialised while the ranks are used; finalises it when dropped.
    _universe: mpi::environment::Universe,
}

/// What one rank said at an exchange: its header and blobs.
type Said = (Header, Vec<Vec<u8>>);

/// What a rank says at an exchange.
#[derive(Serialize, Deserialize, Default)]
struct Header {
    /// This rank has left the case.
    left: bool,
    /// Rank 0's clock, at a phase's start barrier.
    now_ns: u64,
    /// After a phase: how long this rank's sessions waited for a writer lock.
    lock_wait_ns: u64,
    /// Lengths of the blobs that follow the header.
    blobs: Vec<usize>,
}

impl MpiRanks {
    /// Initialises MPI (threads may exist, but only one calls MPI at a time).
    pub fn init() -> Result<MpiRanks, String> {
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized).ok_or("MPI was already initialised in this process")?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        Ok(MpiRanks {
            world,
            rank,
            size,
            infos: RefCell::new(Vec::new()),
            case_over: Cell::new(false),
            virtual_clock: Cell::new(false),
            phases: RefCell::new(Vec::new()),
            sharing: Cell::new(KeySharing::Partitioned),
            job_seed: Cell::new(0),
            key_spaces: RefCell::new(Vec::new()),
            cases_ended: Cell::new(0),
            stop_sent: Cell::new(false),
            stop_seen: Cell::new(false),
            _universe: universe,
        })
    }

    /// Every rank's bytes, in rank order, on every rank.
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        // One byte ahead of every message: an empty Rust buffer's address is 0x1, which Open MPI
        // takes for MPI_IN_PLACE (and refuses in an all-gather's send buffer).
        let mine = [&[b'>'][..], mine].concat();
        let mut counts = vec![0 as Count; self.size];
        let len = Count::try_from(mine.len()).expect("an exchange is below 2 GiB");
        self.world.all_gather_into(&len, &mut counts[..]);
        let displs: Vec<Count> = counts.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect();
        let mut all = vec![0u8; counts.iter().map(|&n| n as usize).sum()];
        {
            let mut partition = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(&mine[..], &mut partition);
        }
        counts.iter().zip(&displs).map(|(&n, &at)| all[at as usize + 1..(at + n) as usize].to_vec()).collect()
    }

    /// An exchange of a case: every rank's header and blobs, or, when some rank has left the
    /// case, why this one ends it too.
    fn exchange(&self, header: Header, blobs: Vec<Vec<u8>>) -> Result<Vec<Said>, String> {
        let header = Header { blobs: blobs.iter().map(Vec::len).collect(), ..header };
        let mut message = serde_json::to_vec(&header).expect("a header serializes");
        message.push(b'\n');
        blobs.iter().for_each(|b| message.extend_from_slice(b));
        let all: Vec<Said> = self.all_gather(&message).iter().map(|m| decode(m)).collect::<Result<_, _>>()?;
        let left: Vec<usize> = all.iter().enumerate().filter(|(_, (h, _))| h.left).map(|(r, _)| r).collect();
        if left.is_empty() {
            return Ok(all);
        }
        self.case_over.set(true);
        let who: Vec<String> = left.iter().map(|&r| format!("{r} ({})", self.host_of(r))).collect();
        Err(format!("{ENDED_BY_ANOTHER} {} left the case (see that rank's failure)", who.join(", ")))
    }

    fn host_of(&self, rank: usize) -> String {
        self.infos.borrow().get(rank).map(|i| i.host.clone()).unwrap_or_else(|| "?".into())
    }

    fn offset_of(&self, rank: usize) -> i64 {
        self.infos.borrow().get(rank).map_or(0, |i| i.clock_offset_ns)
    }

    /// Each rank's clock minus rank 0's and the round trip it was measured with: rank 0
    /// ping-pongs with every other rank in turn and keeps the round with the smallest round trip
    /// (its offset is right to within half of that); then tells every rank.
    fn clock_offsets(&self, clock: &dyn Clock) -> Vec<(i64, u64)> {
        let mut offsets = vec![(0i64, 0u64); self.size];
        for (other, slot) in offsets.iter_mut().enumerate().skip(1) {
            let peer = self.world.process_at_rank(other as i32);
            if self.rank == 0 {
                let mut best: Option<(i64, u64)> = None;
                for _ in 0..CLOCK_ROUNDS {
                    let sent = clock.now_ns();
                    peer.send(&sent);
                    let (theirs, _) = peer.receive::<u64>();
                    let back = clock.now_ns();
                    let rtt = back - sent;
                    let offset = theirs as i64 - (sent + rtt / 2) as i64;
                    if best.is_none_or(|(_, b)| rtt < b) {
                        best = Some((offset, rtt));
                    }
                }
                *slot = best.expect("at least one round");
            } else if self.rank == other {
                let zero = self.world.process_at_rank(0);
                for _ in 0..CLOCK_ROUNDS {
                    let _ = zero.receive::<u64>();
                    zero.send(&clock.now_ns());
                }
            }
        }
        let mine = if self.rank == 0 { serde_json::to_vec(&offsets).expect("offsets serialize") } else { Vec::new() };
        serde_json::from_slice(&self.all_gather(&mine)[0]).expect("rank 0 sent its offsets")
    }
}

fn decode(message: &[u8]) -> Result<Said, String> {
    let end = message.iter().position(|&b| b == b'\n').ok_or("a rank sent a message without a header")?;
    let header: Header = serde_json::from_slice(&message[..end]).map_err(|e| format!("a rank sent a header that does not decode: {e}"))?;
    let mut at = end + 1;
    let mut blobs = Vec::new();
    for &n in &header.blobs {
        blobs.push(message.get(at..at + n).ok_or("a rank sent a message shorter than its header says")?.to_vec());
        at += n;
    }
    Ok((header, blobs))
}

/// An error kind as one byte between ranks, and back.
fn kind_byte(kind: Kind) -> u8 {
    match kind {
        Kind::BadInput => 0,
        Kind::RunFailed => 1,
        Kind::Interrupted => 2,
        Kind::Environment => 3,
    }
}

fn kind_of_byte(byte: u8) -> Kind {
    match byte {
        0 => Kind::BadInput,
        1 => Kind::RunFailed,
        2 => Kind::Interrupted,
        _ => Kind::Environment,
    }
}

impl Ranks for MpiRanks {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn local_plan(&self, plan: &Plan) -> Result<Plan, String> {
        self.sharing.set(plan.mpi_keys);
        self.job_seed.set(plan.seed);
        *self.key_spaces.borrow_mut() = plan.cases.iter().map(|case| share::key_space(case, self.rank, self.size)).collect();
        share::local_plan(plan, self.rank, self.size)
    }

    fn run_directory(&self, run_id: &str) -> (String, String) {
        if self.shares_namespace() {
            return (format!("stowbench-{run_id}"), "sb".into());
        }
        // A directory and object-name prefix per rank: ranks on one host (or sharing a
        // filesystem) never meet, and each cleans up exactly what it made.
        (format!("stowbench-{run_id}-rank{}", self.rank), format!("sb_r{}", self.rank))
    }

    fn start_run(&self, run_id: String, clock: &dyn Clock) -> String {
        let host = mpi::environment::processor_name().unwrap_or_else(|_| "?".into());
        let me = format!("{host}\n{}", std::process::id());
        let all = self.all_gather(me.as_bytes());
        let offsets = self.clock_offsets(clock);
        let infos = all
            .iter()
            .zip(offsets)
            .enumerate()
            .map(|(rank, (who, (offset, rtt)))| {
                let who = String::from_utf8_lossy(who);
                let (host, pid) = who.split_once('\n').unwrap_or((&who, "0"));
                RankInfo { rank: rank as u32, host: host.to_string(), pid: pid.parse().unwrap_or(0), clock_offset_ns: offset, clock_rtt_ns: rtt }
            })
            .collect();
        *self.infos.borrow_mut() = infos;
        String::from_utf8_lossy(&self.all_gather(run_id.as_bytes())[0]).into_owned()
    }

    fn preflight(&self, verdict: Result<(), Error>) -> Result<(), Error> {
        // Each rank sends its refusal's kind (one byte) and words; the run refuses with the first
        // refusing rank's kind, so a server one rank cannot reach is still the environment (3).
        let mine = match &verdict {
            Ok(()) => Vec::new(),
            Err(e) => [&[kind_byte(e.kind)][..], e.message.as_bytes()].concat(),
        };
        let all = self.all_gather(&mine);
        let refusals: Vec<(Kind, String)> = all
            .iter()
            .enumerate()
            .filter_map(|(r, e)| e.split_first().map(|(kind, words)| (r, *kind, words)))
            .map(|(r, kind, words)| (kind_of_byte(kind), format!("rank {r} ({}): {}", self.host_of(r), String::from_utf8_lossy(words))))
            .collect();
        match refusals.first() {
            None => Ok(()),
            Some((kind, _)) => Err(Error::new(*kind, refusals.iter().map(|(_, words)| words.as_str()).collect::<Vec<_>>().join("\n"))),
        }
    }

    fn stop_before_case(&self, interrupted: bool) -> bool {
        self.all_gather(&[interrupted as u8]).iter().any(|flag| flag.first() == Some(&1))
    }

    fn phase_start(&self, clock: &dyn Clock) -> Result<Option<u64>, String> {
        self.virtual_clock.set(clock.is_virtual());
        let now_ns = if self.rank == 0 { clock.now_ns() } else { 0 };
        let all = self.exchange(Header { now_ns, ..Header::default() }, Vec::new())?;
        // Rank 0's reading, on this rank's clock: every rank's timeline counts from one instant.
        Ok((!clock.is_virtual()).then(|| all[0].0.now_ns.saturating_add_signed(self.offset_of(self.rank))))
    }

    fn phase_end(&self, label: &str, workers: Vec<WorkerStats>, lock_wait_ns: u64) -> Result<(Vec<WorkerStats>, u64), String> {
        let blobs = workers.iter().map(WorkerStats::to_bytes).collect();
        let all = self.exchange(Header { lock_wait_ns, ..Header::default() }, blobs)?;
        let lock_wait_ns = all.iter().map(|(h, _)| h.lock_wait_ns).sum();
        let mut merged = Vec::new();
        let mut per_rank = Vec::new();
        for (rank, (_, blobs)) in all.iter().enumerate() {
            let decode = || -> Result<Vec<WorkerStats>, String> {
                blobs
                    .iter()
                    .map(|b| {
                        let mut w = WorkerStats::from_bytes(b)?;
                        if !self.virtual_clock.get() {
                            w.shift_clock(self.offset_of(rank));
                        }
                        // Each rank's workers share its own index counter, not another rank's.
                        w.pool = w.pool.map(|_| rank as u32);
                        Ok(w)
                    })
                    .collect()
            };
            per_rank.push(merge::rank_phase(label, decode()?));
            merged.extend(decode()?);
        }
        let mut phases = self.phases.borrow_mut();
        // A warm-up and its phase share a label: the phase, which comes second, is kept.
        if phases.last().is_some_and(|(last, _)| last == label) {
            phases.pop();
        }
        phases.push((label.to_string(), per_rank));
        Ok((merged, lock_wait_ns))
    }

    fn case_end(&self, case: &CasePlan, local: CaseResult, stops: Stops) -> (CaseResult, Stops) {
        self.leave_case();
        self.case_over.set(false);
        self.stop_requested(); // takes in this case's notices, so none waits for a later poll
        self.cases_ended.set(self.cases_ended.get() + 1);
        self.stop_sent.set(false);
        self.stop_seen.set(false);
        let flags = [stops.interrupted as u8, stops.timed_out as u8];
        let mine = serde_json::to_vec(&(local, flags)).expect("a case result serializes");
        let gathered: Vec<(CaseResult, [u8; 2])> =
            self.all_gather(&mine).iter().map(|m| serde_json::from_slice(m).expect("every rank sends a case result")).collect();
        let stops = Stops { interrupted: gathered.iter().any(|(_, f)| f[0] == 1), timed_out: gathered.iter().any(|(_, f)| f[1] == 1) };
        let results: Vec<CaseResult> = gathered.into_iter().map(|(r, _)| r).collect();
        let phases = std::mem::take(&mut *self.phases.borrow_mut());
        (merge::case(case, results, &self.infos.borrow(), phases, self.shares_namespace()), stops)
    }

    fn describe(&self, report: &mut RunReport) {
        report.ranks = Some(self.infos.borrow().clone());
    }

    fn counts_host_servers(&self) -> bool {
        let infos = self.infos.borrow();
        let host = infos.get(self.rank).map(|i| &i.host);
        infos.iter().find(|i| Some(&i.host) == host).is_none_or(|first| first.rank as usize == self.rank)
    }

    fn shares_namespace(&self) -> bool {
        self.sharing.get() == KeySharing::Shared
    }

    fn lead_first(&self, step: &mut dyn FnMut()) {
        if !self.shares_namespace() {
            return step();
        }
        if self.rank == 0 {
            step();
        }
        self.all_gather(&[]);
        if self.rank != 0 {
            step();
        }
    }

    fn refuse_sharing(&self, plan: &Plan) -> Result<(), String> {
        if !self.shares_namespace() {
            return Ok(());
        }
        let hosts: std::collections::BTreeSet<String> = self.infos.borrow().iter().map(|i| i.host.clone()).collect();
        crate::runner::contract::refuse_shared_keys(plan, hosts.len())
    }

    fn key_space(&self, case: &CasePlan) -> KeySpace {
        match self.key_spaces.borrow().get(case.index) {
            Some(space) if self.shares_namespace() => *space,
            _ => KeySpace::own(case.objects),
        }
    }

    fn payload_seed(&self, local_seed: u64) -> u64 {
        if self.shares_namespace() {
            self.job_seed.get()
        } else {
            local_seed
        }
    }

    fn store_ready(&self) -> Result<(), String> {
        if self.shares_namespace() {
            self.exchange(Header::default(), Vec::new())?;
        }
        Ok(())
    }

    fn share_keys(&self, keys: &KeyTable, space: KeySpace, objects: u64) -> Result<(), String> {
        if !self.shares_namespace() {
            return Ok(());
        }
        let mine = [&space.first.to_le_bytes()[..], &keys.export(space.first..space.first + objects)].concat();
        let all = self.exchange(Header::default(), vec![mine])?;
        for (rank, (_, blobs)) in all.iter().enumerate().filter(|(rank, _)| *rank != self.rank) {
            let blob = blobs.first().filter(|b| b.len() >= 8).ok_or_else(|| format!("rank {rank} sent no key state"))?;
            let first = u64::from_le_bytes(blob[..8].try_into().expect("8 bytes"));
            keys.import(first, &blob[8..]).map_err(|e| format!("rank {rank}: {e}"))?;
        }
        Ok(())
    }

    fn request_stop(&self) {
        if self.case_over.get() || self.stop_sent.replace(true) {
            return;
        }
        let case = self.cases_ended.get();
        for other in (0..self.size).filter(|&r| r != self.rank) {
            // Eight bytes go out eagerly: the send returns without waiting for the other rank.
            self.world.process_at_rank(other as i32).send_with_tag(&case, STOP_TAG);
        }
    }

    fn stop_requested(&self) -> bool {
        while let Some((message, _)) = self.world.any_process().immediate_matched_probe_with_tag(STOP_TAG) {
            let (case, _) = message.matched_receive::<u64>();
            // A notice of an earlier case arrived after that case ended everywhere: nothing to stop.
            if case == self.cases_ended.get() {
                self.stop_seen.set(true);
            }
        }
        self.stop_seen.get()
    }

    fn leave_case(&self) {
        if !self.case_over.get() {
            // This rank is done (or failed): its last exchange of the case tells the others,
            // wherever they are; a failure there only repeats what the results will say.
            let _ = self.exchange(Header { left: true, ..Header::default() }, Vec::new());
            self.case_over.set(true);
        }
    }
}
