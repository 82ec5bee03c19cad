//! `sim`: an in-memory store with a controllable clock, latency and fault injection.
//!
//! It exists to test the runner, statistics and reports deterministically; it is a test tool, not
//! a result, and reports mark it so. With `clock = "virtual"` (the default) each operation advances
//! the worker's virtual clock by exactly `latency + size × per_mib / MiB`, so latencies and
//! throughput in a report are known in advance. Faults: every `fail_every`-th operation of a
//! session (counting from 1) fails with `fail_kind`; `corrupt_every` damages stored values,
//! `garble_every` damages values on their way out. `delete`, `overwrite` and `concurrent_writers`
//! (all true by default) take a capability away, declared and enforced, so the runner's refusals
//! and the conformance suite's checks of undeclared behaviour have a backend to meet.

use super::options::{OptionDoc, Options};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::clock::{Clock, VirtualClock};
use crate::units::Nanos;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "sim",
    summary: "in-memory test tool with virtual clock, fixed latency and fault injection (not a result)",
    options: OPTIONS,
    construct,
    is_test_tool: true,
    server: None,
};

const OPTIONS: &[OptionDoc] = &[
    OptionDoc { name: "clock", default: "virtual", help: "virtual (exact, instant) or real (sleeps)" },
    OptionDoc { name: "latency", default: "1ms", help: "fixed time per operation" },
    OptionDoc { name: "per_mib", default: "0ms", help: "extra time per MiB moved" },
    OptionDoc { name: "put_latency", default: "<latency>", help: "fixed time per put, overriding latency" },
    OptionDoc { name: "fail_every", default: "0", help: "every Nth operation of a session fails (0: never)" },
    OptionDoc { name: "fail_kind", default: "timeout", help: "error kind of injected faults" },
    OptionDoc { name: "corrupt_every", default: "0", help: "every Nth put of a session stores one flipped byte: damage at rest (0: never)" },
    OptionDoc {
        name: "garble_every",
        default: "0",
        help: "every Nth get of a session returns one flipped byte, the stored copy intact: damage in transfer (0: never)",
    },
    OptionDoc { name: "max_object_bytes", default: "", help: "refuse objects larger than this (to test limits)" },
    OptionDoc { name: "growth_per_object", default: "0ns", help: "extra put time per object already stored (to test growth curves)" },
    OptionDoc { name: "panic_at", default: "0", help: "the Nth operation of a session panics, like a backend bug (0: never)" },
    OptionDoc {
        name: "stall_at",
        default: "0",
        help: "the Nth operation of a session stalls for `stall` on top of its latency, like a server pause (0: never)",
    },
    OptionDoc { name: "stall", default: "1s", help: "how long the stall of stall_at lasts" },
    OptionDoc { name: "delete", default: "true", help: "false: declares no delete and refuses every delete as unsupported (to test capabilities)" },
    OptionDoc {
        name: "overwrite",
        default: "true",
        help: "false: declares no overwrite and refuses a put onto a stored key as unsupported (to test capabilities)",
    },
    OptionDoc {
        name: "concurrent_writers",
        default: "true",
        help: "false: one writer at a time, the others wait (reported as lock wait) (to test capabilities)",
    },
];

#[derive(Debug, Clone)]
struct SimConfig {
    virtual_clock: bool,
    latency_ns: u64,
    put_latency_ns: u64,
    per_mib_ns: u64,
    fail_every: u64,
    fail_kind: ErrorKind,
    corrupt_every: u64,
    garble_every: u64,
    max_object_bytes: Option<u64>,
    growth_per_object_ns: u64,
    panic_at: u64,
    stall_at: u64,
    stall_ns: u64,
    delete: bool,
    overwrite: bool,
    concurrent_writers: bool,
}

/// The sim backend for one case.
pub struct SimBackend {
    config: SimConfig,
    store: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    /// Held by a put or delete when `concurrent_writers = false`.
    writer: Arc<Mutex<()>>,
    options: Options,
}

fn parse_kind(name: &str) -> Option<ErrorKind> {
    use ErrorKind::*;
    [NotFound, TooLarge, Timeout, Conflict, Connection, Io, Corrupt, Unsupported, Other].into_iter().find(|k| k.name() == name)
}

fn construct(options: &Options, _ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("sim", OPTIONS)?;
    let latency = options.duration("latency", Nanos(1_000_000))?;
    let kind_name =
        options.choice("fail_kind", &["not_found", "too_large", "timeout", "conflict", "connection", "io", "corrupt", "unsupported", "other"], "timeout")?;
    let max = options.size("max_object_bytes", crate::units::ByteSize(u64::MAX))?.0;
    let config = SimConfig {
        virtual_clock: options.choice("clock", &["virtual", "real"], "virtual")? == "virtual",
        latency_ns: latency.0,
        put_latency_ns: options.duration("put_latency", latency)?.0,
        per_mib_ns: options.duration("per_mib", Nanos(0))?.0,
        fail_every: options.u64("fail_every", 0)?,
        fail_kind: parse_kind(&kind_name).expect("choice() checked the name"),
        corrupt_every: options.u64("corrupt_every", 0)?,
        garble_every: options.u64("garble_every", 0)?,
        max_object_bytes: (max != u64::MAX).then_some(max),
        growth_per_object_ns: options.duration("growth_per_object", Nanos(0))?.0,
        panic_at: options.u64("panic_at", 0)?,
        stall_at: options.u64("stall_at", 0)?,
        stall_ns: options.duration("stall", Nanos(1_000_000_000))?.0,
        delete: options.bool("delete", true)?,
        overwrite: options.bool("overwrite", true)?,
        concurrent_writers: options.bool("concurrent_writers", true)?,
    };
    Ok(Box::new(SimBackend { config, store: Default::default(), writer: Default::default(), options: options.clone() }))
}

impl Backend for SimBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_object_bytes: self.config.max_object_bytes,
            max_object_hint: self.config.max_object_bytes.map(|_| "sim's max_object_bytes option".to_string()),
            delete: self.config.delete,
            overwrite: self.config.overwrite,
            concurrent_writers: self.config.concurrent_writers,
            ..Capabilities::default()
        }
    }

    fn describe(&self) -> BackendInfo {
        BackendInfo { backend: "sim".into(), options: self.options.redacted_json(), durability: "none: in-memory test tool".into(), ..Default::default() }
    }

    fn prepare(&self) -> BResult<()> {
        Ok(())
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        Ok(Box::new(SimSession { config: self.config.clone(), store: self.store.clone(), writer: self.writer.clone(), wait_ns: 0, ops: 0, puts: 0, gets: 0 }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        let store = self.store.lock().expect("sim store lock");
        let bytes: u64 = store.values().map(|v| v.len() as u64).sum();
        Ok(DiskUsage { allocated_bytes: bytes, apparent_bytes: bytes, files: store.len() as u64, server_reported_bytes: None })
    }

    fn cleanup(&self) -> BResult<()> {
        self.store.lock().expect("sim store lock").clear();
        Ok(())
    }

    fn clock(&self) -> Option<Arc<dyn Clock>> {
        self.config.virtual_clock.then(|| Arc::new(VirtualClock) as Arc<dyn Clock>)
    }
}

struct SimSession {
    config: SimConfig,
    store: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    writer: Arc<Mutex<()>>,
    /// Time spent waiting for `writer` (`Session::wait_ns`).
    wait_ns: u64,
    ops: u64,
    puts: u64,
    gets: u64,
}

/// Flips the middle byte of `data` (an empty value has nothing to damage).
fn flip_middle(data: &mut [u8]) {
    if !data.is_empty() {
        let at = data.len() / 2;
        data[at] ^= 0xff;
    }
}

impl SimSession {
    /// Spends the simulated time of one operation and injects a fault when it is due.
    fn spend(&mut self, base_ns: u64, bytes: u64) -> BResult<()> {
        self.ops += 1;
        assert!(self.ops != self.config.panic_at, "sim: injected panic at operation {}", self.ops);
        let stall = if self.ops == self.config.stall_at { self.config.stall_ns } else { 0 };
        let ns = base_ns + stall + (bytes as u128 * self.config.per_mib_ns as u128 / (1 << 20)) as u64;
        if self.config.virtual_clock {
            VirtualClock::advance(ns);
        } else {
            std::thread::sleep(std::time::Duration::from_nanos(ns));
        }
        if self.config.fail_every > 0 && self.ops % self.config.fail_every == 0 {
            return Err(BackendError::new(self.config.fail_kind, format!("injected fault on operation {}", self.ops)));
        }
        Ok(())
    }
}

/// What a put onto a stored key answers when overwrite is not declared.
fn no_overwrite(key: &str) -> BackendError {
    BackendError::new(ErrorKind::Unsupported, format!("sim (overwrite = false): \"{key}\" is stored already and this backend does not replace objects"))
}

impl Session for SimSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        if let Some(max) = self.config.max_object_bytes {
            if len > max {
                return Err(BackendError::new(ErrorKind::TooLarge, format!("{len} bytes exceeds max_object_bytes {max}")));
            }
        }
        if !self.config.overwrite && self.store.lock().expect("sim store lock").contains_key(key) {
            return Err(no_overwrite(key));
        }
        let writer = self.writer.clone();
        let _turn = (!self.config.concurrent_writers).then(|| super::waiting_for_lock(&mut self.wait_ns, || writer.lock().expect("sim writer lock")));
        let mut data = Vec::with_capacity(len as usize);
        super::copy_exact(body, &mut data, len)?;
        let stored = self.store.lock().expect("sim store lock").len() as u64;
        self.spend(self.config.put_latency_ns + stored * self.config.growth_per_object_ns, len)?;
        self.puts += 1;
        if self.config.corrupt_every > 0 && self.puts % self.config.corrupt_every == 0 {
            flip_middle(&mut data);
        }
        let mut store = self.store.lock().expect("sim store lock");
        if !self.config.overwrite && store.contains_key(key) {
            // Another session stored it while this body was read.
            return Err(no_overwrite(key));
        }
        store.insert(key.to_string(), data);
        Ok(())
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let found = self.store.lock().expect("sim store lock").get(key).cloned();
        // A miss costs the same fixed time as a hit: a real store has to look too.
        self.spend(self.config.latency_ns, found.as_ref().map_or(0, |d| d.len() as u64))?;
        let mut data = found.ok_or_else(|| BackendError::not_found(key))?;
        self.gets += 1;
        if self.config.garble_every > 0 && self.gets % self.config.garble_every == 0 {
            flip_middle(&mut data);
        }
        sink.write_all(&data)?;
        Ok(data.len() as u64)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        if !self.config.delete {
            return Err(BackendError::new(ErrorKind::Unsupported, format!("sim (delete = false): cannot delete \"{key}\"; this backend does not delete")));
        }
        let writer = self.writer.clone();
        let _turn = (!self.config.concurrent_writers).then(|| super::waiting_for_lock(&mut self.wait_ns, || writer.lock().expect("sim writer lock")));
        let removed = self.store.lock().expect("sim store lock").remove(key);
        self.spend(self.config.latency_ns, 0)?;
        removed.map(|_| ()).ok_or_else(|| BackendError::not_found(key))
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        let len = self.store.lock().expect("sim store lock").get(key).map(|v| v.len() as u64);
        self.spend(self.config.latency_ns, 0)?;
        len.ok_or_else(|| BackendError::not_found(key))
    }

    fn wait_ns(&self) -> u64 {
        self.wait_ns
    }
}
