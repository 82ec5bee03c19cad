//! Incomplete multipart uploads under our prefix, which a put cut short (a killed stowbench, a
//! dead connection) leaves on the server, invisible to object listings and billed as storage.
//!
//! object_store can abort an upload but not list them: S3's ListMultipartUploads is sent here as
//! one GET signed with AWS Signature Version 4 (HMAC-SHA256 from ring). MinIO answers it only for
//! an exact object name, so besides our prefix each key that may hold one is asked for by name:
//! those whose upload this process began and did not see end, or, cleaning up after a killed
//! run, every key of the case.
//! Only uploads whose object name lies under our prefix are ever aborted. Reads and aborts only:
//! nothing here writes an object.

use super::sigv4;
use super::Client;
use crate::backend::{server, BResult, BackendError, ErrorKind};
use object_store::multipart::MultipartStore;
use object_store::path::Path as ObjectPath;

/// Most keys asked for one by one (a bigger case relies on the prefix listing).
pub(super) const MAX_KEYS_BY_NAME: u64 = 100_000;

/// One incomplete upload: its object name and upload id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Upload {
    /// Object name, `<prefix>/<key>`.
    pub path: String,
    /// The server's upload id.
    pub id: String,
}

impl Client {
    /// Every incomplete upload under our prefix: those the prefix listing finds, and those of
    /// the object names `by_name` (each `<prefix>/<key>`) asked for one by one.
    pub(super) fn list_uploads(&self, by_name: Vec<String>) -> BResult<Vec<Upload>> {
        let prefix = format!("{}/", self.settings.prefix);
        let mut names = vec![prefix.clone()];
        names.extend(by_name);
        let mut found = Vec::new();
        for name in names {
            let (mut key_marker, mut id_marker) = (String::new(), String::new());
            loop {
                let mut query = vec![("prefix", name.clone()), ("uploads", String::new())];
                if !key_marker.is_empty() {
                    query.push(("key-marker", key_marker.clone()));
                    query.push(("upload-id-marker", id_marker.clone()));
                }
                let xml = self.signed_get(&query)?;
                found.extend(uploads_in(&xml).into_iter().filter(|u| u.path.starts_with(&prefix)));
                match (tag(&xml, "IsTruncated").as_deref(), tag(&xml, "NextKeyMarker"), tag(&xml, "NextUploadIdMarker")) {
                    (Some("true"), Some(k), Some(i)) if (k.as_str(), i.as_str()) != (key_marker.as_str(), id_marker.as_str()) => {
                        (key_marker, id_marker) = (k, i);
                    }
                    _ => break,
                }
            }
        }
        found.sort();
        found.dedup();
        Ok(found)
    }

    /// Aborts `uploads` (each under our prefix); one already gone is fine.
    pub(super) fn abort_uploads(&self, uploads: &[Upload]) -> BResult<()> {
        let prefix = format!("{}/", self.settings.prefix);
        self.runtime.block_on(async {
            for u in uploads.iter().filter(|u| u.path.starts_with(&prefix)) {
                match self.store.abort_multipart(&ObjectPath::from(u.path.as_str()), &u.id).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(self.error(e)),
                }
            }
            Ok(())
        })
    }

    /// Sends a signed `GET /<bucket>?<query>` and returns the response body.
    fn signed_get(&self, query: &[(&str, String)]) -> BResult<String> {
        let s = &self.settings;
        let fail = |kind, what: String| BackendError::new(kind, server::context("s3", &s.endpoint, &what));
        let target = sigv4::target(s, "")?;
        let scope = sigv4::Scope::now(s);
        let payload = sigv4::EMPTY_SHA256;
        let headers = [("host", target.host.clone()), ("x-amz-content-sha256", payload.to_string()), ("x-amz-date", scope.stamp.clone())];
        let (request, _) = self.signed_request(reqwest::Method::GET, &target, query, &scope, &headers, payload);
        self.runtime.block_on(async {
            let response = request.send().await.map_err(|e| fail(ErrorKind::Connection, format!("listing multipart uploads: {}", server::chain(&e))))?;
            let status = response.status();
            let body = response.text().await.map_err(|e| fail(ErrorKind::Connection, format!("listing multipart uploads: {}", server::chain(&e))))?;
            if !status.is_success() {
                return Err(fail(ErrorKind::Other, format!("listing multipart uploads failed ({status}): {body}")));
            }
            Ok(body)
        })
    }
}

/// The text of the first `<name>` element, XML entities decoded.
fn tag(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    Some(xml[start..end].replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&"))
}

/// The uploads of one ListMultipartUploads answer.
fn uploads_in(xml: &str) -> Vec<Upload> {
    xml.split("<Upload>")
        .skip(1)
        .filter_map(|block| {
            let block = block.split("</Upload>").next()?;
            Some(Upload { path: tag(block, "Key")?, id: tag(block, "UploadId")? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_uploads_and_markers_from_a_listing() {
        let xml = "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated><NextKeyMarker>p/b</NextKeyMarker>\
                   <Upload><Key>p/a&amp;b</Key><UploadId>id1</UploadId></Upload><Upload><Key>p/b</Key><UploadId>id2</UploadId></Upload>\
                   </ListMultipartUploadsResult>";
        let found = uploads_in(xml);
        assert_eq!(found, [Upload { path: "p/a&b".into(), id: "id1".into() }, Upload { path: "p/b".into(), id: "id2".into() }]);
        assert_eq!(tag(xml, "IsTruncated").as_deref(), Some("true"));
    }
}
