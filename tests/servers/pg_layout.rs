//! PostgreSQL's E4 options on the real server: partitions in the tablespaces they are assigned
//! to (with their indexes and TOAST tables), tablespace directories pinned against stowbench's
//! own cleanup while the server uses them, cleanup dropping exactly our tablespaces, and lock
//! waits seen by the wait sampler.

use super::{available, env, fixture_in, put};
use std::path::Path;
use std::time::{Duration, Instant};

fn pg() -> postgres::Client {
    postgres::Client::connect(&env("STOWBENCH_PG_URI"), postgres::NoTls).expect("test connects to PostgreSQL")
}

/// A temporary directory the server's OS user can reach (tempfile makes them 0700).
fn reachable_tempdir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    tmp
}

/// Our tablespaces' names (exactly ours: `sb_<owned>_ts<digits>`).
fn our_tablespaces(owned: &str) -> Vec<String> {
    let rows = pg().query("SELECT spcname::text FROM pg_tablespace ORDER BY 1", &[]).unwrap();
    let prefix = format!("sb_{owned}_ts");
    rows.iter().map(|r| r.get::<_, String>(0)).filter(|n| n.strip_prefix(&prefix).is_some_and(|i| i.parse::<u32>().is_ok())).collect()
}

/// A tablespace the test owns in `dir` (made like the backend makes its own), named like ours.
fn plant_foreign_tablespace(name: &str, dir: &Path) {
    std::fs::create_dir(dir).unwrap();
    let owner = std::fs::metadata(env("STOWBENCH_PG_DATA")).unwrap();
    use std::os::unix::fs::MetadataExt;
    std::os::unix::fs::chown(dir, Some(owner.uid()), Some(owner.gid())).unwrap();
    pg().batch_execute(&format!("CREATE TABLESPACE {name} LOCATION '{}'", dir.display())).unwrap();
}

#[test]
fn partitions_indexes_and_toast_live_in_their_tablespaces_and_cleanup_drops_only_ours() {
    if !available("STOWBENCH_PG_URI") {
        return;
    }
    let roots = reachable_tempdir();
    let (a, b) = (roots.path().join("array-a"), roots.path().join("array-b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let options = format!("tablespaces = 2\npartitions = 4\ntablespace_dir = [{:?}, {:?}]", a.to_str().unwrap(), b.to_str().unwrap());
    let f = fixture_in("postgres", &options, roots.path());
    let owned = f.owned();
    let foreign = format!("sb_{owned}_ts_keep");
    plant_foreign_tablespace(&foreign, &roots.path().join("foreign"));
    let mut s = f.session(0);
    for i in 0..40 {
        put(&mut *s, &format!("row-{i}"), i, 8192);
    }
    drop(s);
    // Partition j, its primary-key index and its TOAST table: all in tablespace j mod 2.
    let placed = pg()
        .query(
            "SELECT c.relname::text, t.spcname::text, (SELECT count(*) FROM pg_class x WHERE x.oid = c.reltoastrelid AND x.reltablespace = c.reltablespace) \
             FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace WHERE c.relname LIKE $1 || '%' ORDER BY 1",
            &[&owned],
        )
        .unwrap();
    let placed: Vec<(String, String, i64)> = placed.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    let expected: Vec<(String, String, i64)> = (0..4)
        .flat_map(|j| {
            let ts = format!("sb_{owned}_ts{}", j % 2);
            [(format!("{owned}_bytea_p{j}"), ts.clone(), 1), (format!("{owned}_bytea_p{j}_pkey"), ts, 0)]
        })
        .collect();
    assert_eq!(placed, expected, "each partition (with its TOAST table) and its index in its tablespace");
    let per_partition = pg().query(&format!("SELECT count(*) FROM \"{owned}_bytea\" GROUP BY tableoid"), &[]).unwrap();
    assert_eq!(per_partition.len(), 4, "rows in every partition");
    let usage = f.backend.disk_usage().unwrap();
    assert!(usage.allocated_bytes >= 40 * 8192, "the tablespaces' files are counted: {usage:?}");
    assert!(usage.server_reported_bytes.unwrap_or(0) >= 40 * 8192, "the partitions' sizes are counted: {usage:?}");
    let info = f.backend.describe();
    assert!(info.data_paths[0].starts_with(&a) && info.data_paths[1].starts_with(&b), "{:?}", info.data_paths);
    // While the server uses them, stowbench's own cleanup refuses to delete the directories.
    let marked = a.join(format!("stowbench-{}-case", f.ns.run_id));
    let refused = stowbench::backend::namespace::remove(&marked).unwrap_err();
    assert!(refused.contains("DROP TABLESPACE"), "{refused}");
    f.backend.cleanup().expect("cleanup");
    assert_eq!(our_tablespaces(&owned), Vec::<String>::new(), "cleanup left tablespaces behind");
    assert_eq!(std::fs::read_dir(&a).unwrap().count() + std::fs::read_dir(&b).unwrap().count(), 0, "cleanup left directories behind");
    f.backend.cleanup().expect("a second cleanup is harmless");
    let kept = pg().query("SELECT 1 FROM pg_tablespace WHERE spcname = $1", &[&foreign]).unwrap();
    assert_eq!(kept.len(), 1, "cleanup dropped a tablespace it did not make");
    pg().batch_execute(&format!("DROP TABLESPACE {foreign}")).unwrap();
}

/// A put that waits for a table lock is credited with sampled wait; no test timing involved: the
/// lock is held until the server shows the put waiting and a whole sample has run since.
#[test]
fn the_wait_sampler_sees_a_put_waiting_for_a_lock() {
    if !available("STOWBENCH_PG_URI") {
        return;
    }
    let roots = reachable_tempdir();
    let f = fixture_in("postgres", "wait_sample = \"1ms\"", roots.path());
    let mut s = f.session(0);
    put(&mut *s, "warm", 1, 10);
    let mut holder = pg();
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute(&format!("LOCK TABLE \"{}_bytea\" IN ACCESS EXCLUSIVE MODE", f.owned())).unwrap();
    let waiter = std::thread::spawn(move || {
        put(&mut *s, "blocked", 2, 10);
        s
    });
    let mut watch = pg();
    let deadline = Instant::now() + Duration::from_secs(120);
    let seen_at = loop {
        // Our put's backend, waiting for the lock on our table (other tests run beside this one).
        let waiting = "SELECT now()::text FROM pg_stat_activity WHERE application_name = 'stowbench' AND wait_event_type = 'Lock' \
                       AND wait_event = 'relation' AND query LIKE '%' || $1 || '%'";
        if let Some(row) = watch.query(waiting, &[&f.owned()]).unwrap().first() {
            break row.get::<_, String>(0);
        }
        assert!(Instant::now() < deadline, "the put never waited for the lock");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Every sampler connected before then (ours among them; other tests may run theirs) has
    // finished a sample that started after the put was seen waiting.
    let behind = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%wait_event_type IN%' AND application_name = 'stowbench' \
                  AND backend_start < $1::text::timestamptz AND NOT (state = 'idle' AND query_start > $1::text::timestamptz)";
    while watch.query_one(behind, &[&seen_at]).unwrap().get::<_, i64>(0) > 0 {
        assert!(Instant::now() < deadline, "the sampler never sampled");
        std::thread::sleep(Duration::from_millis(5));
    }
    tx.commit().unwrap();
    let s = waiter.join().unwrap();
    assert!(s.wait_ns() >= 1_000_000, "at least one 1 ms sample saw the put waiting: {} ns", s.wait_ns());
    assert_eq!(s.wait_ns() % 1_000_000, 0, "credited in whole sampling intervals");
}
