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

/// File operations a platform provides. Every call may block the calling thread (the engine's
/// lock is held: MPI-IO here is synchronous, see `docs/DESIGN.md`).
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
}
