//! Which case of one run is which case of another. Repeats of a case share its id but for the
//! final `/rN`, so a run's cases are first grouped by that base id. Groups are then paired by
//! base id; those left over are paired by what the case measured (target, workload, object size
//! and threads; for fio, every axis but the sweep's name), when exactly one group on each side
//! has it. Whatever is left is listed, never guessed.

use crate::fio::FioCaseResult;
use crate::report::model::{CaseResult, RunReport};
use serde::{Deserialize, Serialize};

/// One case of a report, of either kind.
#[derive(Debug, Clone, Copy)]
pub enum Measured<'a> {
    /// An object-store case.
    Object(&'a CaseResult),
    /// A fio case.
    Fio(&'a FioCaseResult),
}

/// The repeats of one case in one report.
#[derive(Debug)]
pub struct Group<'a> {
    /// The case id without its repeat suffix.
    pub id: String,
    /// What the case measured, to pair it when ids differ.
    pub conditions: String,
    /// The repeats, in run order.
    pub repeats: Vec<Measured<'a>>,
}

/// How two groups were paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    /// The same case id.
    Id,
    /// Different ids, the same target, workload, size and threads (fio: the same axes).
    Conditions,
}

/// Two groups that measured the same case.
#[derive(Debug)]
pub struct Pair<'r, 'a> {
    /// The baseline's repeats.
    pub baseline: &'r Group<'a>,
    /// The candidate's repeats.
    pub candidate: &'r Group<'a>,
    /// How they were paired.
    pub matched_by: MatchedBy,
}

/// Pairs of groups, and the groups of each side that have no partner.
#[derive(Debug)]
pub struct Pairing<'r, 'a> {
    /// Paired groups, in the baseline's order.
    pub pairs: Vec<Pair<'r, 'a>>,
    /// Baseline groups without a partner, with the reason.
    pub baseline_only: Vec<(&'r Group<'a>, &'static str)>,
    /// Candidate groups without a partner, with the reason.
    pub candidate_only: Vec<(&'r Group<'a>, &'static str)>,
}

/// The id without a trailing `/rN` (N a number): what the repeats of a case share.
pub fn without_repeat(id: &str) -> &str {
    match id.rsplit_once('/') {
        Some((base, last)) if last.len() > 1 && last.starts_with('r') && last[1..].bytes().all(|b| b.is_ascii_digit()) => base,
        _ => id,
    }
}

/// The report's cases grouped by base id, in first-seen order.
pub fn groups(report: &RunReport) -> Vec<Group<'_>> {
    let cases = report.cases.iter().map(Measured::Object).chain(report.fio_cases.iter().map(Measured::Fio));
    let mut out: Vec<Group> = Vec::new();
    for case in cases {
        let id = without_repeat(case.id()).to_string();
        match out.iter_mut().find(|g| g.id == id) {
            Some(group) => group.repeats.push(case),
            None => out.push(Group { conditions: case.conditions(), id, repeats: vec![case] }),
        }
    }
    out
}

impl Measured<'_> {
    /// Why the case failed, when it did.
    pub fn failure(&self) -> Option<String> {
        match self {
            Measured::Object(c) if c.status != crate::report::model::CaseStatus::Ok => Some(c.failure.clone().unwrap_or_else(|| c.status.to_string())),
            Measured::Object(_) => None,
            Measured::Fio(_) => None, // a failed fio case is not kept among the measured ones
        }
    }

    /// The case id.
    pub fn id(&self) -> &str {
        match self {
            Measured::Object(c) => &c.case_id,
            Measured::Fio(c) => &c.case_id,
        }
    }

    /// What the case measured, without names a job chooses freely (the fio sweep's name).
    fn conditions(&self) -> String {
        match self {
            Measured::Object(c) => format!("{} · {} · {} bytes · {} threads", c.target, c.workload, c.size_bytes_max, c.threads),
            Measured::Fio(c) => format!(
                "fio · {} · {} · bs {} · {} jobs · qd {} · {} files · {} bytes{}",
                c.target_label,
                c.rw,
                c.bs_bytes,
                c.numjobs,
                c.iodepth,
                c.nrfiles,
                c.size_bytes,
                if c.share_files { " shared" } else { "" }
            ),
        }
    }
}

/// Pairs the baseline's groups with the candidate's.
pub fn pair<'r, 'a>(baseline: &'r [Group<'a>], candidate: &'r [Group<'a>]) -> Pairing<'r, 'a> {
    let mut partner: Vec<Option<(usize, MatchedBy)>> =
        baseline.iter().map(|b| candidate.iter().position(|c| c.id == b.id).map(|j| (j, MatchedBy::Id))).collect();
    let taken = |partner: &[Option<(usize, MatchedBy)>], j: usize| partner.iter().flatten().any(|(k, _)| *k == j);
    let mut ambiguous: Vec<String> = Vec::new();
    for i in 0..baseline.len() {
        if partner[i].is_some() {
            continue;
        }
        let conditions = &baseline[i].conditions;
        let same_in_baseline = (0..baseline.len()).filter(|&k| partner[k].is_none() && baseline[k].conditions == *conditions).count();
        let same_in_candidate: Vec<usize> = (0..candidate.len()).filter(|&j| !taken(&partner, j) && candidate[j].conditions == *conditions).collect();
        match (same_in_baseline, same_in_candidate.as_slice()) {
            (1, [j]) => partner[i] = Some((*j, MatchedBy::Conditions)),
            (_, []) => {}
            _ => ambiguous.push(conditions.clone()),
        }
    }
    let reason =
        |group: &Group, side: &'static str| if ambiguous.contains(&group.conditions) { "several cases measured the same; pair them by id" } else { side };
    Pairing {
        pairs: partner
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.map(|(j, matched_by)| Pair { baseline: &baseline[i], candidate: &candidate[j], matched_by }))
            .collect(),
        baseline_only: (0..baseline.len()).filter(|&i| partner[i].is_none()).map(|i| (&baseline[i], reason(&baseline[i], "only in the baseline"))).collect(),
        candidate_only: (0..candidate.len())
            .filter(|&j| !taken(&partner, j))
            .map(|j| (&candidate[j], reason(&candidate[j], "only in the candidate")))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_numbered_r_suffix_is_a_repeat() {
        assert_eq!(without_repeat("fs/w/4KiB/t1/r12"), "fs/w/4KiB/t1");
        assert_eq!(without_repeat("fio/e3/xfs/read/bs8KiB/j1/qd1/f1/s50MB"), "fio/e3/xfs/read/bs8KiB/j1/qd1/f1/s50MB");
        assert_eq!(without_repeat("a/r"), "a/r");
        assert_eq!(without_repeat("a/rx1"), "a/rx1");
    }

    fn group(id: &str, conditions: &str) -> Group<'static> {
        Group { id: id.into(), conditions: conditions.into(), repeats: Vec::new() }
    }

    #[test]
    fn pairs_by_id_then_by_unique_conditions_and_lists_the_rest() {
        let baseline = [group("a", "A"), group("b", "B"), group("c", "C"), group("d1", "D"), group("d2", "D")];
        let candidate = [group("a", "X"), group("b2", "B"), group("e", "E"), group("d3", "D")];
        let pairing = pair(&baseline, &candidate);
        let pairs: Vec<(&str, &str, MatchedBy)> = pairing.pairs.iter().map(|p| (p.baseline.id.as_str(), p.candidate.id.as_str(), p.matched_by)).collect();
        assert_eq!(pairs, [("a", "a", MatchedBy::Id), ("b", "b2", MatchedBy::Conditions)]);
        let only = |list: &[(&Group, &str)]| list.iter().map(|(g, why)| format!("{} {why}", g.id)).collect::<Vec<_>>();
        let ambiguous = "several cases measured the same; pair them by id";
        assert_eq!(only(&pairing.baseline_only), ["c only in the baseline".to_string(), format!("d1 {ambiguous}"), format!("d2 {ambiguous}")]);
        assert_eq!(only(&pairing.candidate_only), ["e only in the candidate".to_string(), format!("d3 {ambiguous}")]);
    }
}
