//! The file server's two operations (E5), as the published study ran them:
//!
//! - **upload**: hash the file's content (blake3), *register* it in the catalog (look the hash
//!   up; insert the `files` row when new; point the file's name at it), then store the content
//!   under a key derived from the hash and mark it stored. A duplicate (its content is stored
//!   already) is only registered.
//! - **download**: *look up* the name in the catalog, then read the stored object.
//!
//! Each step is timed apart (steps `hash`, `register`, `put`; `lookup`, `get`) and the whole
//! operation once (`upload`, `download`), which alone counts in the phase's throughput. Our own
//! payload work stays out of every step, as in plain puts and gets (`ops`).
//!
//! A failed attempt is retried from the registration: the catalog's writes are idempotent and
//! the object key depends only on the content, so however often an upload is retried it ends
//! with one `files` row, one `names` row and one stored object (checked after the run).

use super::ops::{is_not_found, SelfTimed, Worker};
use crate::backend::catalog::{Catalog, Content, Registration};
use crate::backend::{BResult, BackendError, ErrorKind};
use crate::workload::keys::unit;
use crate::workload::op::Op;
use crate::workload::payload::{DigestSink, Mismatch};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use std::io::Read;

/// How many of its latest new contents a worker remembers for its duplicate uploads.
const REMEMBERED_CONTENTS: usize = 4096;

/// A worker's file-server state: the contents it uploaded first (which its duplicate uploads
/// repeat, so no two workers ever race to store one content) and a hashing buffer.
pub struct FreshContents {
    contents: VecDeque<(u64, u32)>,
    rng: Xoshiro256PlusPlus,
    buf: Vec<u8>,
}

impl FreshContents {
    /// The state of worker `w`; its duplicate choices depend only on the seed and the worker.
    pub fn new(seed: u64, w: u64) -> FreshContents {
        let rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6475_705f_6669_6c65 ^ w.rotate_left(17));
        FreshContents { contents: VecDeque::new(), rng, buf: Vec::new() }
    }

    /// The content (key and generation) a duplicate upload repeats, drawn with probability
    /// `fraction` once the worker has uploaded something; `None` means new content.
    fn duplicate_source(&mut self, fraction: f64) -> Option<(u64, u32)> {
        if fraction <= 0.0 || self.contents.is_empty() || unit(&mut self.rng) >= fraction {
            return None;
        }
        let i = (unit(&mut self.rng) * self.contents.len() as f64) as usize;
        self.contents.get(i.min(self.contents.len() - 1)).copied()
    }

    fn remember(&mut self, source: (u64, u32)) {
        if self.contents.len() == REMEMBERED_CONTENTS {
            self.contents.pop_front();
        }
        self.contents.push_back(source);
    }
}

/// Time spent in an upload's or download's catalog and storage steps, over all its attempts.
#[derive(Default)]
struct StepTimes {
    catalog_ns: u64,
    storage_ns: u64,
    /// Whether the successful attempt wrote the content.
    wrote: bool,
    /// Whether some attempt of this upload inserted the content's `files` row.
    inserted_row: bool,
}

/// The file name of object `key` in uploads and downloads.
fn file_name(key: u64) -> String {
    format!("file-{key:010}.dat")
}

impl Worker<'_, '_> {
    fn catalog(&mut self) -> &mut dyn Catalog {
        self.catalog.as_deref_mut().expect("file-server phases run with a catalog per worker (runner opens them)")
    }

    /// One upload of file `key`; returns false when a bytes stop says the phase is over.
    pub(super) fn upload(&mut self, key: u64, index: u64, _object_name: &str) -> bool {
        let ctx = self.ctx;
        self.last_put_stored = false;
        let ticket = ctx.keys.begin_put(key);
        let fresh = (key, ticket.generation);
        let source = self.fresh.duplicate_source(ctx.duplicates).unwrap_or(fresh);
        let size = ctx.payload.size_of(source.0, source.1);
        if self.bytes_stop_reached(size) {
            ctx.keys.abandon_put(ticket);
            return false;
        }
        let name = file_name(key);
        let (hash, digest, hash_ns) = self.hash_content(source);
        let content = Content { hash: &hash, object_key: &hash, size_bytes: size };
        let mut times = StepTimes::default();
        let (result, retries) = self.within_deadline(|me| me.upload_attempt(&name, &content, source, &mut times));
        let latency = hash_ns + times.catalog_ns + times.storage_ns;
        self.stats.files.retried += (retries > 0) as u64;
        match result {
            Ok(registration) => {
                self.stats.step(Op::Hash, hash_ns, size);
                self.stats.step(Op::Register, times.catalog_ns, 0);
                if times.wrote {
                    self.stats.step(Op::Put, times.storage_ns, size);
                }
                // A content counts once, for the upload whose attempt inserted its row. Another
                // upload of the same content while the first is still storing it (two empty
                // files, say) finds the row unfinished and stores the same object again, under
                // the same key: a second write, not a second content (the audit counts those).
                if times.wrote && (registration != Registration::Unfinished || times.inserted_row) {
                    self.stats.files.contents_written += 1;
                }
                self.stats.files.uploads += 1;
                self.stats.files.duplicates += (registration == Registration::Duplicate) as u64;
                if source == fresh && registration != Registration::Duplicate {
                    self.fresh.remember(fresh);
                }
                ctx.keys.end_put(ticket, Some((size, digest)));
                self.last_put_stored = true;
                self.finish(Op::Upload, index, latency, retries, Ok(size));
            }
            Err(e) => {
                self.stats.files.failed += 1;
                ctx.keys.end_put(ticket, None);
                self.finish(Op::Upload, index, latency, retries, Err(e));
            }
        }
        true
    }

    /// Hashes a content as the file server does before registering it: blake3 over every byte.
    /// Returns the hash (hex), the run's own xxh3 digest of the content (recorded for checking
    /// downloads) and the hashing time without our payload generation.
    fn hash_content(&mut self, (key, generation): (u64, u32)) -> (String, u64, u64) {
        let clock = self.ctx.clock;
        let start = self.own.now_ns(clock);
        let mut reader = SelfTimed { inner: self.ctx.payload.reader(key, generation), clock, own: &self.own.generation_ns };
        let buf = &mut self.fresh.buf;
        buf.resize(crate::backend::COPY_BUFFER_BYTES, 0);
        let mut hasher = blake3::Hasher::new();
        loop {
            let n = reader.read(&mut buf[..]).expect("payload generation never fails");
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let digest = reader.inner.digest().expect("read to the end");
        let hash_ns = self.own.now_ns(clock) - start;
        (hasher.finalize().to_hex().to_string(), digest, hash_ns)
    }

    /// One attempt: register, and unless a duplicate, store the content and mark it stored.
    fn upload_attempt(&mut self, name: &str, content: &Content, source: (u64, u32), times: &mut StepTimes) -> BResult<Registration> {
        let clock = self.ctx.clock;
        times.wrote = false;
        let t = self.own.now_ns(clock);
        let registration = self.catalog().register(name, content);
        times.catalog_ns += self.own.now_ns(clock) - t;
        let registration = registration?;
        times.inserted_row |= registration == Registration::New;
        if !registration.needs_content() {
            return Ok(registration);
        }
        let t = self.own.now_ns(clock);
        let mut body = SelfTimed { inner: self.ctx.payload.reader(source.0, source.1), clock, own: &self.own.generation_ns };
        let stored = self.session.put(content.object_key, &mut body, content.size_bytes);
        times.storage_ns += self.own.now_ns(clock) - t;
        stored?;
        times.wrote = true;
        let t = self.own.now_ns(clock);
        let marked = self.catalog().mark_stored(content.hash);
        times.catalog_ns += self.own.now_ns(clock) - t;
        marked.map(|()| registration)
    }

    /// One download of file `key`: look its name up, read the object, check it.
    pub(super) fn download(&mut self, key: u64, index: u64, _object_name: &str) -> bool {
        let ctx = self.ctx;
        let snapshot = ctx.keys.snapshot(key);
        let expected = snapshot.known();
        let size = expected.map(|(_, size)| size).unwrap_or(0);
        if self.bytes_stop_reached(size) {
            return false;
        }
        let name = file_name(key);
        let mut times = StepTimes::default();
        let mut sink = DigestSink::default();
        let mut object_key = None;
        let (result, retries) = self.within_deadline(|me| {
            sink = DigestSink::default();
            me.download_attempt(&name, &mut sink, &mut times, &mut object_key)
        });
        let latency = times.catalog_ns + times.storage_ns;
        if is_not_found(&result) && self.count_miss(Op::Download, ctx.keys.classify_read_miss(&snapshot), latency) {
            return true;
        }
        let result = match result {
            Ok(n) if ctx.verify => {
                let t = ctx.clock.now_ns();
                let outcome = self.check_download(key, &name, expected, &sink, object_key.as_deref().unwrap_or_default());
                self.own.verification_ns.set(self.own.verification_ns.get() + ctx.clock.now_ns() - t);
                self.count_check(outcome).map(|()| n)
            }
            other => other,
        };
        if result.is_ok() {
            self.stats.step(Op::Lookup, times.catalog_ns, 0);
            self.stats.step(Op::Get, times.storage_ns, size);
        }
        self.finish(Op::Download, index, latency, retries, result);
        true
    }

    fn download_attempt(&mut self, name: &str, sink: &mut DigestSink, times: &mut StepTimes, object_key: &mut Option<String>) -> BResult<u64> {
        let clock = self.ctx.clock;
        let t = self.own.now_ns(clock);
        let found = self.catalog().resolve(name);
        times.catalog_ns += self.own.now_ns(clock) - t;
        let Some(file) = found? else {
            return Err(BackendError::new(ErrorKind::NotFound, format!("file \"{name}\" is not in the catalog (or its content was never stored)")));
        };
        let t = self.own.now_ns(clock);
        *object_key = Some(file.object_key.clone());
        let read = if self.ctx.verify {
            self.session.get(&file.object_key, &mut SelfTimed { inner: sink, clock, own: &self.own.verification_ns })
        } else {
            self.session.get(&file.object_key, &mut std::io::sink())
        };
        times.storage_ns += self.own.now_ns(clock) - t;
        read
    }

    /// Checks a download against the digest recorded when the file was uploaded. (A duplicate's
    /// bytes carry the headers of the upload it repeats, so the put/get check by header cannot
    /// apply: the recorded digest is what identifies the content.)
    fn check_download(&mut self, key: u64, name: &str, expected: Option<(u32, u64)>, sink: &DigestSink, object_key: &str) -> Result<(), Mismatch> {
        let Some((generation, size)) = expected else { return Ok(()) };
        let matches = self.ctx.keys.digest_matches(key, generation, sink.digest());
        if sink.len() == size && matches != Some(false) {
            return Ok(());
        }
        let detail = if sink.len() != size {
            format!("the download returned {} bytes; the upload stored {size}", sink.len())
        } else {
            "the downloaded bytes differ from the uploaded content (digest mismatch)".to_string()
        };
        let mut m = Mismatch::other(name, 0, detail);
        (m.expected_bytes, m.actual_bytes) = (Some(size), Some(sink.len()));
        Err(self.classify_download(name, object_key, sink, m))
    }

    /// Says how a download differs. A content's bytes carry the header of the upload that first
    /// stored it (a duplicate repeats them), so the header names the content to compare against:
    /// the object is read again through a checker for that content. Damage inside it is then
    /// flipped, zeroed, truncated or extended at its offset; an intact copy of the named content
    /// whose digest is not this file's is another upload's content (swapped). A damaged header
    /// leaves the kind `other`.
    fn classify_download(&mut self, name: &str, object_key: &str, sink: &DigestSink, unclassified: Mismatch) -> Mismatch {
        let payload = &self.ctx.payload;
        let Some(head) = sink.head().get(..8) else { return unclassified };
        let claimed = u64::from_le_bytes(head.try_into().expect("8 bytes"));
        let Some(generation) = payload.generation_in(claimed, sink.head()) else { return unclassified };
        let mut verifier = payload.verifier(claimed, generation);
        if self.session.get(object_key, &mut verifier).is_err() {
            return unclassified;
        }
        let content = crate::workload::keys::key_name(claimed);
        let mut m = match verifier.finish() {
            Err(m) => {
                let mut m = Mismatch { detail: format!("{} (content first uploaded as object {content})", m.detail), ..m };
                m.expected_bytes = unclassified.expected_bytes;
                m
            }
            Ok(()) => Mismatch {
                kind: crate::workload::payload::DamageKind::Swapped,
                detail: format!("holds another upload's content (that of object {content}, version {generation}), byte for byte"),
                ..unclassified
            },
        };
        m.key = name.to_string();
        m
    }
}
