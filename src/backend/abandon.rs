//! Operations of the MongoDB driver that the runner's `op_timeout` watchdog can abandon.
//!
//! The driver has no socket time-out, and its clients pool their connections, so a stalled
//! operation cannot be cut the way the other server backends' are (shutting the session's own
//! sockets down): a server that takes the connection but never answers would hold the worker
//! until the driver's monitor gave the server up (connect_timeout, 10 s by default). Underneath
//! the sync API the driver is async, though, and an async operation can simply be dropped: the
//! driver closes a connection dropped in the middle of a command, so a late reply is never read
//! as the answer to the next operation, and no other worker's connection is touched.

use super::sockets::CutHandle;
use super::{BResult, BackendError, ErrorKind};
use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::task::Poll;

/// The watchdog abandoned the operation.
pub struct Abandoned;

impl Abandoned {
    /// As the worker reports it: a time-out (the runner adds whose).
    pub fn error(what: &str) -> BackendError {
        BackendError::new(ErrorKind::Timeout, format!("{what}: the operation was abandoned"))
    }
}

/// One worker's driver operations (a GridFS session, or its file catalog).
pub struct Abandonable {
    runtime: &'static tokio::runtime::Runtime,
    abandon: Arc<tokio::sync::Notify>,
}

/// The runtime the operations run on. Each worker's own thread drives its operation
/// (`block_on`, as the driver's sync API does); the clients' background tasks (the server monitor,
/// the connection pool) and the timers run on the runtime's one thread.
fn runtime() -> BResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: LazyLock<Result<tokio::runtime::Runtime, String>> = LazyLock::new(|| {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(1).thread_name("stowbench-mongo").enable_all().build().map_err(|e| e.to_string())
    });
    RUNTIME.as_ref().map_err(|e| BackendError::new(ErrorKind::Other, format!("cannot start the MongoDB driver's runtime: {e}")))
}

impl Abandonable {
    pub fn new() -> BResult<Abandonable> {
        Ok(Abandonable { runtime: runtime()?, abandon: Arc::default() })
    }

    /// Makes a client inside the runtime, so its background tasks run there.
    pub fn client(&self, options: mongodb::options::ClientOptions) -> mongodb::error::Result<mongodb::Client> {
        let _inside = self.runtime.enter();
        mongodb::Client::with_options(options)
    }

    /// Runs `operation` on this thread until it ends or the watchdog abandons it (then it is
    /// dropped).
    pub fn run<T>(&self, operation: impl Future<Output = T>) -> Result<T, Abandoned> {
        // Made before the operation starts, so a cut from now on reaches it (`notify_waiters`
        // keeps no permit: a cut that came after the previous operation ended is not seen here;
        // the watchdog cuts again on every tick until the worker's call returns).
        let abandoned = self.abandon.notified();
        self.runtime.block_on(async {
            let (mut operation, mut abandoned) = (std::pin::pin!(operation), std::pin::pin!(abandoned));
            std::future::poll_fn(|cx| match operation.as_mut().poll(cx) {
                Poll::Ready(result) => Poll::Ready(Ok(result)),
                Poll::Pending => abandoned.as_mut().poll(cx).map(|()| Err(Abandoned)),
            })
            .await
        })
    }

    /// `run` for an operation with a time limit of its own (`None`: none); past it the
    /// operation is dropped and fails with `overdue`.
    pub fn run_within<T>(
        &self,
        limit: Option<std::time::Duration>,
        overdue: impl FnOnce() -> BackendError,
        operation: impl Future<Output = BResult<T>>,
    ) -> Result<BResult<T>, Abandoned> {
        self.run(async {
            match limit {
                None => operation.await,
                Some(left) => tokio::time::timeout(left, operation).await.unwrap_or_else(|_| Err(overdue())),
            }
        })
    }

    /// What the watchdog calls to abandon the operation in flight.
    pub fn cut_handle(&self) -> CutHandle {
        let abandon = self.abandon.clone();
        Arc::new(move || abandon.notify_waiters())
    }
}
