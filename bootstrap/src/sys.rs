//! Thin safe wrappers over the few POSIX calls std does not offer.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It called exit with this status.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
    /// Its status was collected by someone else (waitpid says ECHILD).
    Unknown,
}

/// One entry of a `poll` set.
pub type PollFd = libc::pollfd;

/// A poll entry waiting for `events` on `fd`.
pub fn pollfd(fd: RawFd, events: libc::c_short) -> PollFd {
    PollFd {
        fd,
        events,
        revents: 0,
    }
}

/// Waits up to `timeout` for events on `fds`. An interrupting signal counts
/// as a timeout (the caller's loop looks at its signal pipe anyway).
pub fn poll(fds: &mut [PollFd], timeout: Duration) -> io::Result<()> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: fds is a valid, exclusively borrowed array of pollfd of the
    // given length for the duration of the call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        for f in fds.iter_mut() {
            f.revents = 0;
        }
    }
    Ok(())
}

/// Puts `fd` into non-blocking mode.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL only read and change the descriptor's status
    // flags; an invalid fd yields EBADF.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Clears close-on-exec on `fd`. Async-signal-safe: meant for the child
/// between fork and exec.
pub fn clear_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD only changes the descriptor flags of fd.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `sig` to the process group led by `pid`, or to `pid` alone when it
/// leads no group (it has not reached `setpgid` yet, or its group is gone).
/// Errors (the process is already gone) are ignored: the caller reaps.
pub fn signal_group(pid: i32, sig: i32) {
    if pid <= 0 {
        return;
    }
    // SAFETY: kill has no memory effects; pid > 0, so -pid names exactly one
    // process group and never "all processes".
    unsafe {
        if libc::kill(-pid, sig) != 0 {
            libc::kill(pid, sig);
        }
    }
}

/// Reaps child `pid` if it has exited, without blocking. Waiting for one
/// pid at a time (never -1) leaves other children of the process alone.
pub fn try_reap(pid: i32) -> Option<Exit> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid writes only into status.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return Some(if libc::WIFSIGNALED(status) {
                Exit::Signal(libc::WTERMSIG(status))
            } else {
                Exit::Code(libc::WEXITSTATUS(status))
            });
        }
        if rc < 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return Some(Exit::Unknown),
                _ => {}
            }
        }
        return None;
    }
}

/// Raises the soft limit on open descriptors to at least `needed` (capped at
/// the hard limit). Best effort: on failure the launch goes ahead and any
/// shortage shows up as a clear error when a descriptor cannot be created.
pub fn ensure_fd_limit(needed: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct we pass.
    unsafe {
        // `rlim_t` is 32 bits on 32-bit targets.
        let needed = libc::rlim_t::try_from(needed).unwrap_or(libc::rlim_t::MAX);
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= needed {
            return;
        }
        lim.rlim_cur = needed.min(lim.rlim_max);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

/// An address of one of this machine's network interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddr {
    /// The interface, e.g. `eth0`.
    pub name: String,
    /// Its address.
    pub addr: std::net::IpAddr,
    /// Whether it is a loopback interface.
    pub loopback: bool,
}

/// The IPv4 and IPv6 addresses of the interfaces that are up, in the
/// kernel's order. Empty if they cannot be listed.
pub fn interface_addresses() -> Vec<InterfaceAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs stores a list it allocated into `list`.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, which
        // stays valid until freeifaddrs below.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        let flags = ifa.ifa_flags as libc::c_int;
        if ifa.ifa_addr.is_null() || flags & libc::IFF_UP == 0 {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr whose
        // family says which larger struct it really is.
        let addr = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
                }
                libc::AF_INET6 => {
                    let sin6 = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                    IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
                }
                _ => continue,
            }
        };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        out.push(InterfaceAddr {
            name,
            addr,
            loopback: flags & libc::IFF_LOOPBACK != 0,
        });
    }
    // SAFETY: `list` came from getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// The conventional name of a signal, e.g. `SIGKILL`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// Takes an exclusive advisory lock (`flock`) on `file`, waiting for it; the
/// lock goes when the file is closed. (std's `File::lock` is newer than the
/// workspace's minimum Rust.)
pub fn lock_exclusive(file: &std::fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock only changes the lock state of the open file
        // description behind a descriptor that `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_interfaces() {
        let all = interface_addresses();
        assert!(
            all.iter().any(|a| a.loopback && a.addr.is_loopback()),
            "no loopback address among {all:?}"
        );
    }

    #[test]
    fn names_signals() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(200), "signal 200");
    }
}
