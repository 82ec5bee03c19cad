//! The TCP connections of server backends, which the runner's watchdog cuts when an operation
//! outlives its `op_timeout`.
//!
//! None of the client libraries (postgres, mysql, mongodb, object_store) can abandon a call that
//! waits on a silent server from another thread, and postgres has no client-side deadline at all:
//! a black-holed connection would hold its worker forever. Shutting the socket down (`shutdown(2)`,
//! which unlike `close` is safe while another thread is inside `read`) makes the blocked call
//! return an error at once, whatever library made it.
//!
//! Which sockets are a session's: its client is connected under one process-wide lock, and the
//! TCP sockets to the server's port that appeared during the connect are its own. Pooled clients
//! open connections in the background: S3's cut reaches every connection of the process to that
//! server port (`every_connection_to`), and GridFS's sessions abandon the operation in flight
//! instead (their driver is async underneath, so an operation can be dropped). Which sockets: each descriptor is asked
//! for its peer (`getpeername`), microseconds per descriptor.

use std::collections::HashSet;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Cuts one session's connections from another thread.
pub type CutHandle = Arc<dyn Fn() + Send + Sync>;

/// Held while connecting, so the sockets that appear belong to the connecting session.
static CONNECTING: Mutex<()> = Mutex::new(());

/// The TCP sockets one session holds to its server.
#[derive(Clone, Default)]
pub struct Sockets {
    port: u16,
    fds: Arc<Mutex<Vec<RawFd>>>,
    /// While connecting: the sockets to the port that existed before, so that a cut can reach
    /// the one being connected (a silent server can stall a handshake as well as a query).
    connecting: Arc<Mutex<Option<HashSet<RawFd>>>>,
    /// Set by a cut: the session must connect again before its next call.
    was_cut: Arc<AtomicBool>,
}

impl Sockets {
    /// Sockets of a session whose server listens on `port`.
    pub fn to_port(port: u16) -> Sockets {
        Sockets { port, fds: Arc::default(), connecting: Arc::default(), was_cut: Arc::default() }
    }

    /// Runs `connect`, noting the sockets to the server it opened as this session's (replacing
    /// those of an earlier connection, which the caller drops after this returns). A failed
    /// connect leaves the earlier connection's, so its death stays visible to `peer_closed`.
    pub fn track<T, E>(&self, connect: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let _one_at_a_time = CONNECTING.lock().unwrap_or_else(|p| p.into_inner());
        let before = fds_connected_to(self.port);
        *lock(&self.connecting) = Some(before.clone());
        let connected = connect();
        *lock(&self.connecting) = None;
        if connected.is_ok() {
            *lock(&self.fds) = fds_connected_to(self.port).into_iter().filter(|fd| !before.contains(fd)).collect();
        }
        connected
    }

    /// Whether the connection was cut since the last call (and forgets it): a client library
    /// that cannot tell a dead connection must be replaced then.
    pub fn take_cut(&self) -> bool {
        self.was_cut.swap(false, Ordering::Relaxed)
    }

    /// Whether the server closed or reset the connection (or a cut shut it): a peek that finds
    /// the end of the stream or an error. An idle healthy connection has nothing to read.
    pub fn peer_closed(&self) -> bool {
        lock(&self.fds).iter().any(|fd| {
            let mut byte = 0u8;
            // SAFETY: a one-byte peek into a local buffer on a socket fd this session holds.
            let n = unsafe { libc::recv(*fd, (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
            n == 0 || (n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock)
        })
    }

    /// A handle that shuts this session's sockets down.
    pub fn cut_handle(&self) -> CutHandle {
        let (fds, connecting, was_cut, port) = (self.fds.clone(), self.connecting.clone(), self.was_cut.clone(), self.port);
        Arc::new(move || {
            was_cut.store(true, Ordering::Relaxed);
            // Under the lock: `track` replaces the list before the old client (and its fds) is
            // dropped, so no fd number here can have been reused for another file.
            for fd in lock(&fds).iter() {
                // SAFETY: shutdown on a socket fd this session still holds; no memory involved.
                unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
            }
            // Connecting (under the process-wide lock, so no other session is): the new sockets
            // to the port are this connect's.
            if let Some(before) = lock(&connecting).as_ref() {
                for fd in fds_connected_to(port).difference(before) {
                    // SAFETY: as above.
                    unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
                }
            }
        })
    }
}

/// One connection the watchdog may cut or the server may drop, with the way to open another:
/// MariaDB's sessions and the file-server catalogs' connections. Client libraries cannot tell a
/// dead connection, so an operation first calls `revive` (or `live`); the connection itself is
/// reached through `Deref`.
pub struct Reconnecting<C> {
    conn: C,
    sockets: Sockets,
    connect: Box<dyn Fn() -> super::BResult<C> + Send>,
}

impl<C> Reconnecting<C> {
    /// Connects to the server on `port` through `connect`, noting the connection's sockets.
    pub fn open(port: u16, connect: Box<dyn Fn() -> super::BResult<C> + Send>) -> super::BResult<Reconnecting<C>> {
        let sockets = Sockets::to_port(port);
        let conn = sockets.track(&connect)?;
        Ok(Reconnecting { conn, sockets, connect })
    }

    /// Replaces the connection if it was cut or the server closed it (a restart, a reset).
    pub fn revive(&mut self) -> super::BResult<()> {
        if self.sockets.take_cut() | self.sockets.peer_closed() {
            self.conn = self.sockets.track(&self.connect)?;
        }
        Ok(())
    }

    /// The connection, revived first: for a call that makes one request.
    pub fn live(&mut self) -> super::BResult<&mut C> {
        self.revive()?;
        Ok(&mut self.conn)
    }

    /// A handle that shuts the connection down (see `Sockets::cut_handle`).
    pub fn cut_handle(&self) -> CutHandle {
        self.sockets.cut_handle()
    }
}

impl<C> std::ops::Deref for Reconnecting<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.conn
    }
}

impl<C> std::ops::DerefMut for Reconnecting<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.conn
    }
}

/// A cut for pooled clients: every TCP connection of this process to `port`.
pub fn every_connection_to(port: u16) -> CutHandle {
    Arc::new(move || {
        for fd in fds_connected_to(port) {
            // SAFETY: a shutdown, no memory involved. The fds were read from /proc/self/fd a
            // moment ago; a pooled client that closed one meanwhile leaves at worst a shutdown of
            // a number reused by another socket of this process.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This process's file descriptors that are sockets connected to remote port `port` (IPv4 or
/// IPv6), found by asking each descriptor for its peer: a few microseconds per descriptor, where
/// reading /proc/net/tcp would cost milliseconds on a machine with many closed connections
/// lingering. (A socket still waiting for its SYN to be answered has no peer yet: a connect that
/// never completes is bounded by the backend's connect_timeout instead.)
fn fds_connected_to(port: u16) -> HashSet<RawFd> {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return HashSet::new() };
    fds.flatten().filter_map(|entry| entry.file_name().to_str()?.parse::<RawFd>().ok()).filter(|fd| peer_port(*fd) == Some(port)).collect()
}

/// The remote port of socket `fd`, if it is a connected IPv4 or IPv6 socket.
fn peer_port(fd: RawFd) -> Option<u16> {
    // SAFETY: getpeername writes at most `len` bytes into the zeroed storage we own; any fd
    // number is acceptable (a non-socket or closed one fails with an error).
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    if unsafe { libc::getpeername(fd, (&mut addr as *mut libc::sockaddr_storage).cast(), &mut len) } != 0 {
        return None;
    }
    match addr.ss_family as i32 {
        // SAFETY: the family says which address structure the kernel wrote.
        libc::AF_INET => Some(u16::from_be(unsafe { *(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() }.sin_port)),
        libc::AF_INET6 => Some(u16::from_be(unsafe { *(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() }.sin6_port)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_cut_wakes_a_reader_blocked_on_a_silent_peer() {
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let sockets = Sockets::to_port(port);
        let mut stream = sockets.track(|| TcpStream::connect(("127.0.0.1", port))).unwrap();
        let (_peer, _) = silent.accept().unwrap();
        stream.write_all(b"hello?").unwrap();
        let cut = sockets.cut_handle();
        let reader = std::thread::spawn(move || stream.read(&mut [0u8; 16]));
        cut();
        // Without the cut the read would wait forever: the peer never answers nor closes.
        let read = reader.join().unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }

    #[test]
    fn track_notes_only_the_sockets_opened_during_the_connect() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let _earlier = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let sockets = Sockets::to_port(port);
        let _mine = sockets.track(|| TcpStream::connect(("127.0.0.1", port))).unwrap();
        assert_eq!(sockets.fds.lock().unwrap().len(), 1);
        assert!(!sockets.peer_closed(), "an idle connection is alive");
        sockets.cut_handle()();
        assert!(sockets.peer_closed(), "a cut one is not");
    }

    #[test]
    fn a_cut_reaches_a_connect_stalled_in_its_handshake() {
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let sockets = Sockets::to_port(port);
        let cut = sockets.cut_handle();
        let connecting = sockets.clone();
        let client = std::thread::spawn(move || {
            connecting.track(|| {
                // A handshake: connected, then waiting for a greeting that never comes.
                let mut stream = TcpStream::connect(("127.0.0.1", port))?;
                stream.read(&mut [0u8; 16])
            })
        });
        let (_peer, _) = silent.accept().unwrap();
        // The cut may come before the read starts; the read returns either way.
        while !client.is_finished() {
            cut();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(matches!(client.join().unwrap(), Ok(0) | Err(_)));
    }
}
