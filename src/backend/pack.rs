//! `pack`: stowbench's own container — append-only striped data files with checksummed records.
//!
//! Each session leases its own stripe (data file), so concurrent writers never share a lock or a
//! file; a put is one positioned write of the record (streamed when it is large), then (with
//! `fsync = true`) an fdatasync, and only then does the key become visible. Deletes append a
//! tombstone; `stowbench compact` (`crate::pack::compact`) reclaims dead records. The format is
//! in `docs/formats/pack.md`; what put/get mean here is in `docs/backends/pack.md`.

use super::options::{OptionDoc, Options};
use super::{BResult, Backend, BackendInfo, BackendKind, Capabilities, DiskUsage, Namespace, Session};
use crate::pack::{record::FORMAT_VERSION, PackStore, StripeLease};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use crate::pack::{compact, CompactReport};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "pack",
    summary: "stowbench's own container: append-only data file per writer, checksummed records, in-memory index",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: None,
};

const OPTIONS: &[OptionDoc] = crate::options_list!(super::namespace::DataPath::DOCS, PackOptions::DOCS);

crate::backend_options! {
    /// pack's own options.
    pub struct PackOptions {
        fsync: bool = false => "fdatasync the writer's data file after each record, before the put returns and the key becomes visible",
        read_checks: bool = true => "a get checks the record's body hash (xxh3 of key + value) as it streams, and fails with `corrupt` on a mismatch; false streams the value unchecked, as a plain file read does (opening and compaction still check every record they read)",
        mmap: bool = true => "checked gets of values of 16 KiB or more hash a read-only shared mapping of the data file in place (one pass over the page cache) instead of copying it first with pread; the pages read are taken out of the process again every 32 MiB read, so the client's resident memory stays bounded. false reads every value with pread (two passes: the copy, then the hash)",
    }
}

/// Name of the pack directory inside the namespace.
pub const PACK_DIR: &str = "pack";

/// The pack backend for one case.
pub struct PackBackend {
    /// Where the files live (the run\'s namespace, or the `path` option\'s per-run directory).
    data: super::namespace::DataNamespace,
    dir: PathBuf,
    fsync: bool,
    read_checks: bool,
    mmap: bool,
    options: Options,
    store: Mutex<Option<Arc<PackStore>>>,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("pack", OPTIONS)?;
    // The one per-run namespace mechanism (`namespace::DataNamespace`): with `path`, a marked directory
    // named after the run, removed by cleanup.
    let own = PackOptions::read(options)?;
    if own.mmap && !own.read_checks && options.table.contains_key("mmap") {
        // Mapped reads serve checked gets only (an unchecked get copies with pread either way):
        // reported as given, the pair would claim a read path the run never took.
        return Err(options.bad(
            "mmap",
            "mmap = true maps only checked gets, and read_checks = false turns the checks off, so it would do nothing; drop mmap, or keep read_checks on",
        ));
    }
    let data = super::namespace::DataNamespace::new(options, ns)?;
    Ok(Box::new(PackBackend {
        dir: data.ns.dir.join(PACK_DIR),
        data,
        fsync: own.fsync,
        read_checks: own.read_checks,
        // Unchecked gets never map (above), so the report says what the run did.
        mmap: own.mmap && own.read_checks,
        options: options.clone(),
        store: Mutex::new(None),
    }))
}

impl PackBackend {
    /// The open store, opening (and recovering) it on first use.
    fn store(&self) -> BResult<Arc<PackStore>> {
        let mut slot = self.store.lock().expect("pack backend lock");
        if let Some(store) = slot.as_ref() {
            return Ok(store.clone());
        }
        let store = PackStore::open(&self.dir, self.fsync)?;
        store.set_read_checks(self.read_checks);
        store.set_mapped_reads(self.mmap);
        *slot = Some(store.clone());
        Ok(store)
    }

    /// The directory holding the pack's files (what `stowbench compact` is pointed at).
    pub fn pack_dir(&self) -> &Path {
        &self.dir
    }
}

impl Backend for PackBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities { keeps_replaced_values: true, ..Capabilities::default() }
    }

    fn describe(&self) -> BackendInfo {
        let mut options = self.options.redacted_json();
        if let Some(map) = options.as_object_mut() {
            map.insert("fsync".into(), self.fsync.into());
            map.insert("read_checks".into(), self.read_checks.into());
            map.insert("mmap".into(), self.mmap.into());
        }
        BackendInfo {
            backend: "pack".into(),
            versions: [("pack_format".to_string(), FORMAT_VERSION.to_string())].into_iter().collect(),
            options,
            durability: if self.fsync {
                "fdatasync of the writer's data file after each record, before the key becomes visible".into()
            } else {
                "none: records reach the page cache; a crash may lose recent puts (never returns torn ones)".into()
            },
            data_paths: vec![self.dir.clone()],
        }
    }

    fn prepare(&self) -> BResult<()> {
        self.store().map(|_| ())
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        Ok(Box::new(PackSession { lease: self.store()?.lease()? }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        super::fs::disk_usage_of(std::slice::from_ref(&self.dir))
    }

    fn release_cached_data(&self) -> BResult<()> {
        if let Some(store) = self.store.lock().expect("pack backend lock").as_ref() {
            store.release_mapped_pages();
        }
        Ok(())
    }

    fn cleanup(&self) -> BResult<()> {
        // Close first so the lock is released; sessions still alive keep only unlinked files.
        // The files are about to go: closing need not write an index for them.
        if let Some(store) = self.store.lock().expect("pack backend lock").take() {
            store.close_without_index();
        }
        super::fs::remove_dir_if_present(&self.dir)?;
        self.data.release()
    }
}

struct PackSession {
    lease: StripeLease,
}

impl Session for PackSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.lease.put(key, body, len)
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        self.lease.get(key, sink)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        self.lease.delete(key)
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.lease.store().head(key)
    }
}
