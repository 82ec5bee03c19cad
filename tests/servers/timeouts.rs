//! `statement_timeout` on the real servers: a statement that outlives it fails as a time-out (the
//! kind the workload's retries retry), and the session goes on working after it. No test timing:
//! another connection holds a lock on our table for as long as the put runs, so the put can only
//! end by the server cancelling it.

use super::{available, env, fixture, put};
use stowbench::backend::ErrorKind;

fn blocked_put_fails_as_a_timeout(s: &mut dyn stowbench::backend::Session) {
    let err = s.put("blocked", &mut crate::common::PayloadReader::new(2, 10), 10).expect_err("the put waits for the lock until the server cancels it");
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
}

#[test]
fn a_postgres_statement_outliving_statement_timeout_fails_as_a_timeout() {
    if !available("STOWBENCH_PG_URI") {
        return;
    }
    let f = fixture("postgres", "statement_timeout = \"1s\"");
    let mut s = f.session(0);
    put(&mut *s, "before", 1, 10);
    let mut holder = postgres::Client::connect(&env("STOWBENCH_PG_URI"), postgres::NoTls).expect("test connects to PostgreSQL");
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute(&format!("LOCK TABLE \"{}_bytea\" IN ACCESS EXCLUSIVE MODE", f.owned())).unwrap();
    blocked_put_fails_as_a_timeout(&mut *s);
    tx.rollback().unwrap();
    put(&mut *s, "after", 3, 10);
}

#[test]
fn a_mariadb_statement_outliving_statement_timeout_fails_as_a_timeout() {
    if !available("STOWBENCH_MARIADB_URI") {
        return;
    }
    use mysql::prelude::Queryable;
    let f = fixture("mariadb", "statement_timeout = \"1s\"");
    let mut s = f.session(0);
    put(&mut *s, "before", 1, 10);
    let mut holder = mysql::Conn::new(mysql::Opts::from_url(&env("STOWBENCH_MARIADB_URI")).unwrap()).expect("test connects to MariaDB");
    holder.query_drop(format!("LOCK TABLES `{}_inline` WRITE", f.owned())).unwrap();
    blocked_put_fails_as_a_timeout(&mut *s);
    holder.query_drop("UNLOCK TABLES").unwrap();
    put(&mut *s, "after", 3, 10);
}

/// Gives `first` bytes, then sleeps `pause` once, then the rest: an upload that outlives its
/// deadline however fast the machine is.
struct PausingBody {
    inner: crate::common::PayloadReader,
    first: u64,
    given: u64,
    pause: std::time::Duration,
}

impl std::io::Read for PausingBody {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.given == self.first {
            std::thread::sleep(self.pause);
        }
        let room = if self.given < self.first { (self.first - self.given) as usize } else { buf.len() };
        let take = buf.len().min(room);
        let n = self.inner.read(&mut buf[..take])?;
        self.given += n as u64;
        Ok(n)
    }
}

/// Sleeps `pause` on its first write: a download that outlives its deadline.
struct PausingSink {
    pause: Option<std::time::Duration>,
}

impl std::io::Write for PausingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(pause) = self.pause.take() {
            std::thread::sleep(pause);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_gridfs_operation_outliving_operation_timeout_fails_as_a_timeout_and_leaves_no_chunks() {
    if !available("STOWBENCH_MONGO_URI") {
        return;
    }
    // The deadline must hold every plain operation here (a put of "stored", a head, a get) on a
    // loaded CI machine: at 200 ms the first put of "stored" once timed out on FerretDB. The
    // pauses are twice the deadline, so the two slow operations still outlive it.
    let f = fixture("gridfs", "operation_timeout = \"2s\"\nchunk_size = \"1KiB\"");
    let mut s = f.session(0);
    put(&mut *s, "stored", 1, 10_240);
    let pause = std::time::Duration::from_secs(4);
    let mut body = PausingBody { inner: crate::common::PayloadReader::new(2, 10_240), first: 4096, given: 0, pause };
    let err = s.put("slow", &mut body, 10_240).expect_err("the upload outlived its deadline");
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert_eq!(s.head("slow").map_err(|e| e.kind), Err(ErrorKind::NotFound), "a timed-out upload leaves no file");
    let chunks = mongodb::sync::Client::with_uri_str(env("STOWBENCH_MONGO_URI"))
        .unwrap()
        .database("stowbench")
        .collection::<mongodb::bson::Document>(&format!("{}.chunks", f.owned()))
        .count_documents(mongodb::bson::doc! {})
        .run()
        .unwrap();
    assert_eq!(chunks, 10, "only the stored file's 10 chunks: the timed-out upload's were removed");
    let err = s.get("stored", &mut PausingSink { pause: Some(pause) }).expect_err("the download outlived its deadline");
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert_eq!(s.get("stored", &mut PausingSink { pause: None }).unwrap(), 10_240, "the session works after a time-out");
}
