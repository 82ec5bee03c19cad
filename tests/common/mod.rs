//! Shared test tools: deterministic payloads that stream without being stored, and a sink that
//! verifies what a get writes against the payload it should be, holding only one small buffer.
//!
//! A payload is a pure function of (seed, offset): its first 8 bytes are the seed itself (so a
//! value read back names the put that wrote it), every later 8-byte word is a splitmix64 mix of
//! seed and word index. It is never all zeros, so truncation, misordering or a mix of two values
//! shows up at the first wrong byte.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::io::{Read, Write};

/// The 8-byte word at `index` of payload `seed`.
fn word(seed: u64, index: u64) -> u64 {
    if index == 0 {
        return seed;
    }
    // splitmix64: a bijective mix, so distinct (seed, index) pairs give unrelated words.
    let mut z = seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `buf` with payload `seed` from byte `offset` on.
pub fn fill(seed: u64, offset: u64, buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let at = offset + done as u64;
        let bytes = word(seed, at / 8).to_le_bytes();
        let skip = (at % 8) as usize;
        let n = (8 - skip).min(buf.len() - done);
        buf[done..done + n].copy_from_slice(&bytes[skip..skip + n]);
        done += n;
    }
}

/// The whole payload in memory (only for small values).
pub fn bytes(seed: u64, len: u64) -> Vec<u8> {
    let mut v = vec![0u8; len as usize];
    fill(seed, 0, &mut v);
    v
}

/// Streams `len` bytes of payload `seed`; counts what was read.
pub struct PayloadReader {
    /// Payload seed.
    pub seed: u64,
    /// Total length in bytes.
    pub len: u64,
    /// Bytes handed out so far.
    pub pos: u64,
}

impl PayloadReader {
    /// A reader of payload `seed`, `len` bytes long.
    pub fn new(seed: u64, len: u64) -> Self {
        PayloadReader { seed, len, pos: 0 }
    }
}

impl Read for PayloadReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.len - self.pos).min(buf.len() as u64) as usize;
        fill(self.seed, self.pos, &mut buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

/// Checks bytes written to it against payload `seed` without storing them.
pub struct VerifyingSink {
    seed: u64,
    /// Bytes received so far.
    pub received: u64,
    /// Offset of the first wrong byte, if any.
    pub first_mismatch: Option<u64>,
    expected: Vec<u8>,
}

impl VerifyingSink {
    /// A sink expecting payload `seed`.
    pub fn new(seed: u64) -> Self {
        VerifyingSink { seed, received: 0, first_mismatch: None, expected: vec![0; 64 * 1024] }
    }

    /// Ok when exactly `len` bytes arrived and every one was right; otherwise says what went wrong.
    pub fn check(&self, len: u64) -> Result<(), String> {
        if let Some(at) = self.first_mismatch {
            return Err(format!("payload {:#x}: first wrong byte at offset {at}", self.seed));
        }
        if self.received != len {
            return Err(format!("payload {:#x}: received {} bytes, expected {len}", self.seed, self.received));
        }
        Ok(())
    }
}

impl Write for VerifyingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for piece in buf.chunks(self.expected.len()) {
            let expected = &mut self.expected[..piece.len()];
            fill(self.seed, self.received, expected);
            if self.first_mismatch.is_none() && piece != expected {
                let at = piece.iter().zip(expected.iter()).position(|(a, b)| a != b).unwrap_or(0);
                self.first_mismatch = Some(self.received + at as u64);
            }
            self.received += piece.len() as u64;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Which payload a value read back is (its first 8 bytes), if it is exactly that payload of that
/// length; None for a value that is no payload at all (a mix, a truncation, a corruption).
pub fn identify(value: &[u8]) -> Option<u64> {
    let seed = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    (bytes(seed, value.len() as u64) == value).then_some(seed)
}

/// Validates a report file against the committed JSON Schema; panics listing every violation.
pub fn assert_valid_report(path: &std::path::Path) -> serde_json::Value {
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_matches_schema(&report, "report.schema.json", &path.display().to_string());
    report
}

/// Validates `value` (what `what` names) against `schema/<schema>`; panics listing every violation.
pub fn assert_matches_schema(value: &serde_json::Value, schema: &str, what: &str) {
    let schema_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema").join(schema);
    let schema_json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema_json).expect("the committed schema compiles");
    let errors: Vec<String> = validator.iter_errors(value).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{what} does not match schema/{schema}:\n{}", errors.join("\n"));
}

/// Whether the test runs in CI (where a missing service must fail, never skip).
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true" || v == "1").unwrap_or(false)
}

/// Whether the service behind `env` is configured; fails in CI, skips loudly elsewhere.
pub fn available(env: &str) -> bool {
    if std::env::var(env).is_ok_and(|v| !v.trim().is_empty()) {
        return true;
    }
    assert!(!in_ci(), "{env} is not set and CI=true: run scripts/services.sh start and eval \"$(scripts/services.sh env)\"");
    eprintln!("SKIPPED: {env} is not set — start the services (scripts/services.sh start; eval \"$(scripts/services.sh env)\") to run this test");
    false
}

/// Waits until a `report.json` under `dir` (at any depth up to two) holds at least `cases`
/// finished cases. Interrupt tests call it instead of sleeping, so that they signal a run that
/// has provably finished a case, however slow the machine is.
pub fn wait_for_finished_cases(dir: &std::path::Path, cases: usize) {
    let found = |dir: &std::path::Path| -> Option<usize> {
        let mut candidates = vec![dir.join("report.json")];
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            candidates.push(entry.path().join("report.json"));
            if let Ok(inner) = std::fs::read_dir(entry.path()) {
                candidates.extend(inner.flatten().map(|e| e.path().join("report.json")));
            }
        }
        candidates
            .iter()
            .filter_map(|p| std::fs::read(p).ok())
            .filter_map(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .filter_map(|r| r["cases"].as_array().map(|c| c.len()))
            .max()
    };
    // The deadline only turns a hang into a failure; it is not what the test measures.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while found(dir).unwrap_or(0) < cases {
        assert!(std::time::Instant::now() < deadline, "no report under {} reached {cases} finished cases", dir.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
