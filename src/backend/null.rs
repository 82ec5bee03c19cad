//! `null`: stores nothing, so a run against it measures stowbench itself — the ceiling every real
//! backend's numbers sit under (fio's null engine plays the same part).
//!
//! A put reads its whole body (the generator runs, as for any backend) and remembers only the
//! object's first bytes and length; a get writes that version's bytes again, regenerated from the
//! case's payload generator, so reads return real, zero-free, verifiable data at memory speed.
//! Real clock, no sleeps. It fabricates only stowbench's own payloads: a body that does not carry
//! a stowbench header is refused as `unsupported`.

use super::options::{OptionDoc, Options};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::workload::payload::{PayloadSpec, HEADER_BYTES};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "null",
    summary: "stores nothing: reads every put, regenerates gets; measures stowbench's own ceiling (not a result)",
    options: OPTIONS,
    construct,
    is_test_tool: true,
    server: None,
};

/// None. A backend with options declares them once with `backend_options!` and joins the shared
/// blocks it takes with `options_list!` (see `pack.rs` for a small one, `s3.rs` for a server).
const OPTIONS: &[OptionDoc] = &[];

/// Shards of the object table, so workers rarely meet on one lock.
const SHARDS: usize = 64;
/// Bytes a session moves per read or write call.
const CHUNK_BYTES: usize = super::COPY_BUFFER_BYTES;

/// What a put left behind: the object's first bytes (its version header) and its length.
#[derive(Clone, Copy)]
struct Entry {
    head: [u8; HEADER_BYTES],
    len: u64,
}

/// Objects by the xxh3 of their key. A test tool can afford the 2^-64 chance of two keys sharing
/// a hash (verification would catch it); what it cannot afford is allocating and SipHashing a
/// String per operation, which made the table half of the harness's own cost.
type Table = HashMap<u64, Entry, BuildHasherDefault<PassThrough>>;

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | *b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[derive(Default)]
struct Shared {
    payload: OnceLock<PayloadSpec>,
    shards: Vec<Mutex<Table>>,
}

impl Shared {
    /// The key's hash and its shard.
    fn slot(&self, key: &str) -> (u64, &Mutex<Table>) {
        let h = crate::hash::xxh3_64(key.as_bytes());
        // The low bits pick the bucket inside a shard; the high ones pick the shard.
        (h, &self.shards[(h >> 58) as usize % SHARDS])
    }
}

/// The null backend for one case.
pub struct NullBackend {
    shared: Arc<Shared>,
}

fn construct(options: &Options, _ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("null", OPTIONS)?;
    let shared = Shared { payload: OnceLock::new(), shards: (0..SHARDS).map(|_| Mutex::default()).collect() };
    Ok(Box::new(NullBackend { shared: Arc::new(shared) }))
}

impl Backend for NullBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn describe(&self) -> BackendInfo {
        BackendInfo { backend: "null".into(), options: serde_json::json!({}), durability: "none: stores nothing".into(), ..Default::default() }
    }

    fn prepare(&self) -> BResult<()> {
        Ok(())
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        Ok(Box::new(NullSession { shared: self.shared.clone(), buf: vec![0u8; CHUNK_BYTES] }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        Ok(DiskUsage::default())
    }

    fn cleanup(&self) -> BResult<()> {
        self.shared.shards.iter().for_each(|s| s.lock().expect("null shard lock").clear());
        Ok(())
    }

    fn attach_payload(&self, payload: &PayloadSpec) {
        let _ = self.shared.payload.set(payload.clone());
    }
}

struct NullSession {
    shared: Arc<Shared>,
    /// Where gets regenerate their bytes before writing them on.
    buf: Vec<u8>,
}

/// Keeps the first bytes written to it (an object's version header) and drops the rest.
struct HeadSink {
    head: [u8; HEADER_BYTES],
    seen: usize,
}

impl Write for HeadSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let at = self.seen.min(HEADER_BYTES);
        let take = (HEADER_BYTES - at).min(buf.len());
        self.head[at..at + take].copy_from_slice(&buf[..take]);
        self.seen += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl NullSession {
    fn entry(&self, key: &str) -> BResult<Entry> {
        let (h, shard) = self.shared.slot(key);
        shard.lock().expect("null shard lock").get(&h).copied().ok_or_else(|| BackendError::not_found(key))
    }
}

impl Session for NullSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let mut head = HeadSink { head: [0; HEADER_BYTES], seen: 0 };
        super::copy_exact(body, &mut head, len)?;
        let entry = Entry { head: head.head, len };
        let (h, shard) = self.shared.slot(key);
        shard.lock().expect("null shard lock").insert(h, entry);
        Ok(())
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let entry = self.entry(key)?;
        if entry.len < HEADER_BYTES as u64 {
            sink.write_all(&entry.head[..entry.len as usize])?;
            return Ok(entry.len);
        }
        let key_index = u64::from_le_bytes(entry.head[..8].try_into().expect("8 bytes"));
        let payload = self.shared.payload.get();
        let Some((payload, generation)) = payload.and_then(|p| p.generation_in(key_index, &entry.head).map(|g| (p, g))) else {
            return Err(BackendError::new(ErrorKind::Unsupported, format!("null: \"{key}\" was not a stowbench payload; null regenerates only those")));
        };
        let mut done = 0u64;
        while done < entry.len {
            let n = (entry.len - done).min(self.buf.len() as u64) as usize;
            payload.fill_at(key_index, generation, done, &mut self.buf[..n]);
            sink.write_all(&self.buf[..n])?;
            done += n as u64;
        }
        Ok(entry.len)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let (h, shard) = self.shared.slot(key);
        shard.lock().expect("null shard lock").remove(&h).map(|_| ()).ok_or_else(|| BackendError::not_found(key))
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.entry(key).map(|e| e.len)
    }
}
