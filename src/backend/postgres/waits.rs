//! Option `wait_sample` of the `postgres` backend: the writer wait a session reports
//! (`Session::wait_ns`), estimated by sampling the server's wait events.
//!
//! PostgreSQL has no single-writer lock to time from the client: concurrent inserts of distinct
//! keys wait inside the server, on heavyweight locks (`Lock`: relation extension, tuple,
//! transaction, our per-key advisory lock) and on lightweight locks (`LWLock`: buffer content —
//! the page latch of the published study — WAL insertion and WAL write). Every `interval` one
//! side thread, on its own connection, reads `pg_stat_activity` for our sessions' backends; each
//! one seen active and waiting on a `Lock` or `LWLock` event is credited one interval. That is an
//! estimate with a resolution of one interval, not a measurement: waits shorter than an interval
//! are seen in proportion to how often they happen. I/O waits (`IO`: WAL fsync, data file reads)
//! are not locks and are not counted. The sampler adds one small query per interval to the
//! server's load; it is off unless the option is set. This module must never block a session.

use super::Shared;
use crate::backend::BResult;
use postgres::Client;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Shortest interval accepted, in nanoseconds: below it the sampling query itself becomes load.
pub(crate) const MIN_INTERVAL_NS: u64 = 1_000_000;

/// The sessions' backend pids and their wait counters, shared with the sampling thread.
#[derive(Default)]
struct Sessions {
    /// (backend pid, nanoseconds that session was seen waiting).
    pids: Mutex<Vec<(i32, Arc<AtomicU64>)>>,
}

/// The sampling thread of one backend, started with its first session, stopped when dropped.
pub(crate) struct WaitSampler {
    interval: Duration,
    sessions: Arc<Sessions>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl WaitSampler {
    /// A sampler that will sample every `interval_ns` once a session registers.
    pub fn new(interval_ns: u64) -> WaitSampler {
        WaitSampler { interval: Duration::from_nanos(interval_ns), sessions: Arc::default(), stop: Arc::default(), thread: Mutex::new(None) }
    }

    /// The sampling interval in whole milliseconds, for the report.
    pub fn interval_ms(&self) -> u128 {
        self.interval.as_millis()
    }

    /// Registers the session on `client` and returns its wait counter, starting the sampling
    /// thread (on a connection of its own) the first time.
    pub fn register(&self, client: &mut Client, shared: &Arc<Shared>) -> BResult<Arc<AtomicU64>> {
        let pid: i32 = client.query_one("SELECT pg_backend_pid()", &[]).map_err(|e| shared.error(e))?.get(0);
        let counter = Arc::new(AtomicU64::new(0));
        self.sessions.pids.lock().unwrap_or_else(|p| p.into_inner()).push((pid, counter.clone()));
        let mut thread = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if thread.is_none() {
            let mut sampler = shared.connect()?;
            let (sessions, stop, interval, shared) = (self.sessions.clone(), self.stop.clone(), self.interval, shared.clone());
            let started = std::thread::Builder::new().name("pg-wait-sampler".into()).spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(interval);
                    // A failed sample (server restarting) is skipped: the estimate only gets coarser.
                    if sample_once(&mut sampler, &sessions, interval).is_err() && sampler.is_closed() {
                        // The server was restarted (a cold read phase): go on with a new connection.
                        if let Ok(fresh) = shared.connect() {
                            sampler = fresh;
                        }
                    }
                }
            })?;
            *thread = Some(started);
        }
        Ok(counter)
    }
}

impl Drop for WaitSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

/// Credits one `interval` to every registered session whose backend is active and waiting on a
/// lock or latch right now.
fn sample_once(client: &mut Client, sessions: &Sessions, interval: Duration) -> Result<(), postgres::Error> {
    let pids: Vec<i32> = sessions.pids.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(pid, _)| *pid).collect();
    let rows = client.query("SELECT pid FROM pg_stat_activity WHERE pid = ANY($1) AND state = 'active' AND wait_event_type IN ('Lock', 'LWLock')", &[&pids])?;
    let registered = sessions.pids.lock().unwrap_or_else(|p| p.into_inner());
    for row in rows {
        let pid: i32 = row.get(0);
        if let Some((_, counter)) = registered.iter().find(|(p, _)| *p == pid) {
            counter.fetch_add(interval.as_nanos() as u64, Ordering::Relaxed);
        }
    }
    Ok(())
}
