//! Resource figures for a case: CPU time and peak memory of stowbench itself and of a server's
//! whole process tree (PostgreSQL forks a process per connection, so the tree is summed), plus
//! facts about the filesystem under a path and dropping the page cache for cold runs.
//!
//! Everything is read from /proc; nothing here changes another process. Sampling runs on its own
//! thread every 50 ms, with a file table of its own (see `threads`), and costs the measured
//! workers nothing but that thread's CPU; the one reading that also holds up a server, its
//! proportional set size, is taken once a second (`PssSchedule`).

use crate::report::model::Resources;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// Samples between two walks of a server's process tree (one a second).
const TREE_EVERY: u64 = 20;
/// The usual time between two readings of a server's proportional set size (`PssSchedule`).
const PSS_EVERY: Duration = Duration::from_secs(1);
/// Over time a PSS reading may take at most 1/PSS_COST_SHARE of the sampler's time (1 % of a
/// core), and 1/PSS_GROWTH_COST_SHARE (5 %) while the server's memory grows.
const PSS_COST_SHARE: u32 = 100;
const PSS_GROWTH_COST_SHARE: u32 = 20;
/// Growth of the server's resident memory since the last PSS reading that asks for one early:
/// an eighth of it, and at least this much.
const PSS_GROWTH_FLOOR: u64 = 4 << 20;

/// stowbench's own (user, system) CPU time so far, in nanoseconds.
pub fn self_cpu_ns() -> (u64, u64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return (0, 0);
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (ns(usage.ru_utime), ns(usage.ru_stime))
}

fn status_kib(pid: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resident memory of this process now, in bytes.
pub fn self_rss_bytes() -> u64 {
    rss_bytes_of(&[std::process::id()])
}

/// Peak resident memory of this process since start or since the last reset, in bytes.
pub fn self_peak_rss_bytes() -> u64 {
    status_kib("self", "VmHWM:").unwrap_or(0) * 1024
}

/// Resets the kernel's peak-RSS mark for this process (Linux `clear_refs` value 5).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `root` and all its descendants that are alive now.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut tree = descendants_by_children_files(root).unwrap_or_else(|| descendants_by_scan(root));
    tree.retain(|p| Path::new(&format!("/proc/{p}")).exists());
    tree
}

/// The tree read from each thread's `children` list (CONFIG_PROC_CHILDREN, on in Debian's
/// kernels): the files of the tree's own processes only. A scan of /proc opens every process's
/// stat instead (some 400 system calls on an idle machine), and the sampler asks for the tree
/// while the measured work runs. None when the kernel has no such lists.
fn descendants_by_children_files(root: u32) -> Option<Vec<u32>> {
    if !Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
        let root_gone = !Path::new(&format!("/proc/{root}")).exists();
        return root_gone.then(Vec::new);
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let pid = tree[i];
        // A thread's list holds the children it forked; a process that exits meanwhile has none.
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let Ok(list) = std::fs::read_to_string(task.path().join("children")) else { continue };
                tree.extend(list.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
            }
        }
        i += 1;
    }
    Some(tree)
}

/// The tree from every process's parent, found by reading the stat of every process.
fn descendants_by_scan(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            if let Some(ppid) = stat_fields(pid).and_then(|f| f.get(1).and_then(|p| p.parse().ok())) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    tree
}

/// Fields of /proc/PID/stat after the command name: [state, ppid, ...].
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// When `pid` started (clock ticks after boot, field 22 of its stat): with the pid, it names
/// one process, where a pid alone may be reused. None for a process that is gone, or dead and
/// not yet reaped (a zombie).
fn started_at(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    if fields.first().is_some_and(|state| state == "Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// The sampled server roots, each with its start time, to tell at the case's end which ended.
fn identities(roots: &[u32]) -> Vec<(u32, Option<u64>)> {
    roots.iter().map(|pid| (*pid, started_at(*pid))).collect()
}

/// CPU time (user + system) of the given processes, in nanoseconds.
pub fn cpu_ns_of(pids: &[u32]) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    pids.iter()
        .filter_map(|p| stat_fields(*p))
        .map(|f| {
            // utime and stime are fields 14 and 15 of stat, i.e. 11 and 12 after the name.
            let t = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            (t(11) + t(12)) * 1_000_000_000 / ticks
        })
        .sum()
}

/// Bytes this process and the given ones have made the kernel fetch from the storage layer:
/// `read_bytes` of /proc/PID/io (page-cache misses and their readahead; reads the page cache
/// served are not in it). None when any of them cannot be read: a kernel without task I/O
/// accounting, or another user's process without the privilege.
pub fn device_read_bytes_of(pids: &[u32]) -> Option<u64> {
    let read_bytes = |pid: String| -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
        text.lines().find_map(|l| l.strip_prefix("read_bytes:")).and_then(|v| v.trim().parse().ok())
    };
    std::iter::once("self".to_string()).chain(pids.iter().map(u32::to_string)).map(read_bytes).sum()
}

/// Summed resident memory of the given processes, in bytes.
pub fn rss_bytes_of(pids: &[u32]) -> u64 {
    // statm's second field is VmRSS in pages, in a line a tenth of the length of status.
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let resident = |pid: &u32| -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
        text.split_whitespace().nth(1)?.parse().ok()
    };
    pids.iter().filter_map(resident).sum::<u64>() * page
}

/// Summed memory of a server's processes, in bytes: each one's proportional set size (PSS, from
/// /proc/PID/smaps_rollup: a page shared by N processes counts 1/N in each), so that
/// PostgreSQL's shared buffers, mapped by every backend, count once, as a single-process
/// server's would. Resident memory (RSS) for a process whose PSS cannot be read. Summed RSS
/// read 4× the PSS sum of PostgreSQL with four sessions (QA, session 19).
pub fn server_memory_bytes_of(pids: &[u32]) -> u64 {
    let pss = |pid: &u32| -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
        let kib: u64 = text.lines().find_map(|l| l.strip_prefix("Pss:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    };
    pids.iter().map(|pid| pss(pid).unwrap_or_else(|| rss_bytes_of(std::slice::from_ref(pid)))).sum()
}

/// When the sampler reads a server's proportional set size. /proc/PID/smaps_rollup walks every
/// page table of the process under its memory-map lock: 7.5 ms for a MinIO holding 320 MiB, on
/// the cores the measured work runs on, while any fault or mapping change of the server waits.
/// Read every 50 ms, that took 15 % of a core and held one-stream s3 puts 5 % below warp's
/// (docs/performance/s3-vs-warp.md, session 34). The resident memory beside it is a counter the kernel
/// keeps (statm, 17 µs), read every sample: a reading is due once a second, sooner when the
/// resident memory has grown by an eighth since the last one (a peak on its way), and never so
/// often that readings take more than 1 % of the time (5 % while memory grows).
#[derive(Debug, Default)]
struct PssSchedule {
    /// When the last reading ended, what it cost, and the resident memory then.
    last: Option<(std::time::Instant, Duration, u64)>,
}

impl PssSchedule {
    fn due(&self, now: std::time::Instant, resident: u64) -> bool {
        let Some((end, cost, resident_then)) = self.last else { return true };
        let since = now.saturating_duration_since(end);
        let grown = resident > resident_then + (resident_then / 8).max(PSS_GROWTH_FLOOR);
        since >= PSS_EVERY.max(cost * PSS_COST_SHARE) || (grown && since >= cost * PSS_GROWTH_COST_SHARE)
    }

    fn read(&mut self, start: std::time::Instant, end: std::time::Instant, resident: u64) {
        self.last = Some((end, end.saturating_duration_since(start), resident));
    }
}

/// Samples memory of stowbench and of server trees while a case runs.
pub struct ResourceSampler {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<(u64, u64)>>,
    thread: Option<JoinHandle<()>>,
    /// The server pids sampled now (shared with the sampling thread: a restart replaces them).
    server_roots: Arc<Mutex<Vec<u32>>>,
    /// Every server pid of the case, restarted ones included, for the report.
    all_server_roots: Vec<u32>,
    cpu_start: (u64, u64),
    server_cpu_start: u64,
    /// Server CPU used by processes that have since been restarted away.
    server_cpu_banked: u64,
    /// The server roots sampled now, with their start times (`identities`).
    server_identities: Vec<(u32, Option<u64>)>,
    rss_start: u64,
    peak_reset: bool,
}

impl ResourceSampler {
    /// Starts sampling; `server_roots` are the server pids whose trees are summed.
    pub fn start(server_roots: Vec<u32>) -> Self {
        let rss_start = self_rss_bytes();
        let peak_reset = reset_peak_rss();
        let stop = Arc::new(AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new((rss_start, 0)));
        let roots = Arc::new(Mutex::new(server_roots.clone()));
        let (stop2, peaks2, roots2) = (stop.clone(), peaks.clone(), roots.clone());
        let thread = std::thread::Builder::new()
            .spawn(move || {
                // Off the workers' file table (see crate::threads); named once it is.
                crate::threads::leave_file_table(&[]);
                crate::threads::name_current_thread("stowbench-sampl");
                // The trees are walked again every TREE_EVERY samples, not every sample: a
                // server's processes come and go at connection setup, and walking them is most
                // of a sample's cost (taken from the cores the measured work runs on).
                let mut trees: (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new()); // (roots, members)
                let mut sample = 0u64;
                let mut pss = PssSchedule::default();
                while !stop2.load(Ordering::Relaxed) {
                    let own = self_rss_bytes();
                    let now = roots2.lock().expect("sampler lock").clone();
                    if now != trees.0 || sample % TREE_EVERY == 0 {
                        if now != trees.0 {
                            pss = PssSchedule::default(); // a restarted server: read it at once
                        }
                        trees = (now.clone(), now.iter().flat_map(|r| process_tree(*r)).collect());
                    }
                    sample += 1;
                    let resident = rss_bytes_of(&trees.1);
                    let start = std::time::Instant::now();
                    let server = pss.due(start, resident).then(|| {
                        let server = server_memory_bytes_of(&trees.1);
                        pss.read(start, std::time::Instant::now(), resident);
                        server
                    });
                    let mut p = peaks2.lock().expect("sampler lock");
                    p.0 = p.0.max(own);
                    p.1 = p.1.max(server.unwrap_or(0));
                    drop(p);
                    std::thread::sleep(SAMPLE_EVERY);
                }
            })
            .ok();
        let server_cpu_start = server_roots.iter().map(|r| cpu_ns_of(&process_tree(*r))).sum();
        let server_identities = identities(&server_roots);
        ResourceSampler {
            stop,
            peaks,
            thread,
            server_roots: roots,
            all_server_roots: server_roots,
            cpu_start: self_cpu_ns(),
            server_cpu_start,
            server_cpu_banked: 0,
            server_identities,
            rss_start,
            peak_reset,
        }
    }

    fn server_cpu_now(&self) -> u64 {
        self.server_roots.lock().expect("sampler lock").iter().map(|r| cpu_ns_of(&process_tree(*r))).sum()
    }

    /// Follows a server restarted mid-case: `banked` is what the old processes used up to their
    /// last sample before the restart (read it with `server_cpu_before_restart` while they run),
    /// and from now on `new_roots` are sampled.
    pub fn replace_server(&mut self, banked: u64, new_roots: Vec<u32>) {
        self.server_cpu_banked += banked;
        for pid in &new_roots {
            if !self.all_server_roots.contains(pid) {
                self.all_server_roots.push(*pid);
            }
        }
        self.server_identities = identities(&new_roots);
        *self.server_roots.lock().expect("sampler lock") = new_roots;
        self.server_cpu_start = self.server_cpu_now();
    }

    /// Every process of the servers sampled now (after a restart, the new ones).
    pub fn server_processes(&self) -> Vec<u32> {
        self.server_roots.lock().expect("sampler lock").iter().flat_map(|r| process_tree(*r)).collect()
    }

    /// Server CPU used since sampling started (or the last restart), before a restart takes
    /// the processes, and their counters, away.
    pub fn server_cpu_before_restart(&self) -> u64 {
        self.server_cpu_now().saturating_sub(self.server_cpu_start)
    }

    /// Stops sampling and returns the figures for the case.
    pub fn finish(mut self) -> Resources {
        let (user, system) = self_cpu_ns();
        let server_cpu_end = self.server_cpu_now();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The server's memory at the case's end, which the last scheduled reading may be up to
        // a second short of (a server's caches grow over a case).
        let server_end = server_memory_bytes_of(&self.server_processes());
        let (sampled_peak, server_peak) = *self.peaks.lock().expect("sampler lock");
        let server_peak = server_peak.max(server_end);
        let kernel_peak = if self.peak_reset { self_peak_rss_bytes() } else { 0 };
        let has_server = !self.all_server_roots.is_empty();
        // A server process that ended (or whose pid now names another process) took its CPU
        // counters with it: the difference would read as 0 or as a stranger's time.
        let lost: Vec<u32> = self.server_identities.iter().filter(|(pid, at)| at.is_none() || started_at(*pid) != *at).map(|(pid, _)| *pid).collect();
        Resources {
            client_cpu_user_ns: user.saturating_sub(self.cpu_start.0),
            client_cpu_system_ns: system.saturating_sub(self.cpu_start.1),
            client_rss_start_bytes: self.rss_start,
            client_rss_peak_bytes: sampled_peak.max(kernel_peak),
            server_cpu_ns: (has_server && lost.is_empty()).then(|| self.server_cpu_banked + server_cpu_end.saturating_sub(self.server_cpu_start)),
            server_rss_peak_bytes: has_server.then_some(server_peak),
            server_pids: self.all_server_roots.clone(),
            server_pids_lost: lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_ended_during_the_case_has_no_cpu_figure_and_is_named() {
        let mut kept = std::process::Command::new("sleep").arg("30").spawn().expect("spawn sleep");
        let mut ended = std::process::Command::new("sleep").arg("30").spawn().expect("spawn sleep");
        let running = ResourceSampler::start(vec![kept.id()]).finish();
        assert!(running.server_cpu_ns.is_some() && running.server_pids_lost.is_empty(), "{running:?}");
        let sampler = ResourceSampler::start(vec![kept.id(), ended.id()]);
        ended.kill().unwrap();
        ended.wait().unwrap();
        let resources = sampler.finish();
        assert_eq!(resources.server_cpu_ns, None, "its CPU time went with it");
        assert_eq!(resources.server_pids_lost, vec![ended.id()]);
        assert_eq!(resources.server_pids, vec![kept.id(), ended.id()]);
        kept.kill().unwrap();
        kept.wait().unwrap();
    }

    #[test]
    fn own_process_tree_and_figures() {
        let me = std::process::id();
        assert!(process_tree(me).contains(&me));
        // A test binary run alone may not have used a clock tick of CPU yet (stat counts in
        // 10 ms ticks): work until getrusage's exact figure shows 50 ms, then both must see it.
        let (mut x, give_up) = (0u64, std::time::Instant::now() + Duration::from_secs(30));
        while self_cpu_ns().0 + self_cpu_ns().1 < 50_000_000 && std::time::Instant::now() < give_up {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        assert!(cpu_ns_of(&[me]) > 0);
        assert!(rss_bytes_of(&[me]) > 1 << 20);
        // PSS: never above RSS, and more than nothing for a process that holds memory.
        let pss = server_memory_bytes_of(&[me]);
        assert!(pss > 1 << 20 && pss <= rss_bytes_of(&[me]) + (1 << 20), "{pss}");
    }

    #[test]
    fn a_server_s_pss_is_read_once_a_second_sooner_when_it_grows_and_within_its_cost_share() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut pss = PssSchedule::default();
        assert!(pss.due(t0, 100 << 20), "the first sample reads it");
        pss.read(t0, at(2), 100 << 20); // a 2 ms reading of a server resident at 100 MiB
        assert!(!pss.due(at(50), 100 << 20) && !pss.due(at(1001), 110 << 20), "growth below an eighth waits");
        assert!(pss.due(at(1002), 100 << 20), "a second after the last one");
        assert!(!pss.due(at(41), 120 << 20), "growth of a fifth, but within 20 readings' time");
        assert!(pss.due(at(42), 120 << 20), "growth of a fifth, after 20 readings' time");
        // A costly reading (30 ms) is taken a hundred times its cost apart, and early only twenty.
        pss.read(at(1000), at(1030), 100 << 20);
        assert!(!pss.due(at(1030 + 2999), 100 << 20) && pss.due(at(1030 + 3000), 100 << 20));
        assert!(!pss.due(at(1030 + 599), 200 << 20) && pss.due(at(1030 + 600), 200 << 20));
        // A small server: growth below the floor (4 MiB) waits for the second.
        pss.read(at(5000), at(5001), 8 << 20);
        assert!(!pss.due(at(5500), 11 << 20) && pss.due(at(5500), 13 << 20));
    }

    #[test]
    fn both_ways_of_walking_a_tree_find_a_child_and_its_child() {
        // sh forks sleep and waits for it: a child and a grandchild of the test process (other
        // tests may have children of their own meanwhile, so only these are looked for).
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30; true"]).spawn().expect("spawn sh");
        let (me, sh) = (std::process::id(), child.id());
        let children_of_sh = || std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap_or_default();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while children_of_sh().trim().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let sleep: u32 = children_of_sh().trim().parse().expect("sh has forked sleep");
        let by_files = descendants_by_children_files(me).expect("this kernel lists children");
        let by_scan = descendants_by_scan(me);
        // Only sleep is killed: sh then reaps it and exits, and is reaped here. Killing sh
        // would leave sleep running, then a zombie of whoever adopts it. Its pid cannot have
        // been reused, since sh, its parent, has not reaped it yet.
        // SAFETY: kill only sends a signal.
        unsafe { libc::kill(sleep as i32, libc::SIGKILL) };
        let _ = child.wait();
        for pid in [me, sh, sleep] {
            assert!(by_files.contains(&pid), "{pid} not in {by_files:?}");
            assert!(by_scan.contains(&pid), "{pid} not in {by_scan:?}");
        }
        assert_eq!(descendants_by_children_files(u32::MAX), Some(Vec::new()), "a process that is gone has no tree");
    }
}
