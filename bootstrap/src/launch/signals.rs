//! Signals delivered to stormrun, turned into bytes on a pipe (the self-pipe
//! trick) so that the poll loop sees them as ordinary readable events.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// Write end of the pipe, for the handler. -1 until installed.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = WAKE_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let byte = sig as u8;
    // SAFETY: write and errno access are async-signal-safe; the buffer is a
    // local byte. errno is restored so the interrupted code does not see ours.
    unsafe {
        let errno = *libc::__errno_location();
        libc::write(fd, (&byte as *const u8).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// Receives the signals it was installed for as readable bytes.
#[derive(Debug)]
pub struct SignalPipe {
    read: File,
}

impl SignalPipe {
    /// Routes `signals` to a new pipe. Call once per process.
    pub fn install(signals: &[i32]) -> io::Result<SignalPipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into fds.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fds[0] was just created by pipe2 and is owned by nobody else.
        let read = unsafe { File::from_raw_fd(fds[0]) };
        // The write end stays open for the life of the process: the handler
        // may run at any time.
        WAKE_FD.store(fds[1], Ordering::Relaxed);
        for &sig in signals {
            // SAFETY: sigaction reads the fully initialised struct we pass;
            // the handler only does async-signal-safe work.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART;
                if sig == libc::SIGCHLD {
                    action.sa_flags |= libc::SA_NOCLDSTOP;
                }
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(sig, &action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(SignalPipe { read })
    }

    /// The descriptor to poll for readability.
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The signals received since the last call, in order.
    pub fn drain(&mut self) -> Vec<i32> {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match self.read.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend(buf[..n].iter().map(|&b| i32::from(b))),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        got
    }
}
