//! `kill -9` of stowbench in the middle of a put phase on every server backend (PostgreSQL
//! bytea, lo and file; MariaDB inline and file; S3; GridFS): the case's objects stay on the
//! server, and `stowbench cleanup` finds them through the record the case wrote in its namespace
//! directory. `--dry-run` lists them and changes nothing; the real cleanup removes exactly what the
//! dry run listed — every table, large object, S3 object, incomplete multipart upload and GridFS
//! collection of that run — and nothing else: foreign objects named like ours survive. The
//! record holds no secret, and without the URI's password in the environment cleanup keeps the
//! directory and exits 1.
//!
//! A second test kills at spread-out moments of the run (starting, connecting, preparing,
//! putting) and checks the report stays valid and cleanup leaves nothing of the run, whether or
//! not the kill came before the case made anything.
//!
//! The kill of the first test is timed by the second put phase's `before` command, which starts a background
//! `sleep 0.5; kill -9 $PPID`: the first put phase has written every key by then, and the second
//! (30 s of puts) is surely running when the kill lands, on any machine.

use super::inspect::{self, Server};
use object_store::multipart::MultipartStore;
use object_store::path::Path as ObjectPath;
use object_store::PutPayload;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Variant {
    backend: &'static str,
    options: &'static str,
    server: Server,
    size: &'static str,
    objects: u64,
}

const VARIANTS: &[Variant] = &[
    Variant { backend: "postgres", options: "mode = \"bytea\"", server: Server::Pg, size: "64KiB", objects: 40 },
    Variant { backend: "postgres", options: "mode = \"lo\"", server: Server::Pg, size: "64KiB", objects: 40 },
    Variant { backend: "postgres", options: "mode = \"file\"", server: Server::Pg, size: "64KiB", objects: 40 },
    Variant { backend: "postgres", options: "mode = \"bytea\"\ntablespaces = 2", server: Server::Pg, size: "64KiB", objects: 40 },
    Variant { backend: "mariadb", options: "mode = \"inline\"", server: Server::Maria, size: "64KiB", objects: 40 },
    Variant { backend: "mariadb", options: "mode = \"file\"", server: Server::Maria, size: "64KiB", objects: 40 },
    Variant { backend: "s3", options: "multipart_threshold = \"5MiB\"\npart_size = \"5MiB\"", server: Server::S3, size: "6MiB", objects: 6 },
    Variant { backend: "gridfs", options: "", server: Server::Mongo, size: "64KiB", objects: 20 },
];

/// A password the servers ignore (they trust loopback) given in the bytea variant's `uri` option:
/// it must never be stored or printed, and cleanup must get it from the environment.
const PASSWORD: &str = "not-stored-9f3a";

fn pg_uri_with_password() -> String {
    super::env("STOWBENCH_PG_URI").replacen("postgres@", &format!("postgres:{PASSWORD}@"), 1)
}

fn is_bytea(v: &Variant) -> bool {
    v.options == "mode = \"bytea\""
}

fn job(v: &Variant) -> String {
    let uri = if is_bytea(v) { format!("uri = \"{}\"\n", pg_uri_with_password()) } else { String::new() };
    format!(
        "version = 1\n[[target]]\nname = \"victim\"\nbackend = \"{}\"\n{}\n{uri}\
         [[workload]]\nname = \"w\"\nsizes = [\"{}\"]\nobjects = {n}\nthreads = [4]\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\ncount = {n}\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\nduration = \"30s\"\n\
         before = [\"sh\", \"-c\", \"(sleep 0.5; kill -9 $PPID) >/dev/null 2>&1 &\"]\n",
        v.backend,
        v.options,
        v.size,
        n = v.objects
    )
}

/// Runs stowbench in `dir`; `pg_uri` replaces STOWBENCH_PG_URI (None: unset) when given.
fn stowbench(dir: &Path, args: &[&str], pg_uri: Option<Option<String>>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
    command.args(args).current_dir(dir);
    match pg_uri {
        Some(Some(uri)) => command.env("STOWBENCH_PG_URI", uri),
        Some(None) => command.env_remove("STOWBENCH_PG_URI"),
        None => &mut command,
    };
    command.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The stdout lines starting with `prefix`, the prefix cut off, sorted.
fn lines(out: &Output, prefix: &str) -> Vec<String> {
    let mut l: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.strip_prefix(prefix)).map(str::to_string).collect();
    l.sort();
    l
}

/// The password in a URI's user-info (what must never be stored or printed).
fn password_of(uri: &str) -> Option<String> {
    let rest = &uri[uri.find("://")? + 3..];
    let userinfo = &rest[..rest.find('@')?];
    userinfo.split_once(':').map(|(_, p)| p.to_string()).filter(|p| !p.is_empty())
}

fn secrets() -> Vec<String> {
    let mut s: Vec<String> = ["STOWBENCH_PG_URI", "STOWBENCH_MARIADB_URI", "STOWBENCH_MONGO_URI"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .filter_map(|u| password_of(&u))
        .collect();
    s.extend(std::env::var("AWS_SECRET_ACCESS_KEY").ok().filter(|k| !k.is_empty()));
    s.push(PASSWORD.to_string());
    s
}

/// An incomplete multipart upload at `name` (a put cut short, made by the test itself so that one
/// exists whatever moment the kill hit).
fn start_upload(name: &str) -> String {
    let (rt, store) = inspect::s3();
    rt.block_on(store.create_multipart(&ObjectPath::from(name))).unwrap()
}

/// Whether the upload still takes parts (aborted ones do not).
fn upload_alive(name: &str, id: &str) -> bool {
    let (rt, store) = inspect::s3();
    rt.block_on(store.put_part(&ObjectPath::from(name), &id.to_string(), 0, PutPayload::from_static(b"x"))).is_ok()
}

fn abort_upload(name: &str, id: &str) {
    let (rt, store) = inspect::s3();
    let _ = rt.block_on(store.abort_multipart(&ObjectPath::from(name), &id.to_string()));
}

fn large_objects_of(table: &str) -> Vec<u32> {
    let mut c = postgres::Client::connect(&super::env("STOWBENCH_PG_URI"), postgres::NoTls).unwrap();
    c.query(&format!("SELECT loid FROM \"{table}\""), &[]).unwrap().iter().map(|r| r.get(0)).collect()
}

/// The table whose comment proves ownership (PostgreSQL bytea and MariaDB inline here).
fn commented_table(v: &Variant, owned: &str) -> Option<String> {
    match (v.backend, v.options) {
        ("postgres", "mode = \"bytea\"") => Some(format!("{owned}_bytea")),
        ("mariadb", "mode = \"inline\"") => Some(format!("{owned}_inline")),
        _ => None,
    }
}

/// Sets a table's comment; returns the one it had.
fn set_comment(server: Server, table: &str, comment: &str) -> String {
    use mysql::prelude::Queryable;
    match server {
        Server::Pg => {
            let mut c = postgres::Client::connect(&super::env("STOWBENCH_PG_URI"), postgres::NoTls).unwrap();
            let old: Option<String> = c.query_one(&format!("SELECT obj_description('\"{table}\"'::regclass, 'pg_class')"), &[]).unwrap().get(0);
            c.batch_execute(&format!("COMMENT ON TABLE \"{table}\" IS '{comment}'")).unwrap();
            old.unwrap_or_default()
        }
        _ => {
            let mut c = mysql::Conn::new(mysql::Opts::from_url(&super::env("STOWBENCH_MARIADB_URI")).unwrap()).unwrap();
            let sql = format!("SELECT table_comment FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '{table}'");
            let old: Option<String> = c.query_first(sql).unwrap();
            c.query_drop(format!("ALTER TABLE `{table}` COMMENT = '{comment}'")).unwrap();
            old.unwrap_or_default()
        }
    }
}

fn tablespaces_of(owned: &str) -> i64 {
    let mut c = postgres::Client::connect(&super::env("STOWBENCH_PG_URI"), postgres::NoTls).unwrap();
    c.query_one("SELECT count(*) FROM pg_tablespace WHERE spcname LIKE $1", &[&format!("sb_{owned}_ts%")]).unwrap().get(0)
}

/// Runs `stowbench cleanup` when a failed assertion ends the test early, so that the shared
/// servers do not keep the killed run's objects (the record goes with the temporary directory).
struct Guard {
    dir: PathBuf,
    pg_uri: Option<Option<String>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if std::thread::panicking() && self.dir.join("work").exists() {
            let _ = stowbench(&self.dir, &["cleanup", "work"], self.pg_uri.clone());
        }
    }
}

/// The killed run's case directory (holding the record).
fn case_dir(work: &Path) -> PathBuf {
    let run =
        std::fs::read_dir(work).unwrap().flatten().map(|e| e.path()).find(|p| p.file_name().unwrap().to_string_lossy().starts_with("stowbench-")).unwrap();
    run.join("case-0000")
}

fn kill_mid_put_then_clean_up(v: &Variant) {
    let what = format!("{} {}", v.backend, v.options.replace('\n', " "));
    let dir = tempfile::tempdir().unwrap();
    // The server's OS user must reach the tablespace directories inside (tempfile makes 0700).
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("job.toml"), job(v)).unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let run = stowbench(dir.path(), &["run", "job.toml", "--no-progress", "--work-dir", "work", "--out", "out"], None);
    // The bytea run was given its URI with a password: cleanup reads it from the environment.
    let env = is_bytea(v).then(|| Some(pg_uri_with_password()));
    let _guard = Guard { dir: dir.path().to_path_buf(), pg_uri: env.clone() };
    assert_eq!(run.status.signal(), Some(9), "{what}: killed mid-put: {}", text(&run));

    let case = case_dir(&dir.path().join("work"));
    let record_text = std::fs::read_to_string(case.join(stowbench::backend::record::RECORD_FILE)).unwrap_or_else(|e| panic!("{what}: record: {e}"));
    for secret in secrets() {
        assert!(!record_text.contains(&secret), "{what}: the record holds a secret: {record_text}");
    }
    let record: serde_json::Value = serde_json::from_str(&record_text).unwrap();
    let owned = record["owns"]["owned_name"].as_str().unwrap().to_string();
    assert!(!v.server.ours(&owned).is_empty(), "{what}: the killed run left objects on the server");
    let oids = match v.options.contains("\"lo\"") {
        true => large_objects_of(&format!("{owned}_lo")),
        false => Vec::new(),
    };
    assert_eq!(oids.is_empty(), !v.options.contains("\"lo\""), "{what}: large objects left: {oids:?}");
    let foreign = v.server.make_foreign(&owned);
    let uploads = match v.backend {
        "s3" => vec![
            (format!("{owned}/obj-0000000001"), start_upload(&format!("{owned}/obj-0000000001"))),
            (format!("{owned}_keep/x"), start_upload(&format!("{owned}_keep/x"))),
        ],
        _ => Vec::new(),
    };

    if is_bytea(v) {
        // Without the password (never stored) cleanup cannot connect: it says what to set,
        // keeps everything and exits 1.
        let out = stowbench(dir.path(), &["cleanup", "work"], Some(None));
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(&out));
        assert!(text(&out).contains("set $STOWBENCH_PG_URI to the full URI"), "{what}: {}", text(&out));
        assert!(case.join(stowbench::backend::record::RECORD_FILE).exists() && !v.server.ours(&owned).is_empty(), "{what}: kept");
        // What to do next is what was missing, not a server to wait for; the same when the
        // variable names another server.
        let elsewhere = pg_uri_with_password().replacen("@", "@elsewhere.invalid.", 1);
        for pg_uri in [None, Some(elsewhere)] {
            let out = stowbench(dir.path(), &["cleanup", "work"], Some(pg_uri));
            let advice = text(&out).lines().find(|l| l.contains("kept ")).unwrap_or_default().to_string();
            assert!(advice.contains("again once $STOWBENCH_PG_URI holds the full URI of postgres://"), "{what}: {}", text(&out));
            assert!(!text(&out).contains("answers"), "{what}: {}", text(&out));
        }
    }

    if let Some(table) = commented_table(v, &owned) {
        // A table with our name whose comment is not our ownership note is not ours: cleanup
        // lists nothing, removes nothing, and keeps the record.
        let note = set_comment(v.server, &table, "someone else");
        assert!(note.starts_with("stowbench run "), "{what}: our table carries its ownership note: {note:?}");
        let out = stowbench(dir.path(), &["cleanup", "work"], env.clone());
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(&out));
        assert!(text(&out).contains("is not this case's"), "{what}: {}", text(&out));
        // The server answered: what to do next is not to wait for it.
        assert!(text(&out).contains("again once the error above is fixed") && !text(&out).contains("answers"), "{what}: {}", text(&out));
        assert!(case.exists() && !v.server.ours(&owned).is_empty(), "{what}: a table not ours is left alone");
        set_comment(v.server, &table, &note);
    }

    // A server may still be finishing the dead client's last request (FerretDB removing an
    // overwritten file's chunks): list until two dry runs agree, then compare the real run to that.
    let mut dry = stowbench(dir.path(), &["cleanup", "--dry-run", "work"], env.clone());
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let again = stowbench(dir.path(), &["cleanup", "--dry-run", "work"], env.clone());
        let settled = lines(&again, "would remove ") == lines(&dry, "would remove ");
        dry = again;
        if settled {
            break;
        }
    }
    assert_eq!(dry.status.code(), Some(0), "{what}: {}", text(&dry));
    let listed = lines(&dry, "would remove ");
    let expected = match (v.backend, v.options) {
        ("postgres", o) if o.contains("tablespaces") => {
            vec![
                format!("postgres table \"{owned}_bytea\" ("),
                format!("postgres tablespace sb_{owned}_ts0 at "),
                format!("postgres tablespace sb_{owned}_ts1 at "),
            ]
        }
        ("postgres", o) if o.contains("\"lo\"") => {
            vec![format!("postgres table \"{owned}_lo\" ("), format!("postgres large objects of \"{owned}_lo\": {}", oids.len())]
        }
        ("postgres", o) => vec![format!("postgres table \"{owned}_{}\" (", o.split('"').nth(1).unwrap())],
        ("mariadb", o) => vec![format!("mariadb table `{owned}_{}` (", o.split('"').nth(1).unwrap())],
        ("s3", _) => vec![
            format!("s3 objects under s3://{}/{owned}/: ", super::env("STOWBENCH_S3_BUCKET")),
            format!("s3 incomplete multipart uploads under s3://{}/{owned}/: ", super::env("STOWBENCH_S3_BUCKET")),
        ],
        _ => vec![format!("gridfs collection stowbench.{owned}.files ("), format!("gridfs collection stowbench.{owned}.chunks (")],
    };
    for e in &expected {
        assert!(listed.iter().any(|l| l.starts_with(e.as_str())), "{what}: dry run lists {e:?}: {listed:#?}");
    }
    let run_dir = case.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
    assert!(listed.iter().any(|l| l.ends_with(&run_dir)), "{what}: and the run's directory: {listed:#?}");
    assert!(!v.server.ours(&owned).is_empty() && case.exists(), "{what}: a dry run changes nothing");
    assert!(uploads.iter().all(|(name, id)| upload_alive(name, id)), "{what}: a dry run aborts nothing");

    let real = stowbench(dir.path(), &["cleanup", "work"], env.clone());
    assert_eq!(real.status.code(), Some(0), "{what}: {}", text(&real));
    assert_eq!(lines(&real, "removed "), listed, "{what}: the cleanup removed exactly what the dry run listed");
    for secret in secrets() {
        assert!(!text(&dry).contains(&secret) && !text(&real).contains(&secret), "{what}: a secret was printed");
    }
    assert_eq!(v.server.ours(&owned), Vec::<String>::new(), "{what}: nothing of the run is left on the server");
    assert!(oids.iter().all(|oid| !inspect::pg_lo_exists(*oid)), "{what}: every large object of the run is gone");
    if v.backend == "postgres" {
        assert_eq!(tablespaces_of(&owned), 0, "{what}: every tablespace of the run is gone");
    }
    assert!(!dir.path().join("work").join(case.parent().unwrap().file_name().unwrap()).exists(), "{what}: the run's directory is gone");
    assert!(v.server.foreign_alive(&foreign), "{what}: cleanup touched objects it did not create: {foreign:?}");
    v.server.drop_foreign(&foreign);
    if let [(ours, our_id), (theirs, their_id)] = &uploads[..] {
        assert!(!upload_alive(ours, our_id), "{what}: the run's incomplete upload was aborted");
        assert!(upload_alive(theirs, their_id), "{what}: a foreign upload beside the prefix survives");
        abort_upload(theirs, their_id);
    }
}

#[test]
fn kill_9_of_stowbench_mid_put_then_cleanup_removes_that_runs_server_objects_and_nothing_else() {
    if !super::every_server_is_available() {
        return;
    }
    for v in VARIANTS {
        kill_mid_put_then_clean_up(v);
    }
}

/// The name the killed run's only case owns on a server, computed from the run's directory as
/// the runner does (so it is known even when the kill came before the record).
fn owned_name_of(run_dir: &Path) -> String {
    let run_id = run_dir.file_name().unwrap().to_string_lossy().strip_prefix("stowbench-").unwrap().to_string();
    let ns = stowbench::backend::Namespace::unheld(&run_id, &run_dir.join("case-0000"), "sb_case_0000");
    stowbench::backend::server::owned_name(&ns)
}

/// `kill -9` at spread-out moments of a server run (while it starts, connects, prepares, puts):
/// whatever the moment, the report file is valid and `stowbench cleanup` leaves nothing of the
/// run on the server — no table, large object, S3 object or GridFS collection.
#[test]
fn kill_9_at_any_point_of_a_server_run_then_cleanup_leaves_nothing_of_it() {
    if !super::every_server_is_available() {
        return;
    }
    let variants = [&VARIANTS[1], &VARIANTS[4], &VARIANTS[6], &VARIANTS[7]]; // pg lo, mariadb inline, s3, gridfs
    let mut with_leftovers = 0;
    for round in 0..8u64 {
        let v = variants[round as usize % variants.len()];
        let what = format!("round {round}: {} {}", v.backend, v.options.replace('\n', " "));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("job.toml"), job(v)).unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_stowbench"))
            .args(["run", "job.toml", "--no-progress", "--work-dir", "work", "--out", "out"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let _guard = Guard { dir: dir.path().to_path_buf(), pg_uri: None };
        std::thread::sleep(std::time::Duration::from_millis(round * 173 % 900));
        child.kill().unwrap();
        child.wait().unwrap();
        for run in std::fs::read_dir(dir.path().join("out")).into_iter().flatten().flatten() {
            if run.path().join("report.json").exists() {
                crate::common::assert_valid_report(&run.path().join("report.json"));
            }
        }
        let Some(run_dir) = std::fs::read_dir(dir.path().join("work")).into_iter().flatten().flatten().map(|e| e.path()).next() else {
            continue; // killed before the run made its directory: nothing anywhere
        };
        let owned = owned_name_of(&run_dir);
        with_leftovers += usize::from(!v.server.ours(&owned).is_empty());
        let oids = match v.backend {
            "postgres" if !v.server.ours(&owned).is_empty() => large_objects_of(&format!("{owned}_lo")),
            _ => Vec::new(),
        };
        let out = stowbench(dir.path(), &["cleanup", "work"], None);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out));
        assert_eq!(v.server.ours(&owned), Vec::<String>::new(), "{what}: nothing of the run is left: {}", text(&out));
        assert!(oids.iter().all(|oid| !inspect::pg_lo_exists(*oid)), "{what}: every large object of the run is gone");
        assert!(!run_dir.exists(), "{what}: {}", text(&out));
    }
    eprintln!("{with_leftovers} of 8 kills left objects on a server");
    assert!(with_leftovers >= 2, "most kills land after the case made its objects: {with_leftovers} of 8 did");
}
