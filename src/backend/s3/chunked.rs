//! PUTs whose body is signed chunk by chunk (SigV4 streaming: `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`
//! with `Content-Encoding: aws-chunked`), as minio-go (so warp) and the AWS SDKs send them over
//! plain HTTP. The body goes in 64 KiB chunks, each signed with the SHA-256 of its bytes chained
//! to the signature before it, and the server checks every chunk: the signature covers the body
//! as a whole-body hash does. But a whole-body signature must hash every byte before the first
//! is sent, while here a chunk is hashed when the connection asks for it — as the server reads
//! the chunk before. One thread putting 16 MiB objects to MinIO spent about a sixth of each put
//! hashing before sending (docs/backends/s3.md).

use super::sigv4::{self, Scope};
use super::Client;
use crate::backend::{server, BResult, BackendError, ErrorKind};
use bytes::Bytes;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Body bytes per signed chunk (minio-go's and the AWS SDKs' size).
const CHUNK_BYTES: usize = 64 << 10;

/// The payload hash a chunk-signed request declares.
pub(super) const STREAMING_PAYLOAD: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";

/// Length on the wire of `len` body bytes in aws-chunked encoding: each chunk is
/// `<size in hex>;chunk-signature=<64 hex digits>\r\n<data>\r\n`, and an empty chunk ends the body.
pub(super) fn encoded_len(len: u64) -> u64 {
    let framed = |n: u64| format!("{n:x}").len() as u64 + ";chunk-signature=".len() as u64 + 64 + 2 + n + 2;
    let chunk = CHUNK_BYTES as u64;
    let last = if len % chunk > 0 { framed(len % chunk) } else { 0 };
    (len / chunk) * framed(chunk) + last + framed(0)
}

impl Client {
    /// PUTs `body` as `object` (with `query`: a multipart part's number and upload id, or
    /// nothing), its chunks signed as they are sent; returns the ETag the server answered with.
    pub(super) async fn put_chunked(&self, object: &str, query: &[(&str, String)], body: Bytes) -> BResult<String> {
        let s = &self.settings;
        let target = sigv4::target(s, object)?;
        let scope = Scope::now(s);
        let len = body.len() as u64;
        // Sorted by name, as SigV4 signs them; the client sends exactly these.
        let headers = [
            ("content-encoding", "aws-chunked".to_string()),
            ("content-length", encoded_len(len).to_string()),
            ("host", target.host.clone()),
            ("x-amz-content-sha256", STREAMING_PAYLOAD.to_string()),
            ("x-amz-date", scope.stamp.clone()),
            ("x-amz-decoded-content-length", len.to_string()),
        ];
        let (request, seed) = self.signed_request(reqwest::Method::PUT, &target, query, &scope, &headers, STREAMING_PAYLOAD);
        let signer = ChunkSigner { scope, previous: seed, body, sent: 0, queue: VecDeque::new(), finished: false };
        let response = request.body(reqwest::Body::wrap_stream(signer)).send().await.map_err(|e| self.request_error(object, &e))?;
        let status = response.status();
        let etag = response.headers().get("etag").and_then(|v| v.to_str().ok()).map(str::to_string);
        let text = response.text().await.map_err(|e| self.request_error(object, &e))?;
        match etag {
            Some(etag) if status.is_success() => Ok(etag),
            _ if status.is_success() => Err(BackendError::new(ErrorKind::Other, format!("s3: PUT {object} answered {status} without an ETag"))),
            _ => Err(BackendError::new(ErrorKind::Other, format!("s3: PUT {object} failed ({status}): {}", s.endpoint.secrets.scrub(text.trim())))),
        }
    }

    fn request_error(&self, object: &str, e: &reqwest::Error) -> BackendError {
        let kind = if e.is_timeout() { ErrorKind::Timeout } else { ErrorKind::Connection };
        BackendError::new(kind, format!("s3: PUT {object}: {}", self.settings.endpoint.secrets.scrub(&server::chain(e))))
    }
}

/// The body as aws-chunked frames. Each chunk is signed when the connection asks for its frame,
/// so hashing the next chunk overlaps with the server reading this one. The data itself is never
/// copied: a chunk's frame is its header, a slice of the body, and `\r\n`.
struct ChunkSigner {
    scope: Scope,
    /// The last signature made (the request's own before the first chunk).
    previous: String,
    body: Bytes,
    /// Body bytes already framed.
    sent: usize,
    /// Frames made and not yet handed to the connection.
    queue: VecDeque<Bytes>,
    /// Whether the empty last chunk has been made.
    finished: bool,
}

impl futures_util::Stream for ChunkSigner {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let me = &mut *self;
        if let Some(frame) = me.queue.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if me.finished {
            return Poll::Ready(None);
        }
        let n = (me.body.len() - me.sent).min(CHUNK_BYTES);
        let data = me.body.slice(me.sent..me.sent + n);
        me.sent += n;
        me.previous = me.scope.sign_chunk(&me.previous, &data);
        let mut head = format!("{n:x};chunk-signature={}\r\n", me.previous);
        if n == 0 {
            me.finished = true;
            head.push_str("\r\n");
        } else {
            me.queue.push_back(data);
            me.queue.push_back(Bytes::from_static(b"\r\n"));
        }
        Poll::Ready(Some(Ok(Bytes::from(head))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use futures_util::StreamExt;

    /// Every frame of a body, concatenated: what goes on the wire.
    fn wire(scope: Scope, seed: &str, body: Vec<u8>) -> Vec<u8> {
        let signer = ChunkSigner { scope, previous: seed.into(), body: Bytes::from(body), sent: 0, queue: VecDeque::new(), finished: false };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let frames: Vec<_> = runtime.block_on(signer.collect());
        frames.into_iter().flat_map(|f| f.unwrap().to_vec()).collect()
    }

    /// AWS's published chunk-signed PUT (see `sigv4`'s test of its signatures): the body on the
    /// wire, byte for byte, and its length as `content-length` announces it.
    #[test]
    fn frames_the_published_example_byte_for_byte() {
        let scope = Scope::at("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "20130524T000000Z".into());
        let sent = wire(scope, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", vec![b'a'; 66_560]);
        let mut expected = b"10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n".to_vec();
        expected.extend([b'a'; 65_536]);
        expected.extend(b"\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n");
        expected.extend([b'a'; 1024]);
        expected.extend(b"\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n");
        assert!(sent == expected, "the frames differ from AWS's example");
        assert_eq!(encoded_len(66_560), 66_824);
        assert_eq!(sent.len() as u64, encoded_len(66_560));
    }

    #[test]
    fn announces_the_length_it_sends() {
        for len in [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 3 * CHUNK_BYTES, 1_000_000] {
            let scope = Scope::at("secret", "us-east-1", "20261125T000000Z".into());
            assert_eq!(wire(scope, "seed", vec![7; len]).len() as u64, encoded_len(len as u64), "{len} bytes");
        }
    }
}
