//! Server URIs and server options that cannot work, refused by `stowbench validate` (and
//! `backends --uri`) as bad input before any server is asked: exit 2, the file, line and option,
//! and the fix; never a panic, never a secret. None of these needs a server: the URI is read
//! before anything connects (the checks that need one are in tests/servers/uri_checks.rs).

use std::path::Path;
use std::process::{Command, Output};

fn stowbench(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
    // No service variable of the caller's may answer for the targets here.
    for name in ["STOWBENCH_PG_URI", "STOWBENCH_MARIADB_URI", "STOWBENCH_S3_ENDPOINT", "STOWBENCH_MONGO_URI"] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied()).args(args).current_dir(dir).output().expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A job with one target of `backend` whose option lines start at line 4.
fn job(backend: &str, options: &str) -> String {
    format!("version = 1\n[[target]]\nbackend = \"{backend}\"\n{options}\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n")
}

/// `stowbench validate` of `job`: its exit code and everything it printed.
fn validate(dir: &Path, env: &[(&str, &str)], job: &str) -> (Option<i32>, String) {
    std::fs::write(dir.join("job.toml"), job).unwrap();
    let out = stowbench(dir, env, &["validate", "job.toml"]);
    (out.status.code(), text(&out))
}

fn assert_refused(code: Option<i32>, said: &str, located: &str, fix: &str) {
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains(located) && said.contains(fix), "expected {located:?} and {fix:?} in:\n{said}");
    assert!(!said.contains("panicked") && !said.contains("did not answer"), "{said}");
}

/// They panicked inside object_store ("thread 'stowbench-connect' panicked") and were then
/// reported as a server that did not answer, exit 3.
#[test]
fn malformed_s3_endpoints_are_refused_before_object_store_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let keys = [("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "secretkeyvalue")];
    let cases = [
        ("http://127.0.0.1:99999", "its port \"99999\" is not a port number from 1 to 65535"),
        ("http://127.0.0.1:0", "is not a port number from 1 to 65535"),
        ("http://[::1", "its IPv6 host cannot be read"),
        ("http://:20479", "it names no host"),
        ("http://127.0.0.1:20479 x", "it holds a space"),
        ("http://127.0.0.1:20479/?x=1", "query"),
        ("http://user:pw@127.0.0.1:1", "it holds user info"),
    ];
    for (uri, why) in cases {
        let (code, said) = validate(dir.path(), &keys, &job("s3", &format!("uri = \"{uri}\"")));
        assert_refused(code, &said, "job.toml:4:1: target \"s3\": option \"uri\": ", why);
        assert!(said.contains("is not a usable URI") && said.contains("give http://HOST:PORT"), "{said}");
        let out = stowbench(dir.path(), &keys, &["backends", "s3", "--uri", uri]);
        assert_eq!(out.status.code(), Some(2), "{uri}: {}", text(&out));
        assert!(text(&out).contains("server: INVALID URI ") && text(&out).contains(why), "{}", text(&out));
        assert!(!text(&out).contains("panicked"), "{}", text(&out));
    }
    // User info is refused with its password hidden.
    let (_, said) = validate(dir.path(), &keys, &job("s3", "uri = \"http://user:hunter2secret@127.0.0.1:1\""));
    assert!(!said.contains("hunter2secret") && said.contains("http://user:<redacted>@127.0.0.1:1"), "{said}");
}

/// Each ran: the bucket or database was refused by the server at the first request of the run.
#[test]
fn empty_bucket_and_database_names_are_refused_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let keys = [("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "secretkeyvalue")];
    let (code, said) = validate(dir.path(), &keys, &job("s3", "uri = \"http://127.0.0.1:1\"\nbucket = \"\""));
    assert_refused(code, &said, "job.toml:5:1: target \"s3\": option \"bucket\": is empty", "name the bucket");
    for (database, why) in [("", "is empty"), ("a/b", "holds '/'"), ("a.b", "holds '.'")] {
        let (code, said) =
            validate(dir.path(), &[], &job("gridfs", &format!("uri = \"mongodb://127.0.0.1:1/\"\ndatabase = \"{database}\"\nconnect_timeout = \"1s\"")));
        assert_refused(code, &said, "job.toml:5:1: target \"gridfs\": option \"database\": ", why);
    }
}

/// The password was printed verbatim: "target "postgres": hunter2secret (env BADURI) is not a
/// usable URI".
#[test]
fn a_uri_variable_that_holds_no_uri_is_named_and_its_value_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    for backend in ["postgres", "mariadb"] {
        let (code, said) = validate(dir.path(), &[("BADURI", "hunter2secret")], &job(backend, "uri_env = \"BADURI\""));
        let located = format!("job.toml:4:1: target \"{backend}\": option \"uri_env\": ");
        assert_refused(code, &said, &located, "env BADURI is not a usable URI");
        assert!(!said.contains("hunter2secret"), "{said}");
    }
}

/// The driver read the host as "ter2@127.0.0.1" and said "failed to lookup address information".
#[test]
fn a_password_with_an_unencoded_at_sign_is_refused_with_the_encoding() {
    let dir = tempfile::tempdir().unwrap();
    for (backend, uri) in [
        ("postgres", "postgres://postgres:hun@ter2word@127.0.0.1:1/db"),
        ("mariadb", "mysql://root:hun@ter2word@127.0.0.1:1/db"),
        ("gridfs", "mongodb://root:hun@ter2word@127.0.0.1:1/db"),
    ] {
        let (code, said) = validate(dir.path(), &[], &job(backend, &format!("uri = \"{uri}\"")));
        assert_refused(code, &said, &format!("job.toml:4:1: target \"{backend}\": option \"uri\": "), "write an @ inside the user name or password as %40");
        assert!(!said.contains("ter2word") && !said.contains("lookup"), "{said}");
    }
}

/// A port that is no port: postgres said "invalid value for option `port`", mariadb "URL
/// ParseError { invalid port number }", and port 0 was tried and reported as a server that did
/// not answer (exit 3).
#[test]
fn a_port_out_of_range_is_refused_by_every_server_backend_alike() {
    let dir = tempfile::tempdir().unwrap();
    for (backend, uri, port) in [
        ("postgres", "postgres://postgres:pw@127.0.0.1:99999/db", "99999"),
        ("postgres", "postgres://postgres@127.0.0.1:0/db", "0"),
        ("mariadb", "mysql://root:pw@127.0.0.1:abc/db", "abc"),
        ("mariadb", "mysql://root@127.0.0.1:0/db", "0"),
        ("gridfs", "mongodb://127.0.0.1:65536/", "65536"),
    ] {
        let (code, said) = validate(dir.path(), &[], &job(backend, &format!("uri = \"{uri}\"")));
        let why = format!("is not a usable URI: its port \"{port}\" is not a port number from 1 to 65535");
        assert_refused(code, &said, &format!("job.toml:4:1: target \"{backend}\": option \"uri\": "), &why);
    }
}
