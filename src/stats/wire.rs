//! `WorkerStats` as bytes, for ranks of a multi-host run to send to each other (`crate::mpi`):
//! every field `merge` reads, histograms in HdrHistogram's V2 encoding, so the merge of a
//! phase run by many processes is the very merge of one process with all their workers.

use super::{Bucket, FileTally, OpStats, ScheduleTally, WorkerStats};
use crate::backend::ErrorKind;
use crate::job::Arrivals;
use crate::workload::op::Op;
use crate::workload::payload::Mismatch;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct WireWorker {
    ops: Vec<WireOp>,
    origin_ns: u64,
    resolution_ns: u64,
    /// Buckets as [ops, bytes, errors, latency sum, latency max, work ops, work bytes] (the last
    /// two are f64 bit patterns).
    timeline: Vec<[u64; 7]>,
    index_width: u64,
    by_index: Vec<[u64; 7]>,
    start_ns: u64,
    end_ns: u64,
    end_own_ns: u64,
    pool: Option<u32>,
    generation_ns: u64,
    verification_ns: u64,
    bookkeeping_ns: u64,
    verified: u64,
    mismatches: u64,
    mismatched: Vec<Mismatch>,
    /// [uploads, duplicates, contents written, retried, failed].
    files: [u64; 5],
    schedule: Option<WireSchedule>,
    gave_up: bool,
}

#[derive(Serialize, Deserialize)]
struct WireOp {
    op: Op,
    hist: Vec<u8>,
    response: Option<Vec<u8>>,
    count: u64,
    bytes: u64,
    errors: Vec<(ErrorKind, u64)>,
    misses: u64,
    raced_misses: u64,
    miss_hist: Option<Vec<u8>>,
    retries: u64,
    first_errors: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct WireSchedule {
    rate_per_s: f64,
    arrivals: Arrivals,
    started: u64,
    lag_sum_ns: u64,
    max_lag_ns: u64,
    last_lag_ns: u64,
}

fn histogram_bytes(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2Serializer::new().serialize(h, &mut out).expect("a histogram serializes into memory");
    out
}

fn histogram_from(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    let read: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).map_err(|e| format!("a rank sent a histogram that does not decode: {e:?}"))?;
    // Back into the bounds every worker's histogram has, so `merge` can add them.
    let mut h = super::new_histogram();
    h.add(&read).map_err(|e| format!("a rank sent a histogram outside stowbench's bounds: {e:?}"))?;
    Ok(h)
}

/// A histogram as HdrHistogram's interval logs hold one: base64 of the compressed V2 encoding
/// (readable by HdrHistogram's own tools, and by `histogram_from_base64`).
pub fn histogram_base64(h: &Histogram<u64>) -> String {
    use base64::Engine;
    let mut out = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut out).expect("a histogram serializes into memory");
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// The histogram `histogram_base64` wrote.
pub fn histogram_from_base64(text: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("not base64: {e}"))?;
    Deserializer::new().deserialize(&mut &bytes[..]).map_err(|e| format!("not an HdrHistogram V2 encoding: {e:?}"))
}

fn bucket_row(b: &Bucket) -> [u64; 7] {
    [b.ops, b.bytes, b.errors, b.latency_sum_ns, b.latency_max_ns, b.work_ops.to_bits(), b.work_bytes.to_bits()]
}

fn bucket_of(r: &[u64; 7]) -> Bucket {
    Bucket {
        ops: r[0],
        bytes: r[1],
        errors: r[2],
        latency_sum_ns: r[3],
        latency_max_ns: r[4],
        work_ops: f64::from_bits(r[5]),
        work_bytes: f64::from_bits(r[6]),
    }
}

impl WorkerStats {
    /// This worker's statistics as bytes (`from_bytes` reads them back).
    pub fn to_bytes(&self) -> Vec<u8> {
        let f = &self.files;
        let wire = WireWorker {
            ops: self
                .ops
                .iter()
                .map(|(op, s)| WireOp {
                    op,
                    hist: histogram_bytes(&s.hist),
                    response: s.response.as_ref().map(histogram_bytes),
                    count: s.count,
                    bytes: s.bytes,
                    errors: s.errors.iter().map(|(k, n)| (*k, *n)).collect(),
                    misses: s.misses,
                    raced_misses: s.raced_misses,
                    miss_hist: s.miss_hist.as_ref().map(histogram_bytes),
                    retries: s.retries,
                    first_errors: s.first_errors.clone(),
                })
                .collect(),
            origin_ns: self.origin_ns,
            resolution_ns: self.resolution_ns,
            timeline: self.timeline.iter().map(bucket_row).collect(),
            index_width: self.index_width,
            by_index: self.by_index.iter().map(bucket_row).collect(),
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            end_own_ns: self.end_own_ns,
            pool: self.pool,
            generation_ns: self.generation_ns,
            verification_ns: self.verification_ns,
            bookkeeping_ns: self.bookkeeping_ns,
            verified: self.verified,
            mismatches: self.mismatches,
            mismatched: self.mismatched.clone(),
            files: [f.uploads, f.duplicates, f.contents_written, f.retried, f.failed],
            schedule: self.schedule.map(|s| WireSchedule {
                rate_per_s: s.rate_per_s,
                arrivals: s.arrivals,
                started: s.started,
                lag_sum_ns: s.lag_sum_ns,
                max_lag_ns: s.max_lag_ns,
                last_lag_ns: s.last_lag_ns,
            }),
            gave_up: self.gave_up,
        };
        serde_json::to_vec(&wire).expect("worker statistics serialize")
    }

    /// Reads what `to_bytes` wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<WorkerStats, String> {
        let w: WireWorker = serde_json::from_slice(bytes).map_err(|e| format!("a rank sent worker statistics that do not decode: {e}"))?;
        let mut ops = super::OpTable::new();
        for o in w.ops {
            let stats = OpStats {
                hist: histogram_from(&o.hist)?,
                response: o.response.as_deref().map(histogram_from).transpose()?,
                count: o.count,
                bytes: o.bytes,
                errors: o.errors.into_iter().collect(),
                misses: o.misses,
                raced_misses: o.raced_misses,
                miss_hist: o.miss_hist.as_deref().map(histogram_from).transpose()?,
                retries: o.retries,
                first_errors: o.first_errors,
            };
            ops.insert(o.op, stats);
        }
        Ok(WorkerStats {
            ops,
            origin_ns: w.origin_ns,
            resolution_ns: w.resolution_ns,
            timeline: w.timeline.iter().map(bucket_of).collect(),
            recent_bucket: None,
            index_width: w.index_width,
            by_index: w.by_index.iter().map(bucket_of).collect(),
            recent_index_bucket: None,
            start_ns: w.start_ns,
            end_ns: w.end_ns,
            end_own_ns: w.end_own_ns,
            pool: w.pool,
            generation_ns: w.generation_ns,
            verification_ns: w.verification_ns,
            bookkeeping_ns: w.bookkeeping_ns,
            verified: w.verified,
            mismatches: w.mismatches,
            mismatched: w.mismatched,
            files: FileTally { uploads: w.files[0], duplicates: w.files[1], contents_written: w.files[2], retried: w.files[3], failed: w.files[4] },
            schedule: w.schedule.map(|s| ScheduleTally {
                rate_per_s: s.rate_per_s,
                arrivals: s.arrivals,
                started: s.started,
                lag_sum_ns: s.lag_sum_ns,
                max_lag_ns: s.max_lag_ns,
                last_lag_ns: s.last_lag_ns,
            }),
            gave_up: w.gave_up,
        })
    }

    /// Moves this worker's timestamps from its own clock onto another whose readings are
    /// `offset_ns` lower (a rank's clock minus the first rank's): its timeline keeps its buckets,
    /// which count from the origin, moved with it.
    pub fn shift_clock(&mut self, offset_ns: i64) {
        let shift = |t: u64| t.saturating_add_signed(-offset_ns);
        self.origin_ns = shift(self.origin_ns);
        self.start_ns = shift(self.start_ns);
        self.end_ns = shift(self.end_ns);
    }

    /// Every operation kind's latency histogram (for a rank's breakdown in the report).
    pub fn histograms(&self) -> impl Iterator<Item = (Op, &Histogram<u64>)> {
        self.ops.iter().map(|(op, s)| (op, &s.hist))
    }
}
