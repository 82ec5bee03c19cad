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

const OPTIONS: &[OptionDoc] = SimOptions::DOCS;

crate::option_choice! {
    /// Whose time the sim backend spends.
    enum SimClock { Virtual = "virtual", Real = "real" }
}

crate::backend_options! {
    /// sim's options.
    struct SimOptions {
        clock: SimClock = "virtual" => "virtual (exact, instant) or real (sleeps)",
        latency: Nanos = "1ms" => "fixed time per operation",
        per_mib: Nanos = "0ms" => "extra time per MiB moved",
        put_latency: Option<Nanos>, "<latency>" => "fixed time per put, overriding latency",
        fail_every: u64 = 0 => "every Nth operation of a session fails (0: never)",
        fail_kind: String = "timeout" => "error kind of injected faults: not_found, too_large, timeout, conflict, connection, io, corrupt, unsupported or other",
        corrupt_every: u64 = 0 => "every Nth put of a session stores one flipped byte: damage at rest (0: never)",
        garble_every: u64 = 0 => "every Nth get of a session returns one flipped byte, the stored copy intact: damage in transfer (0: never)",
        max_object_bytes: Option<crate::units::ByteSize>, "" => "refuse objects larger than this (to test limits)",
        growth_per_object: Nanos = "0ns" => "extra put time per object already stored (to test growth curves)",
        panic_at: u64 = 0 => "the Nth operation of a session panics, like a backend bug (0: never)",
        stall_at: u64 = 0 => "the Nth operation of a session stalls for `stall` on top of its latency, like a server pause (0: never)",
        stall: Nanos = "1s" => "how long the stall of stall_at lasts",
        delete: bool = true => "false: declares no delete and refuses every delete as unsupported (to test capabilities)",
        overwrite: bool = true => "false: declares no overwrite and refuses a put onto a stored key as unsupported (to test capabilities)",
        concurrent_writers: bool = true => "false: one writer at a time, the others wait (reported as lock wait) (to test capabilities)",
        settle_fails: bool = false => "true: bringing the store to rest before each phase fails with an I/O error, like a checkpoint on a failing disk (to test that the phase still runs)",
    }
}

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
    settle_fails: bool,
}

/// The sim backend for one case.
pub struct SimBackend {
    config: SimConfig,
    store: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    /// Held by a put or delete when `concurrent_writers = false`.
    writer: Arc<Mutex<()>>,
    options: Options,
}

/// The error kinds `fail_kind` may name.
const FAULT_KINDS: [ErrorKind; 9] = {
    use ErrorKind::*;
    [NotFound, TooLarge, Timeout, Conflict, Connection, Io, Corrupt, Unsupported, Other]
};

fn parse_kind(name: &str) -> Option<ErrorKind> {
    FAULT_KINDS.into_iter().find(|k| k.name() == name)
}

fn construct(options: &Options, _ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("sim", OPTIONS)?;
    let own = SimOptions::read(options)?;
    let fail_kind = parse_kind(&own.fail_kind).ok_or_else(|| {
        format!(
            "target \"{}\": option \"fail_kind\": \"{}\" is not an error kind; use one of {}",
            options.target,
            own.fail_kind,
            FAULT_KINDS.map(ErrorKind::name).join(", ")
        )
    })?;
    let config = SimConfig {
        virtual_clock: own.clock == SimClock::Virtual,
        latency_ns: own.latency.0,
        put_latency_ns: own.put_latency.unwrap_or(own.latency).0,
        per_mib_ns: own.per_mib.0,
        fail_every: own.fail_every,
        fail_kind,
        corrupt_every: own.corrupt_every,
        garble_every: own.garble_every,
        max_object_bytes: own.max_object_bytes.map(|b| b.0),
        growth_per_object_ns: own.growth_per_object.0,
        panic_at: own.panic_at,
        stall_at: own.stall_at,
        stall_ns: own.stall.0,
        delete: own.delete,
        overwrite: own.overwrite,
        concurrent_writers: own.concurrent_writers,
        settle_fails: own.settle_fails,
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
        Ok(DiskUsage { allocated_bytes: bytes, apparent_bytes: bytes, files: store.len() as u64, server_reported_bytes: None, allocated_unknown: false })
    }

    fn cleanup(&self) -> BResult<()> {
        self.store.lock().expect("sim store lock").clear();
        Ok(())
    }

    fn settle(&self) -> BResult<()> {
        match self.config.settle_fails {
            true => Err(BackendError::new(ErrorKind::Io, "sim: settle_fails: the store could not be brought to rest")),
            false => Ok(()),
        }
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
