//! Option `files` of the `sqlite` backend: one logical table spread over K database files (E4).
//!
//! Each key lives in exactly one file, chosen by a seeded xxh3 hash of the key modulo K, so rows
//! spread evenly and a key never moves. A session holds one connection per file and sends each
//! operation to its key's file. SQLite admits one writer per database file, so K files are K
//! independent writer locks: that, not the number of files on disk as such, is what changes with
//! K (the docs compare it with the published SQL Server study). No transaction spans two files,
//! and none needs to: every operation touches one key. This module must never route a key to a
//! file other than the one `file_of` names, or reads would miss what puts wrote.

use super::connection::DATABASE_FILE;
use super::SqliteSession;
use crate::backend::options::Options;
use crate::backend::{BResult, Session};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

crate::backend_options! {
    /// Option `files`.
    pub(crate) struct FilesOption {
        files: u64 = 1 => "database files the table is spread over, 1 to 64: each key lives in one file (xxh3 of the key modulo files), each file has its own WAL and writer lock, each session one connection per file",
    }
}

/// Most files a target may ask for: every session opens one connection (file descriptors, a page
/// cache of `cache_size`, a WAL index mapping) per file, and E4 stops at 16.
pub(crate) const MAX_FILES: u64 = 64;

/// Seed of the hash that picks a key's file; independent of the `rowid` schema's row id (seed 0),
/// so the row ids inside one file are not all congruent modulo K. Decides where data lies on disk:
/// never change it.
const FILE_SEED: u64 = 0xE4_F11E5;

/// Reads option `files`; the message names the option and the range.
pub(crate) fn from_options(options: &Options) -> Result<usize, String> {
    let files = FilesOption::read(options)?.files;
    if !(1..=MAX_FILES).contains(&files) {
        return Err(format!(
            "target \"{}\": option \"files\" is {files}; use 1 to {MAX_FILES} database files (1 keeps the whole table in objects.db)",
            options.target
        ));
    }
    Ok(files as usize)
}

/// The database files of a table spread over `count` files in `dir`: `objects.db` first (so one
/// file is the usual layout), then `objects-1.db` … `objects-(count-1).db`.
pub(crate) fn paths(dir: &Path, count: usize) -> Vec<PathBuf> {
    (0..count).map(|i| if i == 0 { dir.join(DATABASE_FILE) } else { dir.join(format!("objects-{i}.db")) }).collect()
}

/// The index of the file `key` lives in, of `count`.
pub(crate) fn file_of(key: &str, count: usize) -> usize {
    (crate::hash::xxh3_64_with_seed(key.as_bytes(), FILE_SEED) % count as u64) as usize
}

/// A session over several files: one `SqliteSession` (its own connection) per file.
pub(crate) struct SpreadSession {
    /// One per file, in `paths` order.
    pub parts: Vec<SqliteSession>,
}

impl SpreadSession {
    fn part(&mut self, key: &str) -> &mut SqliteSession {
        let count = self.parts.len();
        &mut self.parts[file_of(key, count)]
    }
}

impl Session for SpreadSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.part(key).put(key, body, len)
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        self.part(key).get(key, sink)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        self.part(key).delete(key)
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.part(key).head(key)
    }

    /// Time spent waiting for any file's writer lock: a session waits for one file at a time.
    fn wait_ns(&self) -> u64 {
        self.parts.iter().map(|p| p.wait_ns).sum()
    }

    fn settle(&mut self) {
        self.parts.iter_mut().for_each(|part| part.settle());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_spread_evenly_and_stay_put() {
        for count in [2usize, 3, 16] {
            let mut per_file = vec![0u32; count];
            for i in 0..16_000 {
                per_file[file_of(&format!("key-{i:08}"), count)] += 1;
            }
            let expected = 16_000 / count as u32;
            for (file, n) in per_file.iter().enumerate() {
                assert!(n.abs_diff(expected) < expected / 10, "{count} files: file {file} holds {n} of 16000 keys");
            }
        }
        assert_eq!(file_of("anything", 1), 0);
        // On disk: a build that moved keys between files would not find what an older one wrote.
        assert_eq!([file_of("a", 16), file_of("b", 16), file_of("key-00000001", 16)], [2, 13, 6]);
    }

    /// Each file is its own writer lock: while one session holds a write transaction in a key's
    /// file, a put to that file waits (and, with a 10 ms busy timeout, fails as a conflict), but a
    /// put to another file commits. The wait is in the waiting session's `wait_ns`.
    #[test]
    fn each_file_has_its_own_writer_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let ns = crate::backend::Namespace::create(&tmp.path().join("ns"), "test", "case").unwrap();
        let options = Options::new("t", "", toml::from_str("files = 3\nbusy_timeout = \"10ms\"").unwrap());
        let backend = super::super::SqliteBackend::new(&options, &ns).unwrap();
        crate::backend::Backend::prepare(&backend).unwrap();
        let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
        let in_file = |f: usize| keys.iter().find(|k| file_of(k, 3) == f).unwrap().as_str();
        let mut holder = backend.new_session(&backend.dbs[0]).unwrap();
        let _held = super::super::begin_write(&mut holder.conn, &mut holder.wait_ns).unwrap();
        let mut other = SpreadSession { parts: backend.dbs.iter().map(|db| backend.new_session(db).unwrap()).collect() };
        other.put(in_file(1), &mut &b"one"[..], 3).expect("file 1 is not locked");
        other.put(in_file(2), &mut &b"two"[..], 3).expect("file 2 is not locked");
        assert_eq!(other.wait_ns(), other.parts.iter().map(|p| p.wait_ns).sum::<u64>());
        let err = other.put(in_file(0), &mut &b"zero"[..], 4).expect_err("file 0 is locked");
        assert_eq!(err.kind, crate::backend::ErrorKind::Conflict, "{err}");
        assert!(other.wait_ns() >= 10_000_000, "the 10 ms busy wait is reported: {} ns", other.wait_ns());
        let mut found = Vec::new();
        assert_eq!(other.get(in_file(2), &mut found).unwrap(), 3);
        let rows = |db: &Path| rusqlite::Connection::open(db).unwrap().query_row("SELECT count(*) FROM objects", [], |r| r.get::<_, i64>(0)).unwrap();
        assert_eq!(backend.dbs.iter().map(|db| rows(db)).collect::<Vec<_>>(), [0, 1, 1], "each row in its key's file only");
    }

    #[test]
    fn out_of_range_counts_name_the_option_and_the_range() {
        for text in ["files = 0", "files = 10000"] {
            let options = Options::new("t", "", toml::from_str(text).unwrap());
            let err = from_options(&options).unwrap_err();
            assert!(err.contains("option \"files\"") && err.contains("1 to 64"), "{text}: {err}");
        }
        let err = from_options(&Options::new("t", "", toml::from_str("files = \"four\"").unwrap())).unwrap_err();
        assert!(err.contains("files"), "{err}");
    }
}
