//! Names the build in `stowbench --version` and in every report's `tool_version`: the package
//! version, and when built from a git checkout the commit checked out, marked "modified" when
//! tracked sources differed from it. Docs and bench records cite binaries by commit; a report
//! that said only "0.1.0" could not say which of hundreds of builds measured it.

use std::path::Path;
use std::process::Command;

/// What the binary is built from: a change to any of them re-runs this script, and makes the
/// build "modified" when it differs from the commit.
const SOURCES: [&str; 4] = ["src", "Cargo.toml", "Cargo.lock", "build.rs"];

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    out.status.success().then(|| text.trim().to_string())
}

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    // Sources first: a changed source file re-runs this script, so "modified" follows the tree.
    for path in SOURCES {
        println!("cargo:rerun-if-changed={path}");
    }
    let described = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) if !commit.is_empty() => {
            // A commit or checkout moves HEAD, the branch's ref or packed-refs, and the index.
            let head_ref = git(&["symbolic-ref", "-q", "HEAD"]);
            let watched = ["HEAD", "index", "packed-refs"].into_iter().map(str::to_string).chain(head_ref);
            for name in watched {
                if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
                    if Path::new(&path).exists() {
                        println!("cargo:rerun-if-changed={path}");
                    }
                }
            }
            // No optional locks: status must not rewrite the index (which would run this again).
            let status = ["--no-optional-locks", "status", "--porcelain", "--untracked-files=no", "--"];
            let modified = git(&[&status[..], &SOURCES[..]].concat()).is_some_and(|s| !s.is_empty());
            format!("{version} (commit {commit}{})", if modified { ", modified" } else { "" })
        }
        // Not a git checkout (a source archive), or no git: the package version alone.
        _ => version.to_string(),
    };
    println!("cargo:rustc-env=STOWBENCH_BUILD={described}");
}
