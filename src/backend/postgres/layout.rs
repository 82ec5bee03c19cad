//! Options `partitions`, `tablespaces` and `tablespace_dir` of the `postgres` backend: the table
//! hash-partitioned on its key, the partitions spread over tablespaces in separate directories
//! (E4: one logical table over 1 to 16 data files).
//!
//! Partition j (with its TOAST table and its primary-key index) lives in tablespace j mod K, so
//! with a fixed partition count only the number of tablespaces changes between E4's targets.
//! Tablespace i lives in `ts-i` under directory i mod D of `tablespace_dir`, so two directories on
//! two devices give the published two-array layout. Tablespaces belong to the whole server: their
//! names carry the case's owned name, and cleanup drops only those, after our table, then removes
//! only the directories it made. This module must never drop a tablespace or remove a directory
//! it did not create.

use crate::backend::namespace::{self, Namespace};
use crate::backend::options::Options;
use crate::backend::{BResult, BackendError, ErrorKind};
use postgres::Client;
use std::path::{Path, PathBuf};

crate::backend_options! {
    /// The options this module reads.
    pub(crate) struct LayoutOptions {
        partitions: Option<u64>, "<tablespaces>" => "hash partitions of the table on its key, 0 to 1024 (0: one plain table); bytea and file modes",
        tablespaces: u64 = 0 => "tablespaces made for the case, 0 to 64, each in its own directory; partition j lives in tablespace j mod K (0: the database's default tablespace). Needs a server on this machine, run by root or the server's OS user",
        tablespace_dir: Option<Vec<String>>, "<namespace directory>" => "absolute directory, or a list of them, for the tablespaces' directories: tablespace i goes under entry i mod the list's length (two entries on two devices: the two-array layout). The server's OS user must reach it",
    }
}

/// Most tablespaces one target may make (E4 stops at 16).
const MAX_TABLESPACES: u64 = 64;
/// Most partitions one target may make (PostgreSQL plans badly far beyond this).
const MAX_PARTITIONS: u64 = 1024;

/// One tablespace of the case.
#[derive(Debug, Clone)]
struct Tablespace {
    /// Its name on the server: `sb_<owned name>_ts<i>` (never `pg_`, which is reserved).
    name: String,
    /// Its location: `ts-<i>` under a root, owned by the server's OS user.
    dir: PathBuf,
}

/// Where the table's storage goes, validated; nothing is made before `create`. The default is
/// one plain table in the default tablespace.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    /// Hash partitions (0: a plain table).
    partitions: u32,
    tablespaces: Vec<Tablespace>,
    /// The directories holding the tablespaces' directories; `(dir, marked)`: a marked one was
    /// made under a `tablespace_dir` entry and is removed whole, the unmarked one is inside the
    /// case's namespace and removed once empty.
    roots: Vec<(PathBuf, bool)>,
    /// The server's data directory, whose owner the tablespace directories must have.
    data_dir: Option<PathBuf>,
    run_id: String,
}

impl Layout {
    /// The options' checks that need no server, run before connecting so that a mistake shows
    /// while the server is down too: the number of partitions (0 for a plain table), or why not.
    pub fn check(options: &Options) -> Result<u64, String> {
        Self::read_checked(options).map(|(_, partitions, _)| partitions)
    }

    /// Tablespaces, partitions and the tablespace directories, checked against each other.
    fn read_checked(options: &Options) -> Result<(u64, u64, Vec<PathBuf>), String> {
        let bad = |name: &str, why: String| format!("target \"{}\": option \"{name}\": {why}", options.target);
        let own = LayoutOptions::read(options)?;
        let tablespaces = own.tablespaces;
        if tablespaces > MAX_TABLESPACES {
            return Err(bad("tablespaces", format!("{tablespaces} is too many; use 0 to {MAX_TABLESPACES}")));
        }
        let partitions = own.partitions.unwrap_or(tablespaces);
        if partitions > MAX_PARTITIONS {
            return Err(bad("partitions", format!("{partitions} is too many; use 0 to {MAX_PARTITIONS}")));
        }
        if partitions < tablespaces {
            return Err(bad(
                "partitions",
                format!("{partitions} partitions cannot fill {tablespaces} tablespaces (partition j goes to tablespace j mod {tablespaces}); use at least {tablespaces}"),
            ));
        }
        let dirs = tablespace_dirs(options, own.tablespace_dir.unwrap_or_default())?;
        if tablespaces == 0 && !dirs.is_empty() {
            return Err(bad("tablespace_dir", "is set but tablespaces = 0 makes none; set tablespaces = K or drop tablespace_dir".into()));
        }
        Ok((tablespaces, partitions, dirs))
    }

    /// Reads and checks the options; `owned` is the case's owned name on the server.
    pub fn from_options(options: &Options, ns: &Namespace, owned: &str, data_dir: Option<&Path>) -> Result<Layout, String> {
        let bad = |name: &str, why: String| format!("target \"{}\": option \"{name}\": {why}", options.target);
        let (tablespaces, partitions, dirs) = Self::read_checked(options)?;
        if tablespaces > 0 && data_dir.is_none() {
            return Err(bad(
                "tablespaces",
                "needs the server on this machine (its data directory was not found: give data_dir, or STOWBENCH_PG_DATA), \
                 to give the tablespace directories to the server's OS user"
                    .into(),
            ));
        }
        let roots: Vec<(PathBuf, bool)> = match dirs.is_empty() {
            true => vec![(ns.dir.join("pg-tablespaces"), false)],
            false => dirs.into_iter().map(|d| (d.join(format!("stowbench-{}-{}", ns.run_id, ns.name)), true)).collect(),
        };
        let tablespaces = (0..tablespaces as usize)
            .map(|i| Tablespace { name: format!("sb_{owned}_ts{i}"), dir: roots[i % roots.len()].0.join(format!("ts-{i}")) })
            .collect();
        Ok(Layout { partitions: partitions as u32, tablespaces, roots, data_dir: data_dir.map(Path::to_path_buf), run_id: ns.run_id.clone() })
    }

    /// Whether the table is partitioned.
    pub fn partitioned(&self) -> bool {
        self.partitions > 0
    }

    /// The clause that makes the parent table partitioned (empty for a plain table).
    pub fn partition_clause(&self) -> &'static str {
        if self.partitioned() {
            " PARTITION BY HASH (key)"
        } else {
            ""
        }
    }

    /// Records the effective values in the report's options.
    pub fn record(&self, map: &mut serde_json::Map<String, serde_json::Value>) {
        map.insert("partitions".into(), self.partitions.into());
        map.insert("tablespaces".into(), self.tablespaces.len().into());
        let roots: Vec<serde_json::Value> = self.roots.iter().map(|(d, _)| d.display().to_string().into()).collect();
        map.insert("tablespace_dir".into(), roots.into());
    }

    /// Each tablespace's name and directory (for `cleanup --dry-run`).
    pub fn tablespaces(&self) -> Vec<(String, PathBuf)> {
        self.tablespaces.iter().map(|t| (t.name.clone(), t.dir.clone())).collect()
    }

    /// The tablespaces' directories (for the report's data paths).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.tablespaces.iter().map(|t| t.dir.clone()).collect()
    }

    /// Makes the tablespaces (if absent), then the partitions of `table` (`base` is its unquoted
    /// name), each with its index in its tablespace; harmless to call twice.
    pub fn create(&self, client: &mut Client, table: &str, base: &str, fail: &dyn Fn(postgres::Error) -> BackendError) -> BResult<()> {
        for ts in &self.tablespaces {
            self.make_tablespace(client, ts, fail)?;
        }
        for j in 0..self.partitions {
            let part = format!("\"{base}_p{j}\"");
            let place = match self.tablespaces.is_empty() {
                true => String::new(),
                false => format!(" TABLESPACE {}", self.tablespaces[j as usize % self.tablespaces.len()].name),
            };
            let sql = format!("CREATE TABLE IF NOT EXISTS {part} PARTITION OF {table} FOR VALUES WITH (MODULUS {}, REMAINDER {j}){place}", self.partitions);
            client.batch_execute(&sql).map_err(fail)?;
            if let Some(ts) = place.strip_prefix(" TABLESPACE ") {
                // A partition's primary-key index is made in the default tablespace, not its table's.
                let indexes = client.query("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = $1::text::regclass", &[&part]).map_err(fail)?;
                for row in indexes {
                    client.batch_execute(&format!("ALTER INDEX {} SET TABLESPACE {ts}", row.get::<_, String>(0))).map_err(fail)?;
                }
            }
        }
        Ok(())
    }

    /// Makes one tablespace's directory, gives it to the server's OS user and creates the
    /// tablespace there, unless the server already has it at that directory.
    fn make_tablespace(&self, client: &mut Client, ts: &Tablespace, fail: &dyn Fn(postgres::Error) -> BackendError) -> BResult<()> {
        let found = client.query_opt("SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE spcname = $1", &[&ts.name]).map_err(fail)?;
        if let Some(row) = found {
            let location: String = row.get(0);
            if Path::new(&location) == ts.dir {
                return Ok(());
            }
            return Err(BackendError::new(
                ErrorKind::Other,
                format!("tablespace {} exists at {location}, not {}; not ours: left alone", ts.name, ts.dir.display()),
            ));
        }
        let root = ts.dir.parent().unwrap_or(Path::new("/"));
        let marked = self.roots.iter().any(|(r, m)| r == root && *m);
        if marked {
            Namespace::create(root, &self.run_id, "tablespaces").map_err(|e| BackendError::new(ErrorKind::Io, e))?;
        } else {
            std::fs::create_dir_all(root)?;
        }
        std::fs::create_dir_all(&ts.dir)?;
        // Before the server depends on the directory: no stowbench cleanup may delete it until
        // the tablespace is dropped.
        let why = format!("PostgreSQL tablespace {} lives in {}; drop it first (DROP TABLESPACE {})", ts.name, ts.dir.display(), ts.name);
        namespace::pin(&ts.dir, &ts.name, &why).map_err(|e| BackendError::new(ErrorKind::Io, e))?;
        let data_dir = self.data_dir.as_deref().unwrap_or(Path::new("/"));
        give_to_server_user(&ts.dir, data_dir)?;
        let location = ts.dir.to_string_lossy().replace('\'', "''");
        client.batch_execute(&format!("CREATE TABLESPACE {} LOCATION '{location}'", ts.name)).map_err(|e| {
            let e = fail(e);
            BackendError::new(
                e.kind,
                format!(
                    "{} (making tablespace {} at {}: the server's OS user, owner of {}, must be able to reach it — every parent \
                     directory needs search permission for that user; point option tablespace_dir at a directory it can reach)",
                    e.message,
                    ts.name,
                    ts.dir.display(),
                    data_dir.display()
                ),
            )
        })
    }

    /// Drops our tablespaces (after the table: a tablespace must be empty), then removes the
    /// directories made for them; whatever was never made is skipped.
    pub fn drop_all(&self, client: &mut Client, fail: &dyn Fn(postgres::Error) -> BackendError) -> BResult<()> {
        for ts in &self.tablespaces {
            client.batch_execute(&format!("DROP TABLESPACE IF EXISTS {}", ts.name)).map_err(fail)?;
            // The server removed its PG_<version> subdirectory; what is left is our empty directory.
            namespace::unpin(&ts.dir, &ts.name).map_err(|e| BackendError::new(ErrorKind::Io, e))?;
            remove_empty_dir(&ts.dir)?;
        }
        for (root, marked) in &self.roots {
            if *marked {
                namespace::remove(root).map_err(|e| BackendError::new(ErrorKind::Io, e))?;
            } else if !self.tablespaces.is_empty() {
                remove_empty_dir(root)?;
            }
        }
        Ok(())
    }
}

/// The `tablespace_dir` entries (one absolute directory or a list of them), each checked to exist.
fn tablespace_dirs(options: &Options, entries: Vec<String>) -> Result<Vec<PathBuf>, String> {
    let bad = |why: String| format!("target \"{}\": option \"tablespace_dir\": {why}", options.target);
    let mut dirs = Vec::new();
    for text in &entries {
        let dir = PathBuf::from(text);
        if !dir.is_absolute() {
            return Err(bad(format!("\"{text}\" is relative; PostgreSQL needs an absolute directory, e.g. \"/srv/pg-ts\"")));
        }
        if !dir.is_dir() {
            return Err(bad(format!("\"{text}\" is not an existing directory; create it first (a marked directory is made inside it)")));
        }
        dirs.push(dir);
    }
    Ok(dirs)
}

/// Gives `dir` to the owner of `data_dir` (the server's OS user), as PostgreSQL requires of a
/// tablespace's location.
fn give_to_server_user(dir: &Path, data_dir: &Path) -> BResult<()> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(data_dir)?;
    if std::fs::metadata(dir)?.uid() == owner.uid() {
        return Ok(());
    }
    std::os::unix::fs::chown(dir, Some(owner.uid()), Some(owner.gid())).map_err(|e| {
        BackendError::new(
            ErrorKind::Io,
            format!(
                "cannot give {} to the server's OS user (uid {}, owner of {}): {e}. PostgreSQL needs a tablespace directory \
                 owned by that user: run stowbench as root or as that user, or leave tablespaces = 0",
                dir.display(),
                owner.uid(),
                data_dir.display()
            ),
        )
    })
}

/// Removes `dir` if it exists and is empty; a non-empty one is an error naming it.
fn remove_empty_dir(dir: &Path) -> BResult<()> {
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(BackendError::new(ErrorKind::Io, format!("cannot remove {} (left as it is): {e}", dir.display()))),
        Ok(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(text: &str, ns: &Namespace) -> Result<Layout, String> {
        Layout::from_options(&Options::new("t", "", toml::from_str(text).unwrap()), ns, "case_1234", Some(Path::new("/")))
    }

    #[test]
    fn bad_values_name_the_option_and_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let ns = Namespace::create(&tmp.path().join("ns"), "run", "case").unwrap();
        for (text, option, fix) in [
            ("tablespaces = 100", "\"tablespaces\"", "0 to 64"),
            ("partitions = 5000", "\"partitions\"", "0 to 1024"),
            ("tablespaces = 4\npartitions = 2", "\"partitions\"", "at least 4"),
            ("tablespaces = 2\ntablespace_dir = \"relative/dir\"", "\"tablespace_dir\"", "absolute"),
            ("tablespaces = 2\ntablespace_dir = \"/no/such/dir/here\"", "\"tablespace_dir\"", "create it first"),
            ("tablespaces = 2\ntablespace_dir = []", "\"tablespace_dir\"", "at least one"),
            ("tablespaces = 2\ntablespace_dir = [\"/tmp\", 3]", "\"tablespace_dir\"", "is not a string"),
            ("tablespace_dir = \"/tmp\"", "\"tablespace_dir\"", "tablespaces = K"),
        ] {
            let err = layout(text, &ns).unwrap_err();
            assert!(err.contains(option) && err.contains(fix), "{text}: {err}");
        }
        let no_server_dir = Layout::from_options(&Options::new("t", "", toml::from_str("tablespaces = 1").unwrap()), &ns, "c", None);
        assert!(no_server_dir.unwrap_err().contains("this machine"));
    }

    #[test]
    fn partitions_go_round_robin_over_tablespaces_and_tablespaces_over_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let ns = Namespace::create(&tmp.path().join("ns"), "run", "case").unwrap();
        let text = format!("tablespaces = 3\npartitions = 6\ntablespace_dir = [{:?}, {:?}]", a.display().to_string(), b.display().to_string());
        let l = layout(&text, &ns).unwrap();
        let dirs: Vec<PathBuf> = l.dirs();
        let ours = |root: &Path, i: usize| root.join("stowbench-run-case").join(format!("ts-{i}"));
        assert_eq!(dirs, [ours(&a, 0), ours(&b, 1), ours(&a, 2)]);
        assert_eq!(l.tablespaces[2].name, "sb_case_1234_ts2");
        assert_eq!(l.partition_clause(), " PARTITION BY HASH (key)");
        let plain = layout("", &ns).unwrap();
        assert!(!plain.partitioned() && plain.dirs().is_empty());
        assert_eq!(layout("tablespaces = 2", &ns).unwrap().partitions, 2, "partitions default to tablespaces");
    }
}
