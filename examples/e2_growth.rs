//! E2 growth curve, measured directly (until the core runner exists): N puts of S bytes into each
//! container backend and into `fs`, one thread, printing total time, the mean latency per tenth
//! of the run, the growth figure (mean of the last 10% of puts over the first 10%), and the final
//! allocated bytes.
//!
//! Run: `cargo run --release --example e2_growth -- [--dir DIR] [--count 1026] [--size 480000]
//!       [--backends cfb,zip,pack,fs,sqlite] [--option BACKEND.NAME=VALUE ...]`
//! Payload generation and read-back verification are outside the timed region.

use std::io::Cursor;
use std::path::PathBuf;
use std::time::Instant;
use stowbench::backend::options::Options;
use stowbench::backend::{find, Namespace};

struct Args {
    dir: PathBuf,
    count: usize,
    size: usize,
    backends: Vec<String>,
    options: Vec<(String, String, String)>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        dir: std::env::temp_dir(),
        count: 1026,
        size: 480_000,
        backends: ["cfb", "zip", "pack", "fs", "sqlite"].map(String::from).to_vec(),
        options: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(value),
            "--count" => args.count = value.parse().map_err(|e| format!("--count {value}: {e}"))?,
            "--size" => args.size = value.parse().map_err(|e| format!("--size {value}: {e}"))?,
            "--backends" => args.backends = value.split(',').map(String::from).collect(),
            "--option" => {
                let (target, assignment) = value.split_once('.').ok_or("--option wants BACKEND.NAME=VALUE")?;
                let (name, v) = assignment.split_once('=').ok_or("--option wants BACKEND.NAME=VALUE")?;
                args.options.push((target.to_string(), name.to_string(), v.to_string()));
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

fn payload(seed: u64, buf: &mut [u8]) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf.chunks_mut(8) {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let word = state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

fn mean_ms(latencies_ns: &[u64]) -> f64 {
    latencies_ns.iter().sum::<u64>() as f64 / latencies_ns.len().max(1) as f64 / 1e6
}

/// Runs the load against one backend; returns one printed line, or why it could not run.
fn run_one(args: &Args, name: &str) -> Result<String, String> {
    let kind = find(name)?;
    let dir = args.dir.join(format!("e2-growth-{name}-{}", std::process::id()));
    let ns = Namespace::create(&dir, "e2-growth", name)?;
    let outcome = measure(args, name, kind, &ns);
    // Remove the namespace whatever happened (it carries our marker; nothing else is touched).
    stowbench::backend::namespace::remove(&dir)?;
    outcome
}

/// Puts, verifies a sample, reports; the namespace `ns` is removed by the caller.
fn measure(args: &Args, name: &str, kind: &stowbench::backend::BackendKind, ns: &Namespace) -> Result<String, String> {
    let mut table = toml::Table::new();
    for (_, option, value) in args.options.iter().filter(|o| o.0 == name) {
        let parsed: toml::Value =
            toml::from_str::<toml::Table>(&format!("v = {value}")).map(|mut t| t.remove("v").expect("v")).unwrap_or(toml::Value::String(value.clone()));
        table.insert(option.clone(), parsed);
    }
    let backend = (kind.construct)(&Options::new(name, "e2_growth", table), ns)?;
    backend.prepare().map_err(|e| e.to_string())?;
    let mut session = backend.open_session(0).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; args.size];
    let mut latencies_ns = Vec::with_capacity(args.count);
    for i in 0..args.count {
        payload(i as u64, &mut buf);
        let key = format!("package-{i:05}");
        let started = Instant::now();
        session.put(&key, &mut Cursor::new(&buf), buf.len() as u64).map_err(|e| format!("put {key}: {e}"))?;
        latencies_ns.push(started.elapsed().as_nanos() as u64);
    }
    for i in (0..args.count).step_by((args.count / 10).max(1)) {
        payload(i as u64, &mut buf);
        let mut read = Vec::with_capacity(args.size);
        session.get(&format!("package-{i:05}"), &mut read).map_err(|e| e.to_string())?;
        if read != buf {
            return Err(format!("package-{i:05} read back wrong"));
        }
    }
    let wait_ns = session.wait_ns();
    drop(session);
    let usage = backend.disk_usage().map_err(|e| e.to_string())?;
    let tenth = (args.count / 10).max(1);
    let deciles: Vec<String> = latencies_ns.chunks(tenth).take(10).map(|c| format!("{:.2}", mean_ms(c))).collect();
    let growth = mean_ms(&latencies_ns[args.count - tenth..]) / mean_ms(&latencies_ns[..tenth]);
    let line = format!(
        "{name:<7} total {:>8.3} s  growth {:>5.2}x  first10% {:>7.3} ms  last10% {:>7.3} ms  allocated {:>11} B  lock wait {:>6.1} ms\n        mean ms per tenth: {}",
        latencies_ns.iter().sum::<u64>() as f64 / 1e9,
        growth,
        mean_ms(&latencies_ns[..tenth]),
        mean_ms(&latencies_ns[args.count - tenth..]),
        usage.allocated_bytes,
        wait_ns as f64 / 1e6,
        deciles.join(" "),
    );
    backend.cleanup().map_err(|e| e.to_string())?;
    Ok(line)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("e2_growth: {e}");
            std::process::exit(2);
        }
    };
    println!("E2 growth: {} puts of {} bytes, one thread, under {}", args.count, args.size, args.dir.display());
    for name in &args.backends {
        match run_one(&args, name) {
            Ok(line) => println!("{line}"),
            Err(e) => println!("{name:<7} skipped: {e}"),
        }
    }
}
