//! What the core needs from a file system: positional reads and writes on open files, their
//! size, byte-range locks, and creating and deleting files by name.
//!
//! The core is `no_std`, so the platform provides this ([`crate::platform::Platform::file_system`]);
//! on Linux it is POSIX (`pread`/`pwrite`, `fcntl` locks). A platform without files returns
//! `None` there and every `MPI_File_open` answers `MPI_ERR_UNSUPPORTED_OPERATION`.

use crate::error::{Error, ErrorClass, Reason};

/// An open file, as the platform numbers it (a descriptor on POSIX).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fd(pub i64);

/// How to open a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenHow {
    /// Reading is allowed.
    pub read: bool,
    /// Writing is allowed.
    pub write: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if the file exists (with `create`).
    pub exclusive: bool,
}

/// Why a file-system call failed, in the classes MPI distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoError {
    /// No such file or directory.
    NotFound,
    /// The file exists (an exclusive create).
    Exists,
    /// Permission denied.
    Access,
    /// The file system is read-only.
    ReadOnly,
    /// No space left.
    NoSpace,
    /// Quota exceeded.
    Quota,
    /// The name is not usable (too long, a directory, empty).
    BadName,
    /// The file is busy.
    InUse,
    /// The platform cannot do this.
    Unsupported,
    /// Any other failure, with the platform's error number.
    Other(i32),
}

impl IoError {
    /// The MPI error for this failure while doing `what`.
    pub fn to_error(self, what: &'static str) -> Error {
        let class = match self {
            IoError::NotFound => ErrorClass::NoSuchFile,
            IoError::Exists => ErrorClass::FileExists,
            IoError::Access => ErrorClass::Access,
            IoError::ReadOnly => ErrorClass::ReadOnly,
            IoError::NoSpace => ErrorClass::NoSpace,
            IoError::Quota => ErrorClass::Quota,
            IoError::BadName => ErrorClass::BadFile,
            IoError::InUse => ErrorClass::FileInUse,
            IoError::Unsupported => ErrorClass::UnsupportedOperation,
            IoError::Other(_) => ErrorClass::Io,
        };
        Error::new(class, Reason::BadArgument { what })
    }

    /// The error class as a number (for agreeing on an outcome across processes).
    pub fn class_code(self) -> i32 {
        self.to_error("").class.code()
    }
}

/// One piece of a background transfer: `len` bytes at file offset `off`. The pieces of a
/// transfer take its buffer's bytes one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// File offset.
    pub off: u64,
    /// Bytes.
    pub len: u64,
}

/// A background transfer the platform is doing ([`FileSystem::submit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket(pub u64);

/// File operations a platform provides. Every call but [`FileSystem::submit`]'s transfers may
/// block the calling thread (the engine's lock is held; see `docs/DESIGN.md`).
pub trait FileSystem: Sync {
    /// Opens (or creates) the file named by `path` (bytes without a terminating NUL).
    fn open(&self, path: &[u8], how: OpenHow) -> Result<Fd, IoError>;
    /// Closes `fd`.
    fn close(&self, fd: Fd) -> Result<(), IoError>;
    /// Reads into `buf` from `offset`; how many bytes (fewer only at the end of the file).
    fn read_at(&self, fd: Fd, buf: &mut [u8], offset: u64) -> Result<usize, IoError>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, fd: Fd, buf: &[u8], offset: u64) -> Result<(), IoError>;
    /// The file's size in bytes.
    fn size(&self, fd: Fd) -> Result<u64, IoError>;
    /// Makes the file `size` bytes long (cutting or extending with zeros).
    fn truncate(&self, fd: Fd, size: u64) -> Result<(), IoError>;
    /// Makes the file at least `size` bytes long with its storage allocated.
    fn preallocate(&self, fd: Fd, size: u64) -> Result<(), IoError>;
    /// Flushes the file's data to its storage.
    fn sync(&self, fd: Fd) -> Result<(), IoError>;
    /// Deletes the file named by `path`.
    fn delete(&self, path: &[u8]) -> Result<(), IoError>;
    /// Waits for and takes a lock on bytes `offset..offset + len` (0: to the end of any size),
    /// `exclusive` for writing, shared for reading; processes of any host sharing the file
    /// system exclude each other.
    fn lock(&self, fd: Fd, offset: u64, len: u64, exclusive: bool) -> Result<(), IoError>;
    /// Lets go of a lock taken with [`FileSystem::lock`].
    fn unlock(&self, fd: Fd, offset: u64, len: u64) -> Result<(), IoError>;

    /// Starts moving the bytes of `runs` between the file and `buf` (writing the file when
    /// `write`) on a thread of the platform's, so that the transfer goes on while the process
    /// computes; transfers started by one process run in the order they were started. `None`
    /// when the platform has no background transfers: the caller moves the bytes itself.
    ///
    /// # Safety
    /// `buf` is valid (for writing, when reading the file) for the runs' total length until
    /// [`FileSystem::poll`] reports the transfer over.
    unsafe fn submit(
        &self,
        fd: Fd,
        write: bool,
        buf: *mut u8,
        runs: &[Run],
    ) -> Option<Result<Ticket, IoError>> {
        let _ = (fd, write, buf, runs);
        None
    }

    /// The outcome of background transfer `t` once it is over — the bytes moved (a read stops
    /// at the end of the file) — after which the ticket is spent; `None` while it runs.
    fn poll(&self, t: Ticket) -> Option<Result<u64, IoError>> {
        let _ = t;
        Some(Err(IoError::Unsupported))
    }
}
