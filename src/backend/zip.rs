//! `zip`: every object is a stored (uncompressed) entry of one standard zip archive, written with
//! the `zip` crate, the everyday container people reach for.
//!
//! Zip is append-only by nature: a put appends a local header and the bytes; the archive becomes
//! valid (readable by any unzip) only when the central directory is written after the last entry.
//! With `flush = "per-put"` (default) every put and delete rewrites the whole central directory
//! (O(entries) bytes) — the zip crate cannot write it without closing the writer, so it is also
//! re-read; with `flush = "none"` it is written once, when the backend closes. Overwrite and
//! delete drop the old entry from the central directory; its bytes stay in the file as dead space
//! (counted in disk usage) until the archive is rewritten. A failed put never costs the old value:
//! its partial entry is cut off and, for an overwrite, the old bytes come back as a fresh copy
//! (`ZipSession::recover_failed_put`). This module must never write over an indexed entry's bytes.
//! One writer at a time (waits reported in `wait_ns`); reads go straight to the entry's bytes by
//! offset, check the CRC-32, and never wait.

use super::options::{OptionDoc, Options};
use super::{copy_exact_at, BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "zip",
    summary: "one stored (uncompressed) entry per object in a single zip archive; one writer at a time",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: None,
};

const OPTIONS: &[OptionDoc] = crate::options_list!(super::namespace::DataPath::DOCS, ZipOptions::DOCS);

crate::option_choice! {
    /// When the central directory is written.
    pub enum ZipFlush { PerPut = "per-put", None = "none" }
}

crate::backend_options! {
    /// zip's own options.
    pub struct ZipOptions {
        flush: ZipFlush = "per-put" => "per-put: rewrite the central directory after every put/delete; none: only when closing",
        fsync: bool = false => "fdatasync the archive after each central-directory write (needs flush = \"per-put\" to mean per put)",
    }
}

/// Version string of the zip crate we build against (from Cargo.toml).
const ZIP_CRATE_VERSION: &str = "9.4";

/// Where one entry's bytes are.
#[derive(Debug, Clone, Copy)]
struct Entry {
    data_start: u64,
    len: u64,
    crc32: u32,
}

/// The writer side: the crate's writer and where the next entry goes.
struct Writer {
    zip: Option<ZipWriter<File>>,
    /// Offset just past the last entry's bytes, in bytes: where the next entry (or the central
    /// directory) goes. The crate's `new_append` would append after the old central directory,
    /// leaving a dead copy of it per reopen, so we seek here instead.
    append_at: u64,
    /// The archive's file, named in a failed write ("no space left" says where).
    path: PathBuf,
}

/// State shared by all sessions of one open archive.
struct Archive {
    writer: Mutex<Writer>,
    index: RwLock<HashMap<String, Entry>>,
    reader: File,
    flush_per_put: bool,
    fsync: bool,
}

/// The zip backend for one case.
pub struct ZipBackend {
    /// Where the files live (the run\'s namespace, or the `path` option\'s per-run directory).
    data: super::namespace::DataNamespace,
    dir: PathBuf,
    flush_per_put: bool,
    fsync: bool,
    options: Options,
    archive: Mutex<Option<Arc<Archive>>>,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("zip", OPTIONS)?;
    // The one per-run namespace mechanism (`namespace::DataNamespace`): with `path`, a marked directory
    // named after the run, removed by cleanup.
    let data = super::namespace::DataNamespace::new(options, ns)?;
    let own = ZipOptions::read(options)?;
    Ok(Box::new(ZipBackend {
        dir: data.ns.dir.join("zip"),
        data,
        flush_per_put: own.flush == ZipFlush::PerPut,
        fsync: own.fsync,
        options: options.clone(),
        archive: Mutex::new(None),
    }))
}

/// Entry names: the key with anything outside [A-Za-z0-9._-] percent-encoded, so names never hold
/// '/' or "..", and no unzip can be steered outside its target directory. Reversible.
pub fn entry_name(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 1);
    out.push('k');
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The key of an entry name made by `entry_name`.
pub fn key_of(name: &str) -> Option<String> {
    let rest = name.strip_prefix('k')?.as_bytes();
    let mut bytes = Vec::with_capacity(rest.len());
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == b'%' {
            let hex = std::str::from_utf8(rest.get(i + 1..i + 3)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            bytes.push(rest[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).ok()
}

fn zip_error(e: zip::result::ZipError, context: &str) -> BackendError {
    let kind = match &e {
        zip::result::ZipError::Io(io) => BackendError::from(std::io::Error::new(io.kind(), "")).kind,
        zip::result::ZipError::FileNotFound => ErrorKind::NotFound,
        _ => ErrorKind::Corrupt,
    };
    BackendError::new(kind, format!("{context}: {e}"))
}

impl Archive {
    /// Opens `path` (creating an empty archive if missing) and indexes its entries.
    fn open(path: &Path, flush_per_put: bool, fsync: bool) -> BResult<Archive> {
        if !path.exists() {
            let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
            ZipWriter::new(file).finish().map_err(|e| zip_error(e, "cannot create the archive"))?;
        }
        let reader = File::open(path)?;
        let context = format!("cannot read {}", path.display());
        let mut archive = ZipArchive::new(reader.try_clone()?).map_err(|e| zip_error(e, &context))?;
        let mut index = HashMap::new();
        let mut append_at = 0;
        for i in 0..archive.len() {
            let entry = archive.by_index_raw(i).map_err(|e| zip_error(e, &context))?;
            let name = entry.name().map_err(|e| zip_error(e, &context))?.to_string();
            let key =
                key_of(&name).ok_or_else(|| BackendError::new(ErrorKind::Corrupt, format!("{context}: entry \"{name}\" was not written by stowbench")))?;
            let data_start =
                entry.data_start().ok_or_else(|| BackendError::new(ErrorKind::Corrupt, format!("{context}: entry \"{name}\" has no data offset")))?;
            if entry.compression() != CompressionMethod::Stored {
                return Err(BackendError::new(ErrorKind::Corrupt, format!("{context}: entry \"{name}\" is compressed; stowbench writes stored entries only")));
            }
            append_at = append_at.max(data_start + entry.compressed_size());
            index.insert(key, Entry { data_start, len: entry.size(), crc32: entry.crc32() });
        }
        drop(archive);
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let zip = reopen_writer(file, append_at)?;
        Ok(Archive {
            writer: Mutex::new(Writer { zip: Some(zip), append_at, path: path.to_path_buf() }),
            index: RwLock::new(index),
            reader,
            flush_per_put,
            fsync,
        })
    }
}

/// A writer over an existing archive, positioned to write the next entry at `append_at`.
fn reopen_writer(file: File, append_at: u64) -> BResult<ZipWriter<File>> {
    let zip = ZipWriter::new_append(file).map_err(|e| zip_error(e, "cannot reopen the archive for appending"))?;
    // The writer writes through this very descriptor without buffering, so moving the shared
    // file offset moves where its next header goes; everything past `append_at` is the old
    // central directory or dead entries.
    let mut position: &File = zip.get_ref().expect("a fresh writer is open");
    position.seek(SeekFrom::Start(append_at))?;
    Ok(zip)
}

/// The error once a failed central-directory write has consumed the crate's writer.
fn writer_lost() -> BackendError {
    BackendError::new(ErrorKind::Other, "zip writer unusable: an earlier central-directory write failed; reopen the backend")
}

impl Writer {
    fn zip(&mut self) -> BResult<&mut ZipWriter<File>> {
        self.zip.as_mut().ok_or_else(writer_lost)
    }

    /// Writes the central directory (making the archive valid), optionally fdatasyncs, reopens.
    fn write_central_directory(&mut self, fsync: bool) -> BResult<()> {
        let zip = self.zip.take().ok_or_else(writer_lost)?;
        let file = zip.finish().map_err(|e| zip_error(e, "cannot write the central directory"))?;
        if fsync {
            file.sync_data()?;
        }
        self.zip = Some(reopen_writer(file, self.append_at)?);
        Ok(())
    }

    /// Appends a stored entry `name` holding `len` bytes of `body` at `append_at` (and, if
    /// `expected_crc32` is given, fails unless the bytes match it). On failure the partial entry
    /// is dropped and the file cut back to `append_at`: nothing of it remains.
    fn append_entry(&mut self, name: &str, body: &mut dyn Read, len: u64, expected_crc32: Option<u32>) -> BResult<Entry> {
        let written = self.write_entry_bytes(name, body, len).and_then(|entry| match expected_crc32 {
            Some(crc32) if crc32 != entry.crc32 => Err(BackendError::new(ErrorKind::Corrupt, "the bytes fail their CRC-32")),
            _ => Ok(entry),
        });
        match written {
            Ok(entry) => {
                self.append_at = entry.data_start + entry.len;
                Ok(entry)
            }
            Err(e) => match self.discard_open_entry() {
                Ok(()) => Err(e),
                Err(cut) => Err(BackendError::new(e.kind, format!("{}; cutting the partial entry off failed too: {cut}", e.message))),
            },
        }
    }

    fn write_entry_bytes(&mut self, name: &str, body: &mut dyn Read, len: u64) -> BResult<Entry> {
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Stored).large_file(len >= u32::MAX as u64);
        let zip = self.zip()?;
        zip.start_file(name, options).map_err(|e| zip_error(e, "cannot start the entry"))?;
        let mut position: &File = zip.get_ref().ok_or_else(|| BackendError::new(ErrorKind::Other, "zip writer closed mid-entry"))?;
        let data_start = position.stream_position()?;
        let mut crc_writer = CrcWriter { inner: zip, crc: crc32fast::Hasher::new() };
        let copied = copy_exact_at(body, &mut crc_writer, len, data_start);
        let crc32 = crc_writer.crc.finalize();
        copied.map_err(|e| BackendError::new(e.kind, format!("{}, entry at offset {data_start}: {}", self.path.display(), e.message)))?;
        Ok(Entry { data_start, len, crc32 })
    }

    /// Drops the entry being written (if any) and truncates the file to `append_at`, so neither
    /// its bytes nor the old central directory past it are left for a reader to trip over.
    fn discard_open_entry(&mut self) -> BResult<()> {
        let append_at = self.append_at;
        let zip = self.zip()?;
        // `abort_file` with no entry open would drop the last *finished* entry instead.
        if zip.is_writing_file() {
            zip.abort_file().map_err(|e| zip_error(e, "cannot drop the partial entry"))?;
        }
        let mut file: &File = zip.get_ref().ok_or_else(|| BackendError::new(ErrorKind::Other, "zip writer closed mid-entry"))?;
        file.set_len(append_at)?;
        file.seek(SeekFrom::Start(append_at))?;
        Ok(())
    }

    /// Appends a fresh entry `name` whose bytes are copied from `old`'s data region (positioned
    /// reads through `reader`, bounded buffer), checked against `old.crc32`. The failure path of
    /// an overwrite uses it to bring the old value back: see `ZipSession::put`.
    fn append_copy(&mut self, name: &str, reader: &File, old: Entry) -> BResult<Entry> {
        let mut source = RegionReader { file: reader, at: old.data_start, left: old.len };
        self.append_entry(name, &mut source, old.len, Some(old.crc32))
    }
}

/// Reads `left` bytes of a file from offset `at` with positioned reads (no shared offset moves).
struct RegionReader<'a> {
    file: &'a File,
    at: u64,
    left: u64,
}

impl Read for RegionReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}

impl Drop for Archive {
    fn drop(&mut self) {
        // With flush = "none" this is where the archive becomes valid; the crate's writer also
        // finishes on drop, but this way the fsync setting is honoured.
        if let Ok(mut writer) = self.writer.lock() {
            if let Some(zip) = writer.zip.take() {
                if let Ok(file) = zip.finish() {
                    if self.fsync {
                        let _ = file.sync_data();
                    }
                }
            }
        }
    }
}

impl ZipBackend {
    fn archive(&self) -> BResult<Arc<Archive>> {
        let mut slot = self.archive.lock().expect("zip backend lock");
        if let Some(archive) = slot.as_ref() {
            return Ok(archive.clone());
        }
        fs::create_dir_all(&self.dir)?;
        let archive = Arc::new(Archive::open(&self.dir.join("store.zip"), self.flush_per_put, self.fsync)?);
        *slot = Some(archive.clone());
        Ok(archive)
    }
}

impl Backend for ZipBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities { concurrent_writers: false, keeps_replaced_values: true, ..Capabilities::default() }
    }

    fn describe(&self) -> BackendInfo {
        let mut options = self.options.redacted_json();
        if let Some(map) = options.as_object_mut() {
            map.insert("flush".into(), if self.flush_per_put { "per-put" } else { "none" }.into());
            map.insert("fsync".into(), self.fsync.into());
        }
        let durability = match (self.flush_per_put, self.fsync) {
            (true, true) => "central directory rewritten and archive fdatasynced after every put/delete",
            (true, false) => "central directory rewritten after every put/delete (page cache only)",
            (false, true) => "none until close: the central directory is written and fdatasynced only when the backend closes",
            (false, false) => "none until close: the central directory is written only when the backend closes",
        };
        BackendInfo {
            backend: "zip".into(),
            versions: [("zip_crate".to_string(), ZIP_CRATE_VERSION.to_string())].into_iter().collect(),
            options,
            durability: format!(
                "{durability}; a put costs a local header + the bytes{}; overwritten/deleted entries stay as dead bytes",
                if self.flush_per_put { " + a full central-directory rewrite (O(entries))" } else { "" }
            ),
            data_paths: vec![self.dir.clone()],
        }
    }

    fn prepare(&self) -> BResult<()> {
        self.archive().map(|_| ())
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        Ok(Box::new(ZipSession { archive: self.archive()?, wait_ns: 0 }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        super::fs::disk_usage_of(std::slice::from_ref(&self.dir))
    }

    fn cleanup(&self) -> BResult<()> {
        self.archive.lock().expect("zip backend lock").take();
        super::fs::remove_dir_if_present(&self.dir)?;
        self.data.release()
    }
}

struct ZipSession {
    archive: Arc<Archive>,
    wait_ns: u64,
}

/// Passes bytes to the zip writer while computing their CRC-32 for our index.
struct CrcWriter<'a> {
    inner: &'a mut ZipWriter<File>,
    crc: crc32fast::Hasher,
}

impl Write for CrcWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(data)?;
        self.crc.update(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl ZipSession {
    fn writer(&mut self) -> BResult<std::sync::MutexGuard<'_, Writer>> {
        let writer = &self.archive.writer;
        super::waiting_for_lock(&mut self.wait_ns, || writer.lock())
            .map_err(|_| BackendError::new(ErrorKind::Other, "zip writer unusable: an earlier operation panicked while holding it"))
    }

    /// After a failed put (its partial entry already cut off): brings back the old value, if
    /// there was one, and rewrites the central directory with `flush = "per-put"` (the put's
    /// local header overwrote it). Returns the error to report.
    ///
    /// The old value is restored by appending a copy of its bytes as a fresh entry of the same
    /// name (checked against its CRC-32). The crate offers no cheaper way: `hide_file` forgets
    /// the entry's record, `deep_copy_file` needs the source still in the writer's directory,
    /// and `shallow_copy_file` would give one set of bytes two names (the local header would
    /// disagree with the central directory). Only this rare path pays the copy; a successful
    /// overwrite writes the new bytes once. If the copy fails too, the key is removed and the
    /// error says so: the index never points at bytes that are not a whole, checked value.
    fn recover_failed_put(archive: &Archive, writer: &mut Writer, key: &str, name: &str, old: Option<Entry>, failure: BackendError) -> BackendError {
        let mut message = failure.message;
        if let Some(old) = old {
            match writer.append_copy(name, &archive.reader, old) {
                Ok(restored) => {
                    archive.index.write().expect("zip index lock").insert(key.to_string(), restored);
                    message.push_str("; the old value is kept");
                }
                Err(e) => {
                    archive.index.write().expect("zip index lock").remove(key);
                    message.push_str(&format!("; restoring the old value failed too ({}), so the key was removed", e.message));
                }
            }
        }
        if archive.flush_per_put {
            if let Err(e) = writer.write_central_directory(archive.fsync) {
                message.push_str(&format!("; rewriting the central directory failed too: {}", e.message));
            }
        }
        BackendError::new(failure.kind, message)
    }
}

impl Session for ZipSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let name = entry_name(key);
        let archive = self.archive.clone();
        let mut writer = self.writer()?;
        let old = archive.index.read().expect("zip index lock").get(key).copied();
        let zip = writer.zip()?; // an unusable writer fails here, before anything changes
        if old.is_some() {
            // The crate refuses a second entry of the same name and cannot rename or un-hide one,
            // so the old entry leaves the writer's directory before the new one is written. Its
            // bytes stay where they are (everything is appended after `append_at`), and the index
            // keeps pointing at them until the new entry is complete.
            zip.hide_file(&name).map_err(|e| zip_error(e, "cannot drop the old entry"))?;
        }
        match writer.append_entry(&name, body, len, None) {
            Ok(entry) => {
                if archive.flush_per_put {
                    writer.write_central_directory(archive.fsync)?;
                }
                archive.index.write().expect("zip index lock").insert(key.to_string(), entry);
                Ok(())
            }
            Err(e) => Err(Self::recover_failed_put(&archive, &mut writer, key, &name, old, e)),
        }
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let entry = *self.archive.index.read().expect("zip index lock").get(key).ok_or_else(|| BackendError::not_found(key))?;
        let mut crc = crc32fast::Hasher::new();
        // The buffer agrees with the entry's offset modulo 4 KiB, where the kernel copies fastest.
        let sent = super::io_buffer::with_io_buffer(|buf| {
            super::stream_range(&self.archive.reader, entry.data_start, entry.len, buf.for_offset(entry.data_start), sink, |chunk| crc.update(chunk))
        })?;
        if sent < entry.len {
            let why = format!("zip entry of key \"{key}\": the file ends {sent} bytes into its {} bytes (the archive was cut short)", entry.len);
            return Err(BackendError::new(ErrorKind::Corrupt, why));
        }
        if crc.finalize() != entry.crc32 {
            return Err(BackendError::new(ErrorKind::Corrupt, format!("zip entry of key \"{key}\" fails its CRC-32")));
        }
        Ok(entry.len)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let archive = self.archive.clone();
        let mut writer = self.writer()?;
        if !archive.index.read().expect("zip index lock").contains_key(key) {
            return Err(BackendError::not_found(key));
        }
        writer.zip()?.hide_file(&entry_name(key)).map_err(|e| zip_error(e, "cannot drop the entry"))?;
        archive.index.write().expect("zip index lock").remove(key);
        if archive.flush_per_put {
            writer.write_central_directory(archive.fsync)?;
        }
        Ok(())
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.archive.index.read().expect("zip index lock").get(key).map(|e| e.len).ok_or_else(|| BackendError::not_found(key))
    }

    fn wait_ns(&self) -> u64 {
        self.wait_ns
    }
}
