//! The few Linux calls std does not offer for sockets: epoll, gathered sends without SIGPIPE,
//! non-blocking connect from a chosen address, socket options set before `listen`, waits and
//! peeks. Each wrapper checks the result and returns `io::Result`.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// An epoll instance.
pub struct Epoll {
    fd: OwnedFd,
}

/// Readiness bits.
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// The peer shut its sending side.
pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;
/// Edge-triggered.
pub const ET: u32 = libc::EPOLLET as u32;
/// Error or hang-up (always reported).
pub const ERR_HUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP) as u32;

/// An empty event slot for [`Epoll::wait`].
pub const NO_EVENT: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };

impl Epoll {
    /// A new epoll instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers; the result is checked and owned at once.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The instance's descriptor: readable when it has events to report (for a thread that
    /// waits on it with `poll` and leaves the taking to the module).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }

    /// Watches `fd` for `events`, reporting `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes what `fd` is watched for.
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd` (closing it does too; this is for sockets that stay open).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Ready events, without waiting (`timeout_ms` 0) or up to `timeout_ms`.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as i32;
        // SAFETY: `events` is writable for `max` entries.
        let n =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) };
        match check(n) {
            Ok(n) => Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// Sends the gathered `bufs` on a non-blocking socket; never raises SIGPIPE (a peer that went
/// away is an `EPIPE` error instead). `WouldBlock` when nothing could be sent.
pub fn send_vectored(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix (std guarantees it).
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
    loop {
        // SAFETY: `msg` points at `bufs`, which are valid for reads for their lengths.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reads into `buf` from a non-blocking socket: `Ok(0)` is end of stream, `WouldBlock` nothing
/// to read.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reads into the scattered `bufs` from a non-blocking socket (filling each before the next):
/// `Ok(0)` is end of stream, `WouldBlock` nothing to read.
pub fn recv_vectored(fd: RawFd, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSliceMut is ABI-compatible with iovec on Unix (std guarantees it).
    msg.msg_iov = bufs.as_mut_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
    loop {
        // SAFETY: `msg` points at `bufs`, which are valid for writes for their lengths.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the option value is a c_int living across the call, with its size given.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Sets a socket buffer size (`SO_SNDBUF` or `SO_RCVBUF`) when `bytes` is not 0 (0 leaves the
/// kernel's automatic tuning on).
pub fn set_buffer(fd: RawFd, name: libc::c_int, bytes: usize) -> io::Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    set_int(
        fd,
        libc::SOL_SOCKET,
        name,
        bytes.min(i32::MAX as usize) as libc::c_int,
    )
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

fn bind(fd: RawFd, a: SocketAddrV4) -> io::Result<()> {
    let sa = sockaddr(a);
    // SAFETY: `sa` is a valid sockaddr_in of the size given.
    check(unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

fn tcp_socket() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; the result is checked and owned at once.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking listening socket on `addr`, on a port the kernel picks (`ports` empty) or the
/// first free one of `ports`. `rcvbuf` (if not 0) is set before `listen` so accepted connections
/// inherit it and the window scale fits it.
pub fn listen(
    addr: Ipv4Addr,
    ports: std::ops::RangeInclusive<u16>,
    rcvbuf: usize,
) -> io::Result<TcpListener> {
    let fd = tcp_socket()?;
    set_buffer(fd.as_raw_fd(), libc::SO_RCVBUF, rcvbuf)?;
    let mut bound = Err(io::Error::from(io::ErrorKind::AddrInUse));
    for port in ports {
        bound = bind(fd.as_raw_fd(), SocketAddrV4::new(addr, port));
        if bound.is_ok() {
            break;
        }
    }
    bound?;
    // SAFETY: no pointers.
    check(unsafe { libc::listen(fd.as_raw_fd(), libc::SOMAXCONN) })?;
    Ok(TcpListener::from(fd))
}

/// Sets `TCP_USER_TIMEOUT`: the connection fails with `ETIMEDOUT` when sent data stays
/// unacknowledged for `ms` milliseconds (0 keeps the kernel's retransmission limit, about 15
/// minutes). A live peer's kernel acknowledges even when its process is busy, so this fires
/// only when the network (or the peer's host) is gone.
pub fn set_user_timeout(fd: RawFd, ms: u32) -> io::Result<()> {
    set_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        ms.min(i32::MAX as u32) as libc::c_int,
    )
}

/// Whether `e` says the network under a connection failed (rather than the peer ending it).
pub fn network_failed(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ETIMEDOUT
                | libc::EHOSTUNREACH
                | libc::ENETUNREACH
                | libc::ENETDOWN
                | libc::EHOSTDOWN
        )
    )
}

/// Starts a non-blocking connection from `local` (port chosen by the kernel) to `remote`, with
/// `TCP_NODELAY` and the given send buffer; the boolean says whether it is connected already
/// (else it completes when the socket becomes writable; see [`TcpStream::take_error`]).
pub fn connect(
    local: Ipv4Addr,
    remote: SocketAddrV4,
    sndbuf: usize,
) -> io::Result<(TcpStream, bool)> {
    let fd = tcp_socket()?;
    set_int(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    set_buffer(fd.as_raw_fd(), libc::SO_SNDBUF, sndbuf)?;
    bind(fd.as_raw_fd(), SocketAddrV4::new(local, 0))?;
    let sa = sockaddr(remote);
    // SAFETY: `sa` is a valid sockaddr_in of the size given.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    let stream = TcpStream::from(fd);
    if rc == 0 {
        return Ok((stream, true));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok((stream, false))
    } else {
        Err(e)
    }
}

/// Waits up to `timeout_ms` for `fd` to become writable (or fail); whether it did.
pub fn wait_writable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call.
    let n = check(unsafe { libc::poll(&mut p, 1, timeout_ms) })?;
    Ok(n > 0)
}

/// Whether the peer of socket `fd` has closed it with nothing unread before the end (a
/// non-blocking peek at the next byte).
pub fn peer_closed(fd: RawFd) -> bool {
    let mut b = 0u8;
    // SAFETY: `b` is one writable byte; MSG_PEEK leaves the socket's data in place.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut b as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
}

/// Waits up to `timeout_ms` for `fd` to become readable (or fail); whether it did.
pub fn wait_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call.
    let n = check(unsafe { libc::poll(&mut p, 1, timeout_ms) })?;
    Ok(n > 0)
}

/// Zeroed bytes starting on a page boundary.
///
/// The socket buffers live here: this CPU copies (`rep movsb`, the kernel's socket copies
/// included) at a fraction of its speed when the destination lies 1 to 31 bytes past the
/// source's offset within a page, and a socket's data starts at a page boundary whenever the
/// kernel reuses a free page for it; a page-aligned buffer then agrees with it.
pub struct PageBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: std::alloc::Layout,
}

// SAFETY: PageBuf owns its bytes exclusively, like a Box<[u8]>.
unsafe impl Send for PageBuf {}

impl PageBuf {
    const ALIGN: usize = 4096;

    /// `len` zero bytes; `None` when no allocation can be that large (the parameters that size
    /// these buffers stop far below).
    pub fn new(len: usize) -> Option<PageBuf> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), Self::ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = std::ptr::NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        Some(PageBuf { ptr, len, layout })
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is an allocation of at least `len` initialised bytes that we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn listen_connect_send_vectored() {
        let l = listen(Ipv4Addr::LOCALHOST, 0..=0, 1 << 20).unwrap();
        let port = l.local_addr().unwrap().port();
        let (s, _) = connect(
            Ipv4Addr::LOCALHOST,
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, port),
            0,
        )
        .unwrap();
        l.set_nonblocking(false).unwrap();
        let (mut r, _) = l.accept().unwrap();
        // Writable once connected.
        let ep = Epoll::new().unwrap();
        ep.add(s.as_raw_fd(), OUT | ET, 7).unwrap();
        let mut evs = [NO_EVENT; 4];
        let n = ep.wait(&mut evs, 5000).unwrap();
        assert_eq!((n, evs[0].u64), (1, 7));
        assert!(s.take_error().unwrap().is_none());
        let n = send_vectored(
            s.as_raw_fd(),
            &[IoSlice::new(b"ab"), IoSlice::new(b""), IoSlice::new(b"cde")],
        )
        .unwrap();
        assert_eq!(n, 5);
        let mut got = [0u8; 5];
        r.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcde");
        drop(r);
        // The peer is gone: an error, not SIGPIPE (which would kill the test binary).
        let mut failed = false;
        for _ in 0..100 {
            if send_vectored(s.as_raw_fd(), &[IoSlice::new(&[0; 1000])]).is_err() {
                failed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(failed, "sending to a closed peer never failed");
    }

    #[test]
    fn port_range_and_refused_connect() {
        let a = listen(Ipv4Addr::LOCALHOST, 0..=0, 0).unwrap();
        let taken = a.local_addr().unwrap().port();
        // The range's first port is taken: the next free one is used.
        let b = listen(Ipv4Addr::LOCALHOST, taken..=taken.saturating_add(50), 0).unwrap();
        assert_ne!(b.local_addr().unwrap().port(), taken);
        assert!(listen(Ipv4Addr::LOCALHOST, taken..=taken, 0).is_err());
        // Nobody listens on a port we just closed: the connection fails (at once or when the
        // socket becomes writable).
        let free = b.local_addr().unwrap().port();
        drop(b);
        match connect(
            Ipv4Addr::LOCALHOST,
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, free),
            0,
        ) {
            Err(_) => {}
            Ok((s, _)) => {
                let ep = Epoll::new().unwrap();
                ep.add(s.as_raw_fd(), OUT | ET, 1).unwrap();
                let mut evs = [NO_EVENT; 1];
                assert_eq!(ep.wait(&mut evs, 5000).unwrap(), 1);
                assert!(s.take_error().unwrap().is_some());
            }
        }
    }

    #[test]
    fn page_buffers_are_aligned_and_zeroed() {
        for len in [0, 1, 4096, 100_000] {
            let mut b = PageBuf::new(len).unwrap();
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % 4096, 0);
            assert!(b.iter().all(|&x| x == 0));
            b.fill(7);
            assert!(b.iter().all(|&x| x == 7));
        }
    }
}
