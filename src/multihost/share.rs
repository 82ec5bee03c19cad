//! One rank's share of a plan: its workers, as if every rank's workers were the workers of one
//! process, with the keys, counts, bytes and rates that go with them. Every rank computes the
//! same shares from the same plan, so a plan that cannot be shared is refused by every rank alike.

use crate::job::{CasePlan, Plan, Stop};
use crate::runner::keytable::KeySpace;
use std::sync::Arc;

/// The part of `total` that belongs to the workers `before..before + mine` of `all`: the parts of
/// all ranks add up to `total` exactly.
pub fn portion(total: u64, before: u64, mine: u64, all: u64) -> u64 {
    let upto = |w: u64| (total as u128 * w as u128 / all as u128) as u64;
    upto(before + mine) - upto(before)
}

/// Workers of `threads` that rank `rank` of `size` runs, and how many lower ranks run: the first
/// `threads % size` ranks run one more.
pub fn workers_of(threads: u64, rank: u64, size: u64) -> (u64, u64) {
    let (each, extra) = (threads / size, threads % size);
    let before = rank * each + rank.min(extra);
    (before, each + u64::from(rank < extra))
}

/// Rank `rank` of `size`'s plan: each case with its share of the workers, keys, counted
/// operations, bytes and open-loop rate; `{rank}` expanded in target options and `work_dir`; and
/// a seed of its own (rank 0 keeps the job's), so ranks do not write identical payloads or walk
/// keys in the same random order.
pub fn local_plan(plan: &Plan, rank: usize, size: usize) -> Result<Plan, String> {
    if !plan.fio.is_empty() {
        return Err("fio sweeps run on one host: run the [[fio]] tables without mpirun (stowbench fio), and the rest of the job with it".into());
    }
    let mut local = plan.clone();
    if let Some(w) = plan.workloads.iter().find(|w| w.file_server) {
        return Err(format!("workload \"{}\" is a file-server workload, whose catalog audit needs every upload in one process; run it without mpirun", w.name));
    }
    if rank > 0 {
        local.seed = plan.seed ^ crate::hash::xxh3_64(format!("rank {rank}").as_bytes());
    }
    local.work_dir = plan.work_dir.as_deref().map(|d| crate::backend::options::with_rank(d, rank));
    for target in &mut local.targets {
        target.options.expand_rank(rank);
    }
    local.cases = plan.cases.iter().map(|case| share_of_case(case, rank as u64, size as u64)).collect::<Result<_, _>>()?;
    Ok(local)
}

fn share_of_case(case: &CasePlan, rank: u64, size: u64) -> Result<CasePlan, String> {
    let all = case.threads as u64;
    if all < size {
        return Err(format!(
            "case {}: {all} worker(s) cannot be shared by {size} ranks; every rank needs at least one (give threads = {size} or more, or fewer ranks)",
            case.id
        ));
    }
    let (before, mine) = workers_of(all, rank, size);
    let part = |total: u64| portion(total, before, mine, all);
    let objects = part(case.objects);
    if objects == 0 {
        return Err(format!("case {}: {} object(s) cannot be shared by {all} workers on {size} ranks; give objects = {all} or more", case.id, case.objects));
    }
    let share_stop = |stop: Stop| Stop { count: stop.count.map(part), bytes: stop.bytes.map(part), ..stop };
    let mut workload = (*case.workload).clone();
    for phase in &mut workload.phases {
        phase.stop = share_stop(phase.stop);
        phase.warmup = phase.warmup.map(share_stop);
        if let Some(rate) = &mut phase.rate {
            rate.per_s = rate.per_s * mine as f64 / all as f64;
        }
    }
    Ok(CasePlan { objects, threads: mine as u32, workload: Arc::new(workload), ..case.clone() })
}

/// Rank `rank` of `size`'s keys of `case` (the whole job's case) when keys are shared: the range
/// it writes (the keys that go with its workers, as `local_plan` shares them) and where its
/// sequential reads start (the next rank's range).
pub fn key_space(case: &CasePlan, rank: usize, size: usize) -> KeySpace {
    let threads = case.threads as u64;
    let first_of = |r: usize| portion(case.objects, 0, workers_of(threads, r as u64, size as u64).0, threads);
    KeySpace { first: first_of(rank), all: case.objects, reads_from: first_of((rank + 1) % size) }
}
