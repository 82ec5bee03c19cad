//! The independent reader of tests/io_faults.rs: every key's value as the store holds it, read
//! without the fault shim while stowbench (holding the store open) waits for its get phase.

use std::collections::BTreeMap;
use std::path::Path;

fn key(i: u64) -> String {
    stowbench::workload::keys::key_name(i)
}

/// Every key's value through the backend itself (a second session on the same store).
pub fn read_with_backend(case_dir: &Path, backend: &str, options: &str, objects: u64) -> BTreeMap<String, Result<Vec<u8>, String>> {
    use stowbench::backend::{find, options::Options, ErrorKind, Namespace};
    let ns = Namespace::create(case_dir, "verify", "verify").unwrap();
    let built = (find(backend).unwrap().construct)(&Options::new("verify", "", toml::from_str(options).unwrap()), &ns).unwrap();
    let mut session = built.open_session(0).unwrap();
    let mut values = BTreeMap::new();
    for i in 0..objects {
        let mut bytes = Vec::new();
        match session.get(&key(i), &mut bytes) {
            Ok(_) => {
                values.insert(key(i), Ok(bytes));
            }
            Err(e) if e.kind == ErrorKind::NotFound => {}
            Err(e) => {
                values.insert(key(i), Err(e.to_string()));
            }
        }
    }
    values
}

/// Every key's newest value in the pack's data files, found by the format's own scan (the
/// running stowbench holds the pack's lock, so the store cannot be opened a second time).
pub fn read_pack(case_dir: &Path) -> BTreeMap<String, Result<Vec<u8>, String>> {
    use std::os::unix::fs::FileExt;
    use stowbench::pack::{record, scan};
    let mut newest: BTreeMap<String, (u64, Option<Vec<u8>>)> = BTreeMap::new();
    for entry in std::fs::read_dir(case_dir.join("pack")).unwrap().flatten() {
        if !entry.file_name().to_string_lossy().ends_with(".pack") {
            continue;
        }
        let file = std::fs::File::open(entry.path()).unwrap();
        let len = file.metadata().unwrap().len();
        let mut head = vec![0u8; record::FILE_HEADER_BYTES as usize];
        file.read_exact_at(&mut head, 0).unwrap();
        let salt = record::FileHeader::decode(&head).unwrap().salt;
        for r in scan::scan(&file, salt, record::FILE_HEADER_BYTES, len).unwrap().records {
            if newest.get(&r.key).is_some_and(|(seq, _)| *seq > r.header.seq) {
                continue;
            }
            let value = (r.header.kind == record::RecordKind::Put).then(|| {
                let mut v = vec![0u8; r.header.value_len as usize];
                file.read_exact_at(&mut v, r.header.value_offset()).unwrap();
                v
            });
            newest.insert(r.key, (r.header.seq, value));
        }
    }
    newest.into_iter().filter_map(|(k, (_, v))| v.map(|v| (k, Ok(v)))).collect()
}
