//! AWS Signature Version 4 for the requests this backend sends itself rather than through
//! object_store: the multipart-upload listing (`uploads`) and the chunk-signed PUTs (`chunked`),
//! built by `Client::signed_request` with exactly the headers they sign. HMAC-SHA256 and SHA-256
//! come from ring.

use super::Settings;
use crate::backend::{server, BResult, BackendError, ErrorKind};
use ring::{digest, hmac};

/// SHA-256 of the empty string, hex: the payload hash of a bodiless request.
pub(super) const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Where a request goes: the URL without its query, and the two parts of it SigV4 signs.
pub(super) struct Target {
    /// `scheme://host/path`.
    pub url: String,
    /// The `Host` header as the client sends it (with the port, if any).
    pub host: String,
    /// The canonical URI: `/bucket/object` (path style) or `/object` (virtual-hosted style).
    pub path: String,
}

/// The bucket (`object` empty) or an object in it, addressed as the settings say.
pub(super) fn target(s: &Settings, object: &str) -> BResult<Target> {
    let base = s.endpoint.uri.trim_end_matches('/');
    let (scheme, authority) =
        base.split_once("://").ok_or_else(|| BackendError::new(ErrorKind::Other, server::context("s3", &s.endpoint, "the endpoint is not a URL")))?;
    let object = object.split('/').map(encode).collect::<Vec<_>>().join("/");
    let (host, path) = match (s.virtual_hosted, object.is_empty()) {
        (true, _) => (format!("{}.{authority}", s.bucket), format!("/{object}")),
        (false, true) => (authority.to_string(), format!("/{}", encode(&s.bucket))),
        (false, false) => (authority.to_string(), format!("/{}/{object}", encode(&s.bucket))),
    };
    Ok(Target { url: format!("{scheme}://{host}{path}"), host, path })
}

/// The canonical query string of `pairs`: each name and value encoded, sorted by name.
fn canonical_query(pairs: &[(&str, String)]) -> String {
    let mut encoded: Vec<(String, String)> = pairs.iter().map(|(k, v)| (encode(k), encode(v))).collect();
    encoded.sort();
    encoded.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// One request's time and credential scope, and the key derived for them.
pub(super) struct Scope {
    /// `YYYYMMDDTHHMMSSZ`, the `x-amz-date` header.
    pub stamp: String,
    /// `YYYYMMDD/region/s3/aws4_request`.
    pub scope: String,
    key: hmac::Key,
}

impl Scope {
    /// The scope of a request sent now.
    pub fn now(s: &Settings) -> Scope {
        let stamp: String = crate::report::rfc3339(std::time::SystemTime::now()).chars().filter(|c| *c != '-' && *c != ':').collect();
        Scope::at(&s.secret_key, &s.region, stamp)
    }

    /// The scope of a request stamped `stamp` (`YYYYMMDDTHHMMSSZ`).
    pub(super) fn at(secret_key: &str, region: &str, stamp: String) -> Scope {
        let day = &stamp[..8];
        let mut key = format!("AWS4{secret_key}").into_bytes();
        for part in [day, region, "s3", "aws4_request"] {
            key = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &key), part.as_bytes()).as_ref().to_vec();
        }
        Scope { scope: format!("{day}/{region}/s3/aws4_request"), stamp, key: hmac::Key::new(hmac::HMAC_SHA256, &key) }
    }

    /// The signature of one chunk of a chunk-signed body, chained to the one before it (the
    /// request's own signature for the first chunk).
    pub fn sign_chunk(&self, previous: &str, data: &[u8]) -> String {
        self.sign(&format!("AWS4-HMAC-SHA256-PAYLOAD\n{}\n{}\n{previous}\n{EMPTY_SHA256}\n{}", self.stamp, self.scope, sha256_hex(data)))
    }

    /// The signature of `to_sign`, hex.
    pub fn sign(&self, to_sign: &str) -> String {
        hex(hmac::sign(&self.key, to_sign.as_bytes()).as_ref())
    }

    /// Signs a request; returns its `Authorization` header and its signature (the seed of a
    /// chunk-signed body). `headers` are the signed headers, names in lower case, sorted.
    pub fn authorize(&self, access_key: &str, method: &str, target: &Target, query: &str, headers: &[(&str, String)], payload: &str) -> (String, String) {
        let canonical_headers: String = headers.iter().map(|(name, value)| format!("{name}:{}\n", value.trim())).collect();
        let signed = headers.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(";");
        let canonical = format!("{method}\n{}\n{query}\n{canonical_headers}\n{signed}\n{payload}", target.path);
        let to_sign = format!("AWS4-HMAC-SHA256\n{}\n{}\n{}", self.stamp, self.scope, sha256_hex(canonical.as_bytes()));
        let signature = self.sign(&to_sign);
        (format!("AWS4-HMAC-SHA256 Credential={access_key}/{}, SignedHeaders={signed}, Signature={signature}", self.scope), signature)
    }
}

impl super::Client {
    /// A request to `target` with `query` (name and value pairs), signed in `scope`, carrying
    /// the `authorization` header and exactly the `headers` it signs (names in lower case,
    /// sorted); returns it and its signature (the seed of a chunk-signed body).
    pub(super) fn signed_request(
        &self,
        method: reqwest::Method,
        target: &Target,
        query: &[(&str, String)],
        scope: &Scope,
        headers: &[(&str, String)],
        payload: &str,
    ) -> (reqwest::RequestBuilder, String) {
        let query = canonical_query(query);
        let (authorization, signature) = scope.authorize(&self.settings.access_key, method.as_str(), target, &query, headers, payload);
        let url = if query.is_empty() { target.url.clone() } else { format!("{}?{query}", target.url) };
        let mut request = self.http.request(method, url).header("authorization", authorization);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        (request, signature)
    }
}

/// SHA-256 of `data`, hex.
pub(super) fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

/// SigV4's URI encoding: everything but A-Z a-z 0-9 - _ . ~ as %XX (a slash too).
pub(super) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_hashes_as_sigv4_says() {
        assert_eq!(encode("a/b c~"), "a%2Fb%20c~");
        assert_eq!(sha256_hex(b""), EMPTY_SHA256);
        assert_eq!(hex(&[0x00, 0x7f, 0xff]), "007fff");
        assert_eq!(canonical_query(&[("uploads", String::new()), ("prefix", "p/a b".into())]), "prefix=p%2Fa%20b&uploads=");
    }

    /// AWS's published example of a chunk-signed PUT (S3 API reference, "Signature Calculations
    /// for the Authorization Header: Transferring Payload in Multiple Chunks"): 66,560 bytes of
    /// `a` in chunks of 65,536 and 1,024 bytes and the empty last one.
    #[test]
    fn signs_the_published_chunked_upload_example() {
        let scope = Scope::at("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "20130524T000000Z".into());
        let target = Target { url: String::new(), host: "s3.amazonaws.com".into(), path: "/examplebucket/chunkObject.txt".into() };
        let headers = [
            ("content-encoding", "aws-chunked".to_string()),
            ("content-length", super::super::chunked::encoded_len(66_560).to_string()),
            ("host", target.host.clone()),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD".to_string()),
            ("x-amz-date", scope.stamp.clone()),
            ("x-amz-decoded-content-length", "66560".to_string()),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY".to_string()),
        ];
        assert_eq!(headers[1].1, "66824");
        let (auth, seed) = scope.authorize("AKIAIOSFODNN7EXAMPLE", "PUT", &target, "", &headers, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
        assert_eq!(seed, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;"),
            "{auth}"
        );
        let first = scope.sign_chunk(&seed, &[b'a'; 65_536]);
        assert_eq!(first, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
        let second = scope.sign_chunk(&first, &[b'a'; 1024]);
        assert_eq!(second, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497");
        assert_eq!(scope.sign_chunk(&second, b""), "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9");
    }
}
