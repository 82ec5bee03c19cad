//! The file server's audit after a case: the catalog is read back and every stored object is
//! checked through the backend, so a retried or failed upload that left a second row, a
//! dangling name, an unfinished registration or a missing object fails the case. (The study
//! this re-runs saw time-outs leave its database inconsistent: that must show here.)

use super::keytable::KeyTable;
use crate::backend::catalog::Catalog;
use crate::backend::{BResult, ErrorKind, Session};
use crate::report::model::FileServerResult;
use crate::stats::FileTally;

/// Audits the catalog through `catalog` and the objects through `session`; `tally` is what the
/// uploads reported, `keys` which files ended up uploaded.
pub fn file_server(catalog: &mut dyn Catalog, session: &mut dyn Session, tally: &FileTally, duplicates: f64, keys: &KeyTable) -> BResult<FileServerResult> {
    let counts = catalog.counts()?;
    let mut r = FileServerResult {
        catalog: catalog.describe(),
        hash: "blake3".into(),
        duplicates_fraction: duplicates,
        uploads: tally.uploads,
        duplicate_uploads: tally.duplicates,
        contents_written: tally.contents_written,
        retried_uploads: tally.retried,
        failed_uploads: tally.failed,
        catalog_files: counts.files,
        catalog_names: counts.names,
        unfinished_files: counts.unfinished,
        dangling_names: counts.dangling_names,
        catalog_bytes: catalog.size_bytes()?,
        ..FileServerResult::default()
    };
    for file in catalog.stored_files()? {
        r.objects_checked += 1;
        r.content_bytes += file.size_bytes;
        match head_with_retries(session, &file.object_key) {
            Ok(size) if size == file.size_bytes => {}
            Ok(_) => r.objects_wrong_size += 1,
            Err(e) if e.kind == ErrorKind::NotFound => r.objects_missing += 1,
            Err(e) => return Err(e),
        }
    }
    r.problems = problems(&r, keys.present());
    Ok(r)
}

/// Attempts at reading one object's size: the audit must not fail on a passing fault (a time-out,
/// a dropped connection) that the measured operations were allowed to retry.
const AUDIT_ATTEMPTS: u32 = 5;

fn head_with_retries(session: &mut dyn Session, key: &str) -> BResult<u64> {
    let mut attempt = 1;
    loop {
        match session.head(key) {
            Err(e) if attempt < AUDIT_ATTEMPTS && super::retry::retryable(e.kind) => attempt += 1,
            other => return other,
        }
    }
}

/// What is wrong with an audited catalog, in words. `named_files` is how many files the runner
/// saw uploaded.
fn problems(r: &FileServerResult, named_files: u64) -> Vec<String> {
    let mut p = Vec::new();
    if r.dangling_names > 0 {
        p.push(format!("{} names point at no files row", r.dangling_names));
    }
    if r.objects_missing > 0 {
        p.push(format!("{} of {} contents marked stored are missing from the store", r.objects_missing, r.objects_checked));
    }
    if r.objects_wrong_size > 0 {
        p.push(format!("{} of {} stored contents have another size than the catalog records", r.objects_wrong_size, r.objects_checked));
    }
    // With a failed upload, an unfinished row or an extra name is the honest trace of it (and
    // reported); with none, the catalog must match what the uploads did exactly.
    if r.failed_uploads == 0 {
        if r.unfinished_files > 0 {
            p.push(format!("{} files rows were never marked stored although every upload succeeded", r.unfinished_files));
        }
        if r.catalog_files != r.contents_written {
            p.push(format!(
                "the catalog has {} files rows but the uploads wrote {} contents: a retry or a duplicate created a second row or copy",
                r.catalog_files, r.contents_written
            ));
        }
        if r.catalog_names != named_files {
            p.push(format!("the catalog has {} names but {named_files} files were uploaded", r.catalog_names));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> FileServerResult {
        FileServerResult {
            uploads: 10,
            contents_written: 8,
            duplicate_uploads: 2,
            catalog_files: 8,
            catalog_names: 10,
            objects_checked: 8,
            ..Default::default()
        }
    }

    #[test]
    fn a_clean_catalog_has_no_problems_and_every_inconsistency_is_named() {
        assert!(problems(&clean(), 10).is_empty(), "{:?}", problems(&clean(), 10));
        let second_row = FileServerResult { catalog_files: 9, ..clean() };
        assert!(problems(&second_row, 10)[0].contains("second row"));
        let unfinished = FileServerResult { unfinished_files: 1, ..clean() };
        assert!(problems(&unfinished, 10)[0].contains("never marked stored"));
        assert!(problems(&clean(), 11)[0].contains("11 files were uploaded"));
        let missing = FileServerResult { objects_missing: 1, ..clean() };
        assert!(problems(&missing, 10)[0].contains("missing"));
        // A failed upload may leave its registration behind: reported, not a failure of the audit.
        let failed = FileServerResult { failed_uploads: 1, unfinished_files: 1, catalog_files: 9, catalog_names: 11, ..clean() };
        assert!(problems(&failed, 10).is_empty());
    }
}
