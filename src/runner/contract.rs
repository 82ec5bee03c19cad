//! Capabilities as contracts: before any data is written, every case is held against what its
//! backend declares (`backend::Capabilities`), and a job that asks for something undeclared is
//! refused with the target, the workload and the fix — not discovered as errors in the middle of
//! a run. The conformance suite holds each backend to the same declarations from the other side.

use crate::backend::Capabilities;
use crate::job::{CasePlan, PhasePlan, Plan, WorkloadPlan};
use crate::workload::keys::KeyOrder;
use crate::workload::op::Op;

/// Checks every case of target `target` (an index into `plan.targets`) against `caps`: each thing
/// asked for and undeclared is refused with a message for the job's author, every one at once
/// (a message that several cases share, once).
pub fn check(plan: &Plan, target: usize, caps: &Capabilities) -> Result<(), Vec<String>> {
    let mut found: Vec<String> = Vec::new();
    for message in mistakes(plan, target, caps) {
        if !found.contains(&message) {
            found.push(message);
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(found)
    }
}

/// What `check` refuses, case by case, repeats included.
fn mistakes(plan: &Plan, target: usize, caps: &Capabilities) -> Vec<String> {
    let mut found = Vec::new();
    let t = &plan.targets[target];
    // Where the target is written ("job.toml:12"), else the job's source.
    let at = if t.options.origin.is_empty() { &plan.source } else { &t.options.origin };
    let who = format!("{at}: target \"{}\" (backend {})", t.name, t.backend);
    for case in plan.cases.iter().filter(|c| c.target == target) {
        let w = &case.workload;
        if let Some(max) = caps.max_object_bytes.filter(|max| case.size.max_bytes() > *max) {
            let hint = caps.max_object_hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default();
            // Per size, not per case: the repeats and thread counts of a size share the mistake.
            found.push(format!(
                "{who}: workload \"{}\" size {}: objects of up to {} bytes exceed backend {}'s limit of {max} bytes{hint}. Nothing was \
                 written.",
                w.name,
                case.size.label(),
                case.size.max_bytes(),
                t.backend
            ));
        }
        if !caps.delete {
            if let Some(phase) = w.phases.iter().find(|p| p.mix.iter().any(|(op, _)| *op == Op::Delete)) {
                found.push(format!(
                    "{who} cannot delete, and workload \"{}\" phase \"{}\" deletes; remove delete from that phase, or run the \
                     workload on another target. Nothing was written.",
                    w.name, phase.label
                ));
            }
        }
        if !caps.overwrite {
            if let Some(why) = overwrites(w, case) {
                found.push(format!(
                    "{who} cannot replace a stored object, and workload \"{}\" {why}; write each key once (one put phase of \
                     `objects` operations in sequential key order, no preload), or run the workload on another target. \
                     Nothing was written.",
                    w.name
                ));
            }
        }
        if w.op_timeout_ns > 0 && !caps.operation_deadline {
            // At the op_timeout line, the one to remove, rather than the target's.
            let at = w.op_timeout_at.as_deref().unwrap_or(at);
            found.push(format!(
                "{at}: target \"{}\" (backend {}) cannot honour op_timeout: its operations are local calls, which cannot be \
                 abandoned when they overrun; remove op_timeout from workload \"{}\" (it bounds operations of server backends) \
                 or bound the whole run with --timeout. Nothing was written.",
                t.name, t.backend, w.name
            ));
        }
    }
    found
}

/// Why a put of `workload` may land on a key that already holds a value, if it may: a preload
/// before a put phase, two passes of puts (phases or a warm-up), or one phase that may choose a
/// key twice (random key order, or more puts than keys).
fn overwrites(workload: &WorkloadPlan, case: &CasePlan) -> Option<String> {
    let mut keys_stored = workload.preload;
    for phase in workload.phases.iter().filter(|p| puts(p)) {
        let passes = if phase.warmup.is_some() { 2 } else { 1 };
        if keys_stored {
            return Some(format!("puts in phase \"{}\" onto keys an earlier put or the preload stored", phase.label));
        }
        if passes > 1 || !each_key_once(phase, case.objects) {
            return Some(format!("phase \"{}\" may put the same key twice", phase.label));
        }
        keys_stored = true;
    }
    None
}

fn puts(phase: &PhasePlan) -> bool {
    phase.mix.iter().any(|(op, _)| *op == Op::Put)
}

/// Whether a put phase chooses every key at most once: sequential keys, stopped after at most
/// `objects` operations (the default stop is exactly `objects`).
fn each_key_once(phase: &PhasePlan, objects: u64) -> bool {
    let stop = super::phase::effective_stop(phase.stop, objects);
    matches!(phase.key_order, KeyOrder::Sequential)
        && stop.duration_ns.is_none()
        && stop.min_duration_ns.is_none()
        && stop.bytes.is_none()
        && stop.count.is_some_and(|n| n <= objects)
}

/// Backends whose store several processes can use at once when it lives on a filesystem they
/// all see: fs (one file per object, renamed into place) and SQLite's (its file locks; WAL's
/// shared memory needs the processes on one host). Server backends are shared by their server.
/// The others keep the container's index in the one process that writes it (pack, cfb, zip) or
/// keep the store in memory (sim, null).
const SHARED_FILE_BACKENDS: [&str; 3] = ["fs", "sqlite", "sqlite-file"];

/// Why `plan`'s targets cannot be used with shared keys by ranks on `hosts` distinct hosts, if
/// they cannot: a store no two processes may open at once would be corrupted, not measured.
pub fn refuse_shared_keys(plan: &crate::job::Plan, hosts: usize) -> Result<(), String> {
    for target in &plan.targets {
        if crate::backend::server::is_server_backend(&target.backend) {
            continue;
        }
        let fix = "use keys = \"partitioned\" in [mpi] (each rank its own store), or a server backend (s3, postgres, mariadb, gridfs)";
        if !SHARED_FILE_BACKENDS.contains(&target.backend.as_str()) {
            return Err(format!(
                "target \"{}\": backend {} cannot be shared by several processes (its store is kept by the one process that opens it), \
                 so [mpi] keys = \"shared\" would corrupt it; {fix}",
                target.name, target.backend
            ));
        }
        if target.backend != "fs" && hosts > 1 {
            return Err(format!(
                "target \"{}\": backend {} is shared by processes through SQLite's locks and shared memory, which work only between \
                 processes of one host, and the ranks run on {hosts} hosts; run every rank on one host, or {fix}",
                target.name, target.backend
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(caps: Capabilities, workload: &str) -> Option<String> {
        let job = format!("version = 1\n[[target]]\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [10]\nobjects = 5\n{workload}\n");
        let plan = crate::job::load_text(&job, "t.toml").unwrap();
        check(&plan, 0, &caps).err().map(|found| found.join("\n"))
    }

    #[test]
    fn overwrite_is_refused_only_where_a_put_may_meet_a_stored_key() {
        let no_overwrite = || Capabilities { overwrite: false, ..Capabilities::default() };
        // Reads of preloaded keys, and one sequential pass of puts, never replace anything.
        assert_eq!(refusal(no_overwrite(), "phases = [\"get\", \"head\"]"), None);
        assert_eq!(refusal(no_overwrite(), "phases = [\"put\", \"get\"]"), None);
        assert_eq!(refusal(no_overwrite(), "[[workload.phase]]\nmix = { put = 1 }\ncount = 5"), None);
        for (workload, why) in [
            ("[[workload.phase]]\nmix = { put = 1 }\ncount = 6", "may put the same key twice"),
            ("[[workload.phase]]\nmix = { put = 1 }\nduration = \"1s\"", "may put the same key twice"),
            ("[[workload.phase]]\nmix = { put = 1 }\nwarmup_count = 2", "may put the same key twice"),
            ("phases = [\"get\", \"put\"]", "onto keys an earlier put or the preload stored"),
        ] {
            let refused = refusal(no_overwrite(), workload).unwrap_or_else(|| panic!("{workload}: must be refused"));
            assert!(refused.starts_with("t.toml:2: target \"sim\"") && refused.contains(why), "{workload}: {refused}");
        }
    }

    #[test]
    fn each_undeclared_capability_is_named_and_declared_ones_pass() {
        let all = Capabilities { operation_deadline: true, ..Capabilities::default() };
        assert_eq!(refusal(all.clone(), "phases = [\"put\", \"delete\"]\nop_timeout = \"1s\""), None);
        let no_delete = refusal(Capabilities { delete: false, ..all.clone() }, "phases = [\"put\", \"delete\"]").unwrap();
        assert!(no_delete.contains("phase \"delete\" deletes") && no_delete.contains("remove delete from that phase"), "{no_delete}");
        let no_deadline = refusal(Capabilities::default(), "phases = [\"put\"]\nop_timeout = \"1s\"").unwrap();
        assert!(no_deadline.contains("cannot honour op_timeout") && no_deadline.contains("--timeout"), "{no_deadline}");
        // Every undeclared thing at once, each once however many cases share it.
        let job = "version = 1\n[[target]]\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [10, 20]\nobjects = 5\nthreads = [1, 2]\n\
                   phases = [\"put\", \"delete\"]\nop_timeout = \"1s\"\n";
        let plan = crate::job::load_text(job, "t.toml").unwrap();
        let found = check(&plan, 0, &Capabilities { delete: false, ..Capabilities::default() }).unwrap_err();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("cannot delete") && found[1].contains("cannot honour op_timeout"), "{found:?}");
    }
}
