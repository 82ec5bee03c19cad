//! Looks at the servers directly (with the same client crates, never through stowbench) to see
//! what a backend left behind, and plants "foreign" objects that cleanup must not touch: some
//! share our name as a prefix, so a cleanup that matched by prefix instead of by ownership fails.

use futures_util::StreamExt;
use mongodb::bson::doc;
use mysql::prelude::Queryable;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// A server the tests can inspect.
#[derive(Debug, Clone, Copy)]
pub enum Server {
    Pg,
    Maria,
    S3,
    Mongo,
}

/// The names of planted foreign objects (all contain "keep", which no backend ever writes).
pub type Foreign = Vec<String>;

pub fn pg() -> postgres::Client {
    postgres::Client::connect(&super::env("STOWBENCH_PG_URI"), postgres::NoTls).expect("test connects to PostgreSQL")
}

pub fn maria() -> mysql::Conn {
    mysql::Conn::new(mysql::Opts::from_url(&super::env("STOWBENCH_MARIADB_URI")).unwrap()).expect("test connects to MariaDB")
}

pub fn mongo() -> mongodb::sync::Database {
    mongodb::sync::Client::with_uri_str(super::env("STOWBENCH_MONGO_URI")).expect("test connects to the MongoDB wire protocol").database("stowbench")
}

/// A direct S3 client and a runtime to drive it.
pub fn s3() -> (tokio::runtime::Runtime, object_store::aws::AmazonS3) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(super::env("STOWBENCH_S3_ENDPOINT"))
        .with_bucket_name(super::env("STOWBENCH_S3_BUCKET"))
        .with_region(super::env("STOWBENCH_S3_REGION"))
        .with_access_key_id(super::env("AWS_ACCESS_KEY_ID"))
        .with_secret_access_key(super::env("AWS_SECRET_ACCESS_KEY"))
        .with_allow_http(true)
        .build()
        .unwrap();
    (tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(), store)
}

fn s3_names(prefix: &str) -> Vec<String> {
    let (rt, store) = s3();
    rt.block_on(async {
        let mut names = Vec::new();
        let mut list = store.list(None);
        while let Some(meta) = list.next().await {
            let name = meta.unwrap().location.to_string();
            if name.starts_with(prefix) {
                names.push(name);
            }
        }
        names
    })
}

impl Server {
    /// The environment variable that says the service runs.
    pub fn env(self) -> &'static str {
        match self {
            Server::Pg => "STOWBENCH_PG_URI",
            Server::Maria => "STOWBENCH_MARIADB_URI",
            Server::S3 => "STOWBENCH_S3_ENDPOINT",
            Server::Mongo => "STOWBENCH_MONGO_URI",
        }
    }

    /// Server-side objects named after `owned` that are not planted foreign ones.
    pub fn ours(self, owned: &str) -> Vec<String> {
        let mut names = match self {
            Server::Pg => pg().query("SELECT relname::text FROM pg_class", &[]).unwrap().iter().map(|r| r.get::<_, String>(0)).collect(),
            Server::Maria => maria().query::<String, _>("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()").unwrap(),
            Server::S3 => s3_names(owned),
            Server::Mongo => mongo().list_collection_names().run().unwrap(),
        };
        names.retain(|n| n.starts_with(owned) && !n.contains("keep"));
        names
    }

    /// Plants objects that are not ours: some share our prefix.
    pub fn make_foreign(self, owned: &str) -> Foreign {
        match self {
            Server::Pg => {
                let names = vec![format!("{owned}_objects_keep"), format!("keep_{owned}")];
                let mut c = pg();
                for n in &names {
                    c.batch_execute(&format!(
                        "CREATE TABLE \"{n}\" (key bytea PRIMARY KEY, loid oid); INSERT INTO \"{n}\" VALUES ('\\x6b', lo_from_bytea(0, 'keep'))"
                    ))
                    .unwrap();
                }
                names
            }
            Server::Maria => {
                let names = vec![format!("{owned}_objects_keep"), format!("keep_{owned}")];
                let mut c = maria();
                for n in &names {
                    c.query_drop(format!("CREATE TABLE `{n}` (k VARBINARY(10) PRIMARY KEY)")).unwrap();
                    c.query_drop(format!("INSERT INTO `{n}` VALUES ('k')")).unwrap();
                }
                names
            }
            Server::S3 => {
                let names = vec![format!("{owned}_keep/x"), format!("{owned}keep"), format!("keep/{owned}/x")];
                let (rt, store) = s3();
                for n in &names {
                    rt.block_on(store.put(&ObjectPath::from(n.as_str()), PutPayload::from_static(b"keep"))).unwrap();
                }
                names
            }
            Server::Mongo => {
                let db = mongo();
                let bucket = db.gridfs_bucket(mongodb::options::GridFsBucketOptions::builder().bucket_name(format!("{owned}_keep")).build());
                let mut up = bucket.open_upload_stream("c/1").run().unwrap();
                std::io::Write::write_all(&mut up, b"keep").unwrap();
                up.close().unwrap();
                vec![format!("{owned}_keep.files"), format!("{owned}_keep.chunks")]
            }
        }
    }

    /// Whether every planted object is still there, with its content.
    pub fn foreign_alive(self, foreign: &Foreign) -> bool {
        foreign.iter().all(|n| match self {
            Server::Pg => {
                let row = pg().query_opt(&format!("SELECT lo_get(loid) FROM \"{n}\""), &[]);
                matches!(row, Ok(Some(r)) if r.get::<_, Vec<u8>>(0) == b"keep")
            }
            Server::Maria => maria().query_first::<String, _>(format!("SELECT k FROM `{n}`")).ok().flatten().as_deref() == Some("k"),
            Server::S3 => {
                let (rt, store) = s3();
                rt.block_on(async {
                    match store.get(&ObjectPath::from(n.as_str())).await {
                        Ok(g) => g.bytes().await.is_ok_and(|b| &b[..] == b"keep"),
                        Err(_) => false,
                    }
                })
            }
            Server::Mongo => mongo().collection::<mongodb::bson::Document>(n).count_documents(doc! {}).run().unwrap_or(0) > 0,
        })
    }

    /// Removes the planted objects.
    pub fn drop_foreign(self, foreign: &Foreign) {
        for n in foreign {
            match self {
                Server::Pg => pg().batch_execute(&format!("SELECT lo_unlink(loid) FROM \"{n}\"; DROP TABLE \"{n}\"")).unwrap(),
                Server::Maria => maria().query_drop(format!("DROP TABLE `{n}`")).unwrap(),
                Server::S3 => {
                    let (rt, store) = s3();
                    rt.block_on(store.delete(&ObjectPath::from(n.as_str()))).unwrap();
                }
                Server::Mongo => mongo().collection::<mongodb::bson::Document>(n).drop().run().unwrap(),
            }
        }
    }
}

/// Whether large object `oid` exists.
pub fn pg_lo_exists(oid: u32) -> bool {
    pg().query_one("SELECT count(*) FROM pg_largeobject_metadata WHERE oid = $1", &[&oid]).unwrap().get::<_, i64>(0) == 1
}

/// The large object that `table` holds for `key`.
pub fn pg_loid(table: &str, key: &str) -> u32 {
    pg().query_one(&format!("SELECT loid FROM \"{table}\" WHERE key = $1"), &[&key.as_bytes()]).unwrap().get(0)
}

/// Runs SQL on PostgreSQL as the test's own connection.
pub fn pg_exec(sql: &str) {
    pg().batch_execute(sql).unwrap()
}

/// `STOWBENCH_PG_URI` as login role `role` with `password`, made on first use (kept after: the
/// server is the test run's own) with rights on the stowbench database.
pub fn pg_role_uri(role: &str, password: &str) -> String {
    pg_exec(&format!(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN \
         CREATE ROLE {role} LOGIN PASSWORD '{password}'; END IF; END $$; GRANT ALL ON DATABASE stowbench TO {role}; \
         GRANT ALL ON SCHEMA public TO {role}"
    ));
    super::env("STOWBENCH_PG_URI").replacen("postgres://postgres@", &format!("postgres://{role}:{password}@"), 1)
}
