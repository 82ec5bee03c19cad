//! What a real server has to answer before a target can be trusted: whether the S3 bucket
//! exists (and is created when the job allows), which storage engines MariaDB offers; and that
//! a password with any character in it stays out of every output and report file.

use super::available;
use super::env;
use std::time::Duration;

/// A bucket name no one else uses, and the test's own S3 client for it. Dropping it deletes the
/// bucket, only if it exists and is empty (S3 refuses to delete a bucket holding objects): the
/// test made it, through stowbench, and removes nothing else.
struct FreshBucket {
    name: String,
    runtime: tokio::runtime::Runtime,
    store: object_store::aws::AmazonS3,
}

impl FreshBucket {
    fn new() -> FreshBucket {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("stowbench-test-{}-{nanos:09}", std::process::id());
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(env("STOWBENCH_S3_ENDPOINT"))
            .with_bucket_name(&name)
            .with_region(std::env::var("STOWBENCH_S3_REGION").unwrap_or_else(|_| "us-east-1".into()))
            .with_access_key_id(env("AWS_ACCESS_KEY_ID"))
            .with_secret_access_key(env("AWS_SECRET_ACCESS_KEY"))
            .with_allow_http(true)
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let bucket = FreshBucket { name, runtime, store };
        assert!(!bucket.exists(), "bucket {} already exists: not a fresh name", bucket.name);
        bucket
    }

    fn exists(&self) -> bool {
        use object_store::ObjectStore;
        self.runtime.block_on(self.store.list_with_delimiter(None)).is_ok()
    }

    /// A signed request on the bucket itself (`PUT` or `DELETE /bucket/`); its status.
    fn bucket_request(&self, method: object_store::signer::Method) -> u16 {
        use object_store::signer::Signer;
        self.runtime.block_on(async {
            let url = self.store.signed_url(method.clone(), &object_store::path::Path::from(""), Duration::from_secs(60)).await.unwrap();
            let request = reqwest::Client::new().request(reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap(), url.as_str());
            request.send().await.unwrap().status().as_u16()
        })
    }
}

impl Drop for FreshBucket {
    fn drop(&mut self) {
        if self.exists() {
            let status = self.bucket_request(object_store::signer::Method::DELETE);
            if status != 204 {
                eprintln!("the test's bucket {} was not deleted (status {status}): delete it by hand", self.name);
            }
        }
    }
}

fn s3_options(bucket: &str, more: &str) -> stowbench::backend::options::Options {
    super::options(&format!("bucket = \"{bucket}\"\n{more}"))
}

/// create_bucket = true (the default) never created a missing bucket: MinIO answers a listing of
/// one with 404 NoSuchBucket, which object_store reports as `Generic`, not `NotFound`.
#[test]
fn a_missing_bucket_is_created_by_default_and_explained_when_creating_is_off() {
    if !available("STOWBENCH_S3_ENDPOINT") {
        return;
    }
    let bucket = FreshBucket::new();
    let tmp = tempfile::tempdir().unwrap();
    let ns = stowbench::backend::Namespace::create(&tmp.path().join("ns"), &format!("bucket-{}", std::process::id()), "case").unwrap();
    let s3 = stowbench::backend::find("s3").unwrap();
    let refused = (s3.construct)(&s3_options(&bucket.name, "create_bucket = false"), &ns).err().expect("a missing bucket is refused");
    assert!(refused.contains(&format!("bucket \"{}\" does not exist; create it or set create_bucket = true", bucket.name)), "{refused}");
    assert!(!bucket.exists(), "create_bucket = false must not create it");
    let backend = (s3.construct)(&s3_options(&bucket.name, ""), &ns).unwrap_or_else(|e| panic!("create_bucket = true: {e}"));
    assert!(bucket.exists(), "the default creates the missing bucket");
    let mut session = backend.open_session(0).unwrap();
    super::put(&mut *session, "k", 1, 1000);
    drop(session);
    // Cleanup removes the case's objects; the bucket stays, as docs/backends/s3.md says (the
    // test removes it, empty, when it ends).
    backend.cleanup().unwrap();
    assert!(bucket.exists());
    assert_eq!(backend.server_objects().unwrap(), Vec::<String>::new());
}

/// An engine MariaDB does not offer ran, and failed the run with "Unknown storage engine".
#[test]
fn an_engine_the_server_does_not_offer_is_refused_by_validate() {
    if !available("STOWBENCH_MARIADB_URI") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = "version = 1\n[[target]]\nbackend = \"mariadb\"\nengine = \"NoSuchEngine\"\n\
               [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n";
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["validate", "job.toml"]).current_dir(dir.path()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("job.toml:4:1: target \"mariadb\": option \"engine\": \"NoSuchEngine\" is not a storage engine this server knows"), "{text}");
    assert!(text.contains("use one it offers: ") && text.contains("InnoDB"), "{text}");
}

/// A password with a space went into report.json whole (plan targets[].options_json.uri), though
/// stdout, stderr and the HTML page hid it.
#[test]
fn a_password_with_a_space_is_in_no_output_and_no_report_file() {
    if !available("STOWBENCH_PG_URI") {
        return;
    }
    const PASSWORD: &str = "canary 9d4e";
    let pg = super::inspect::pg_role_uri("stowbench_spaced", PASSWORD);
    assert!(pg.contains(PASSWORD), "STOWBENCH_PG_URI is postgres://postgres@...: {}", stowbench::backend::server::redact_uri(&pg));
    let dir = tempfile::tempdir().unwrap();
    let job = format!(
        "version = 1\n[[target]]\nbackend = \"postgres\"\nuri = \"{pg}\"\n\
         [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n"
    );
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["run", "job.toml", "--no-progress", "--out", "results"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let mut outputs = vec![("stdout".to_string(), String::from_utf8_lossy(&out.stdout).into_owned())];
    outputs.push(("stderr".into(), String::from_utf8_lossy(&out.stderr).into_owned()));
    let mut files = 0;
    for entry in walkdir(&dir.path().join("results")) {
        outputs.push((entry.display().to_string(), String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned()));
        files += 1;
    }
    assert!(files >= 2, "the run wrote its report files: {outputs:?}");
    assert_eq!(out.status.code(), Some(0), "{outputs:?}");
    for (name, text) in &outputs {
        assert!(!text.contains("canary"), "{name} holds the password:\n{text}");
    }
    let report = outputs.iter().find(|(name, _)| name.ends_with("report.json")).expect("report.json");
    assert!(report.1.contains("stowbench_spaced:<redacted>@"), "the report shows the URI, its password redacted");
}

/// Every file under `dir`, at any depth.
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        match entry.file_type().unwrap().is_dir() {
            true => files.extend(walkdir(&entry.path())),
            false => files.push(entry.path()),
        }
    }
    files
}
