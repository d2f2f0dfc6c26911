//! The POSIX file system for MPI-IO: `open`, `pread`/`pwrite`, `ftruncate`, `posix_fallocate`,
//! `fsync`, `unlink`, and `fcntl` record locks (which NFS and parallel file systems honour across
//! hosts, as ROMIO relies on); non-blocking accesses in the background where the platform adds a [`Background`].
//! Reads and writes whose kernel copy would alias go through a staging buffer ([`fs_staged`]).

use stormpi_core::io::fs::{Fd, FileSystem, IoError, OpenHow, Run, Ticket};

use crate::fs_staged;

/// Background transfers a platform adds to the POSIX calls (see [`FileSystem::submit`]).
pub struct Background {
    /// Queues a transfer; `None` when it cannot.
    pub submit: fn(Fd, bool, *mut u8, &[Run]) -> Option<Ticket>,
    /// A transfer's outcome once it is over.
    pub poll: fn(Ticket) -> Option<Result<u64, IoError>>,
}

/// The POSIX file system.
pub struct PosixFs {
    background: Option<Background>,
}

impl PosixFs {
    /// The file system, with `background` transfers if the platform has them.
    pub const fn new(background: Option<Background>) -> PosixFs {
        PosixFs { background }
    }
}

/// The POSIX calls alone: every access completes in the call that makes it (the node build:
/// its compute nodes run no threads of the library's).
pub static POSIX_FS: PosixFs = PosixFs::new(None);

fn last_error() -> IoError {
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    match errno {
        libc::ENOENT => IoError::NotFound,
        libc::EEXIST => IoError::Exists,
        libc::EACCES | libc::EPERM => IoError::Access,
        libc::EROFS => IoError::ReadOnly,
        libc::ENOSPC => IoError::NoSpace,
        libc::EDQUOT => IoError::Quota,
        libc::ENAMETOOLONG | libc::EISDIR | libc::ENOTDIR | libc::EINVAL => IoError::BadName,
        libc::ETXTBSY | libc::EBUSY => IoError::InUse,
        libc::EOPNOTSUPP | libc::ENOSYS => IoError::Unsupported,
        e => IoError::Other(e),
    }
}

/// `path` as a NUL-terminated string.
fn c_path(path: &[u8]) -> Result<std::ffi::CString, IoError> {
    std::ffi::CString::new(path).map_err(|_| IoError::BadName)
}

fn fd(f: Fd) -> libc::c_int {
    f.0 as libc::c_int
}

/// Retries a call interrupted by a signal.
fn retry(mut f: impl FnMut() -> isize) -> Result<usize, IoError> {
    loop {
        let r = f();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = last_error();
        if e != IoError::Other(libc::EINTR) {
            return Err(e);
        }
    }
}

fn lock_op(f: Fd, offset: u64, len: u64, kind: libc::c_int, wait: bool) -> Result<(), IoError> {
    // SAFETY: a zeroed flock is a valid value; every field used is set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = offset as libc::off_t;
    fl.l_len = len as libc::off_t;
    let cmd = if wait { libc::F_SETLKW } else { libc::F_SETLK };
    retry(|| {
        // SAFETY: fcntl with a lock command and a pointer to a live flock.
        unsafe { libc::fcntl(fd(f), cmd, &mut fl as *mut libc::flock) as isize }
    })
    .map(|_| ())
}

impl FileSystem for PosixFs {
    fn open(&self, path: &[u8], how: OpenHow) -> Result<Fd, IoError> {
        let p = c_path(path)?;
        let mut flags = match (how.read, how.write) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        } | libc::O_CLOEXEC;
        if how.create {
            flags |= libc::O_CREAT;
        }
        if how.exclusive {
            flags |= libc::O_EXCL;
        }
        let r = retry(|| {
            // SAFETY: a NUL-terminated path; the mode is used only with O_CREAT.
            unsafe { libc::open(p.as_ptr(), flags, 0o666 as libc::c_uint) as isize }
        })?;
        Ok(Fd(r as i64))
    }

    fn close(&self, f: Fd) -> Result<(), IoError> {
        // SAFETY: closing a descriptor this file system opened; it is not used afterwards.
        match unsafe { libc::close(fd(f)) } {
            0 => Ok(()),
            _ => Err(last_error()),
        }
    }

    fn read_at(&self, f: Fd, buf: &mut [u8], offset: u64) -> Result<usize, IoError> {
        if fs_staged::read_aliases(buf.as_ptr() as usize, offset, buf.len()) {
            let staged = fs_staged::read(buf, offset, |part, at| {
                retry(|| {
                    // SAFETY: `part` is writable for its length.
                    unsafe {
                        libc::pread(
                            fd(f),
                            part.as_mut_ptr().cast(),
                            part.len(),
                            at as libc::off_t,
                        )
                    }
                })
            });
            if let Some(r) = staged {
                return r;
            }
        }
        let mut done = 0;
        while done < buf.len() {
            let n = retry(|| {
                // SAFETY: the rest of `buf` is writable for its length.
                unsafe {
                    libc::pread(
                        fd(f),
                        buf[done..].as_mut_ptr().cast(),
                        buf.len() - done,
                        (offset + done as u64) as libc::off_t,
                    )
                }
            })?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }

    fn write_at(&self, f: Fd, buf: &[u8], offset: u64) -> Result<(), IoError> {
        if fs_staged::write_aliases(buf.as_ptr() as usize, offset, buf.len()) {
            let staged = fs_staged::write(buf, offset, |part, at| {
                let n = retry(|| {
                    // SAFETY: `part` is readable for its length.
                    unsafe {
                        libc::pwrite(fd(f), part.as_ptr().cast(), part.len(), at as libc::off_t)
                    }
                })?;
                if n == 0 {
                    return Err(IoError::NoSpace);
                }
                Ok(n)
            });
            if let Some(r) = staged {
                return r;
            }
        }
        let mut done = 0;
        while done < buf.len() {
            let n = retry(|| {
                // SAFETY: the rest of `buf` is readable for its length.
                unsafe {
                    libc::pwrite(
                        fd(f),
                        buf[done..].as_ptr().cast(),
                        buf.len() - done,
                        (offset + done as u64) as libc::off_t,
                    )
                }
            })?;
            if n == 0 {
                return Err(IoError::NoSpace);
            }
            done += n;
        }
        Ok(())
    }

    fn size(&self, f: Fd) -> Result<u64, IoError> {
        // SAFETY: a zeroed stat is a valid buffer for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on an open descriptor with a live buffer.
        match unsafe { libc::fstat(fd(f), &mut st) } {
            0 => Ok(st.st_size as u64),
            _ => Err(last_error()),
        }
    }

    fn truncate(&self, f: Fd, size: u64) -> Result<(), IoError> {
        retry(|| {
            // SAFETY: ftruncate on an open descriptor.
            unsafe { libc::ftruncate(fd(f), size as libc::off_t) as isize }
        })
        .map(|_| ())
    }

    fn preallocate(&self, f: Fd, size: u64) -> Result<(), IoError> {
        if size == 0 {
            return Ok(());
        }
        // SAFETY: posix_fallocate on an open descriptor; it returns the error number.
        match unsafe { libc::posix_fallocate(fd(f), 0, size as libc::off_t) } {
            0 => Ok(()),
            libc::EOPNOTSUPP | libc::EINVAL => {
                // A file system without fallocate: extend by truncation if shorter.
                if self.size(f)? < size {
                    self.truncate(f, size)?;
                }
                Ok(())
            }
            libc::ENOSPC => Err(IoError::NoSpace),
            e => Err(IoError::Other(e)),
        }
    }

    fn sync(&self, f: Fd) -> Result<(), IoError> {
        // SAFETY: fsync on an open descriptor.
        match unsafe { libc::fsync(fd(f)) } {
            0 => Ok(()),
            _ => Err(last_error()),
        }
    }

    fn delete(&self, path: &[u8]) -> Result<(), IoError> {
        let p = c_path(path)?;
        // SAFETY: a NUL-terminated path.
        match unsafe { libc::unlink(p.as_ptr()) } {
            0 => Ok(()),
            _ => Err(last_error()),
        }
    }

    fn lock(&self, f: Fd, offset: u64, len: u64, exclusive: bool) -> Result<(), IoError> {
        let kind = if exclusive {
            libc::F_WRLCK
        } else {
            libc::F_RDLCK
        };
        lock_op(f, offset, len, kind, true)
    }

    fn unlock(&self, f: Fd, offset: u64, len: u64) -> Result<(), IoError> {
        lock_op(f, offset, len, libc::F_UNLCK, false)
    }

    unsafe fn submit(
        &self,
        f: Fd,
        write: bool,
        buf: *mut u8,
        runs: &[Run],
    ) -> Option<Result<Ticket, IoError>> {
        self.background
            .as_ref()
            .and_then(|b| (b.submit)(f, write, buf, runs))
            .map(Ok)
    }

    fn poll(&self, t: Ticket) -> Option<Result<u64, IoError>> {
        match &self.background {
            Some(b) => (b.poll)(t),
            None => Some(Err(IoError::Unsupported)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> Vec<u8> {
        let p = std::env::temp_dir().join(format!("stormpi-fs-{}-{name}", std::process::id()));
        p.into_os_string().into_encoded_bytes()
    }

    #[test]
    fn positional_io_size_and_delete_work_on_a_real_file() {
        let fs = &POSIX_FS;
        let p = temp("basic");
        let how = OpenHow {
            read: true,
            write: true,
            create: true,
            exclusive: true,
        };
        let f = fs.open(&p, how).unwrap();
        assert_eq!(fs.open(&p, how), Err(IoError::Exists));
        fs.write_at(f, b"world", 6).unwrap();
        fs.write_at(f, b"hello ", 0).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(fs.read_at(f, &mut b, 0).unwrap(), 11);
        assert_eq!(&b[..11], b"hello world");
        assert_eq!(fs.size(f).unwrap(), 11);
        fs.truncate(f, 5).unwrap();
        assert_eq!(fs.size(f).unwrap(), 5);
        fs.preallocate(f, 4096).unwrap();
        assert_eq!(fs.size(f).unwrap(), 4096);
        fs.lock(f, 0, 8, true).unwrap();
        fs.unlock(f, 0, 8).unwrap();
        fs.sync(f).unwrap();
        fs.close(f).unwrap();
        fs.delete(&p).unwrap();
        assert_eq!(fs.delete(&p), Err(IoError::NotFound));
        let ro = OpenHow {
            read: true,
            ..OpenHow::default()
        };
        assert_eq!(fs.open(&p, ro), Err(IoError::NotFound));
    }

    #[test]
    fn transfers_at_every_alignment_keep_their_bytes() {
        let fs = &POSIX_FS;
        let p = temp("aligned");
        let how = OpenHow {
            read: true,
            write: true,
            create: true,
            exclusive: true,
        };
        let f = fs.open(&p, how).unwrap();
        // Lengths below, at and across the staging threshold and the stage; memory at distances
        // from the file offset inside the slow 1-31 bytes (staged) and outside (straight).
        let lens = [100usize, 300, 4096, 5000, 131072, 131072 * 2 + 4097];
        let mut mem = vec![0u8; 300_000 + 8192];
        let mut back = vec![0u8; 300_000 + 8192];
        let page_in = |v: &Vec<u8>| (4096 - v.as_ptr() as usize % 4096) % 4096;
        let mut k = 0u8;
        for len in lens {
            for off in [0u64, 100, 4096 * 3 + 4095] {
                for d in [0usize, 1, 16, 31, 32, 4080] {
                    k = k.wrapping_add(1);
                    // A write from `d` bytes before the offset (modulo the page), a read into
                    // `d` bytes past it.
                    let at = page_in(&mem) + (off as usize + 4096 - d) % 4096;
                    for (i, b) in mem[at..at + len].iter_mut().enumerate() {
                        *b = (i as u8).wrapping_mul(31).wrapping_add(k);
                    }
                    fs.write_at(f, &mem[at..at + len], off).unwrap();
                    let rat = page_in(&back) + (off as usize + d) % 4096;
                    back[rat..rat + len].fill(0);
                    assert_eq!(fs.read_at(f, &mut back[rat..rat + len], off).unwrap(), len);
                    assert!(
                        back[rat..rat + len] == mem[at..at + len],
                        "{len} at {off}, {d}"
                    );
                }
            }
        }
        // A staged read across the end of the file returns what is there.
        let size = fs.size(f).unwrap();
        let rb = back.as_ptr() as usize;
        let rat = (4096 - rb % 4096) % 4096 + 16;
        let got = fs
            .read_at(f, &mut back[rat..rat + 8192], size - 4096)
            .unwrap();
        assert_eq!(got, 4096);
        fs.close(f).unwrap();
        fs.delete(&p).unwrap();
    }
}
