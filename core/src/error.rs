//! MPI error classes and the engine's error type.
//!
//! Error classes carry the numeric values of the MPICH ABI (see `include/mpi.h`), so the C layer
//! hands them out unchanged. An [`Error`] pairs a class with a [`Reason`]: the specific thing that
//! went wrong, with its values, printable without a heap.

use core::fmt;

/// An MPI error class. Values are MPICH's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorClass {
    /// MPI_ERR_BUFFER
    Buffer = 1,
    /// MPI_ERR_COUNT
    Count = 2,
    /// MPI_ERR_TYPE
    Type = 3,
    /// MPI_ERR_TAG
    Tag = 4,
    /// MPI_ERR_COMM
    Comm = 5,
    /// MPI_ERR_RANK
    Rank = 6,
    /// MPI_ERR_ROOT
    Root = 7,
    /// MPI_ERR_GROUP
    Group = 8,
    /// MPI_ERR_OP
    Op = 9,
    /// MPI_ERR_TOPOLOGY
    Topology = 10,
    /// MPI_ERR_DIMS
    Dims = 11,
    /// MPI_ERR_ARG
    Arg = 12,
    /// MPI_ERR_UNKNOWN
    Unknown = 13,
    /// MPI_ERR_TRUNCATE
    Truncate = 14,
    /// MPI_ERR_OTHER
    Other = 15,
    /// MPI_ERR_INTERN
    Intern = 16,
    /// MPI_ERR_IN_STATUS
    InStatus = 17,
    /// MPI_ERR_PENDING
    Pending = 18,
    /// MPI_ERR_REQUEST
    Request = 19,
    /// MPI_ERR_INFO
    Info = 28,
    /// MPI_ERR_INFO_KEY
    InfoKey = 29,
    /// MPI_ERR_INFO_VALUE
    InfoValue = 30,
    /// MPI_ERR_INFO_NOKEY
    InfoNokey = 31,
    /// MPI_ERR_NO_MEM
    NoMem = 34,
    /// MPI_ERR_WIN
    Win = 45,
    /// MPI_ERR_KEYVAL
    Keyval = 48,
    /// MPI_ERR_UNSUPPORTED_OPERATION
    UnsupportedOperation = 44,
    /// MPI_ERR_SIZE
    Size = 51,
    /// MPI_ERR_BASE
    Base = 46,
    /// MPI_ERR_LOCKTYPE
    Locktype = 47,
    /// MPI_ERR_RMA_CONFLICT
    RmaConflict = 49,
    /// MPI_ERR_RMA_SYNC
    RmaSync = 50,
    /// MPI_ERR_DISP
    Disp = 52,
    /// MPI_ERR_ASSERT
    Assert = 53,
    /// MPI_ERR_RMA_RANGE
    RmaRange = 55,
    /// MPI_ERR_RMA_ATTACH
    RmaAttach = 56,
    /// MPI_ERR_RMA_SHARED
    RmaShared = 57,
    /// MPI_ERR_RMA_FLAVOR
    RmaFlavor = 58,
    /// MPI_ERR_SESSION
    Session = 75,
    /// MPI_ERR_PROC_ABORTED
    ProcAborted = 76,
    /// MPI_ERR_VALUE_TOO_LARGE
    ValueTooLarge = 77,
    /// MPI_ERR_ACCESS
    Access = 20,
    /// MPI_ERR_AMODE
    Amode = 21,
    /// MPI_ERR_BAD_FILE
    BadFile = 22,
    /// MPI_ERR_CONVERSION
    Conversion = 23,
    /// MPI_ERR_DUP_DATAREP
    DupDatarep = 24,
    /// MPI_ERR_FILE_EXISTS
    FileExists = 25,
    /// MPI_ERR_FILE_IN_USE
    FileInUse = 26,
    /// MPI_ERR_FILE
    File = 27,
    /// MPI_ERR_IO
    Io = 32,
    /// MPI_ERR_NOT_SAME
    NotSame = 35,
    /// MPI_ERR_NO_SPACE
    NoSpace = 36,
    /// MPI_ERR_NO_SUCH_FILE
    NoSuchFile = 37,
    /// MPI_ERR_QUOTA
    Quota = 39,
    /// MPI_ERR_READ_ONLY
    ReadOnly = 40,
    /// MPI_ERR_UNSUPPORTED_DATAREP
    UnsupportedDatarep = 43,
    /// MPI_ERR_NAME
    Name = 33,
    /// MPI_ERR_PORT
    Port = 38,
    /// MPI_ERR_SERVICE
    Service = 41,
    /// MPI_ERR_SPAWN
    Spawn = 42,
}

impl ErrorClass {
    /// The class's name as the standard spells it.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorClass::Buffer => "MPI_ERR_BUFFER",
            ErrorClass::Count => "MPI_ERR_COUNT",
            ErrorClass::Type => "MPI_ERR_TYPE",
            ErrorClass::Tag => "MPI_ERR_TAG",
            ErrorClass::Comm => "MPI_ERR_COMM",
            ErrorClass::Rank => "MPI_ERR_RANK",
            ErrorClass::Root => "MPI_ERR_ROOT",
            ErrorClass::Group => "MPI_ERR_GROUP",
            ErrorClass::Op => "MPI_ERR_OP",
            ErrorClass::Topology => "MPI_ERR_TOPOLOGY",
            ErrorClass::Dims => "MPI_ERR_DIMS",
            ErrorClass::Arg => "MPI_ERR_ARG",
            ErrorClass::Unknown => "MPI_ERR_UNKNOWN",
            ErrorClass::Truncate => "MPI_ERR_TRUNCATE",
            ErrorClass::Other => "MPI_ERR_OTHER",
            ErrorClass::Intern => "MPI_ERR_INTERN",
            ErrorClass::InStatus => "MPI_ERR_IN_STATUS",
            ErrorClass::Pending => "MPI_ERR_PENDING",
            ErrorClass::Request => "MPI_ERR_REQUEST",
            ErrorClass::Info => "MPI_ERR_INFO",
            ErrorClass::InfoKey => "MPI_ERR_INFO_KEY",
            ErrorClass::InfoValue => "MPI_ERR_INFO_VALUE",
            ErrorClass::InfoNokey => "MPI_ERR_INFO_NOKEY",
            ErrorClass::NoMem => "MPI_ERR_NO_MEM",
            ErrorClass::Win => "MPI_ERR_WIN",
            ErrorClass::Keyval => "MPI_ERR_KEYVAL",
            ErrorClass::UnsupportedOperation => "MPI_ERR_UNSUPPORTED_OPERATION",
            ErrorClass::Size => "MPI_ERR_SIZE",
            ErrorClass::Base => "MPI_ERR_BASE",
            ErrorClass::Locktype => "MPI_ERR_LOCKTYPE",
            ErrorClass::RmaConflict => "MPI_ERR_RMA_CONFLICT",
            ErrorClass::RmaSync => "MPI_ERR_RMA_SYNC",
            ErrorClass::Disp => "MPI_ERR_DISP",
            ErrorClass::Assert => "MPI_ERR_ASSERT",
            ErrorClass::RmaRange => "MPI_ERR_RMA_RANGE",
            ErrorClass::RmaAttach => "MPI_ERR_RMA_ATTACH",
            ErrorClass::RmaShared => "MPI_ERR_RMA_SHARED",
            ErrorClass::RmaFlavor => "MPI_ERR_RMA_FLAVOR",
            ErrorClass::Session => "MPI_ERR_SESSION",
            ErrorClass::ProcAborted => "MPI_ERR_PROC_ABORTED",
            ErrorClass::ValueTooLarge => "MPI_ERR_VALUE_TOO_LARGE",
            ErrorClass::Access => "MPI_ERR_ACCESS",
            ErrorClass::Amode => "MPI_ERR_AMODE",
            ErrorClass::BadFile => "MPI_ERR_BAD_FILE",
            ErrorClass::Conversion => "MPI_ERR_CONVERSION",
            ErrorClass::DupDatarep => "MPI_ERR_DUP_DATAREP",
            ErrorClass::FileExists => "MPI_ERR_FILE_EXISTS",
            ErrorClass::FileInUse => "MPI_ERR_FILE_IN_USE",
            ErrorClass::File => "MPI_ERR_FILE",
            ErrorClass::Io => "MPI_ERR_IO",
            ErrorClass::NotSame => "MPI_ERR_NOT_SAME",
            ErrorClass::NoSpace => "MPI_ERR_NO_SPACE",
            ErrorClass::NoSuchFile => "MPI_ERR_NO_SUCH_FILE",
            ErrorClass::Quota => "MPI_ERR_QUOTA",
            ErrorClass::ReadOnly => "MPI_ERR_READ_ONLY",
            ErrorClass::UnsupportedDatarep => "MPI_ERR_UNSUPPORTED_DATAREP",
            ErrorClass::Name => "MPI_ERR_NAME",
            ErrorClass::Port => "MPI_ERR_PORT",
            ErrorClass::Service => "MPI_ERR_SERVICE",
            ErrorClass::Spawn => "MPI_ERR_SPAWN",
        }
    }

    /// The standard's one-line description of the class.
    pub const fn description(self) -> &'static str {
        match self {
            ErrorClass::Buffer => "invalid buffer pointer",
            ErrorClass::Count => "invalid count argument",
            ErrorClass::Type => "invalid datatype argument",
            ErrorClass::Tag => "invalid tag argument",
            ErrorClass::Comm => "invalid communicator",
            ErrorClass::Rank => "invalid rank",
            ErrorClass::Root => "invalid root",
            ErrorClass::Group => "invalid group",
            ErrorClass::Op => "invalid operation",
            ErrorClass::Topology => "invalid topology",
            ErrorClass::Dims => "invalid dimension argument",
            ErrorClass::Arg => "invalid argument",
            ErrorClass::Unknown => "unknown error",
            ErrorClass::Truncate => "message truncated on receive",
            ErrorClass::Other => "other error",
            ErrorClass::Intern => "internal error",
            ErrorClass::InStatus => "error code is in status",
            ErrorClass::Pending => "pending request",
            ErrorClass::Request => "invalid request",
            ErrorClass::Info => "invalid info object",
            ErrorClass::InfoKey => "invalid info key",
            ErrorClass::InfoValue => "invalid info value",
            ErrorClass::InfoNokey => "info key not set",
            ErrorClass::NoMem => "out of memory",
            ErrorClass::Win => "invalid window",
            ErrorClass::Keyval => "invalid attribute key",
            ErrorClass::UnsupportedOperation => "operation not supported",
            ErrorClass::Size => "invalid size argument",
            ErrorClass::Base => "invalid base address",
            ErrorClass::Locktype => "invalid lock type",
            ErrorClass::RmaConflict => "conflicting accesses to a window",
            ErrorClass::RmaSync => "wrong synchronization of RMA calls",
            ErrorClass::Disp => "invalid displacement",
            ErrorClass::Assert => "invalid assertion",
            ErrorClass::RmaRange => "target memory is outside the window",
            ErrorClass::RmaAttach => "memory cannot be attached",
            ErrorClass::RmaShared => "memory cannot be shared",
            ErrorClass::RmaFlavor => "wrong window flavor",
            ErrorClass::Session => "invalid session",
            ErrorClass::ProcAborted => "peer process aborted",
            ErrorClass::ValueTooLarge => "value is too large to store",
            ErrorClass::Access => "permission denied",
            ErrorClass::Amode => "invalid file access mode",
            ErrorClass::BadFile => "invalid file name",
            ErrorClass::Conversion => "a data representation conversion failed",
            ErrorClass::DupDatarep => "a data representation of this name is already registered",
            ErrorClass::FileExists => "file exists",
            ErrorClass::FileInUse => "file is in use",
            ErrorClass::File => "invalid file handle",
            ErrorClass::Io => "I/O error",
            ErrorClass::NotSame => "collective arguments differ between processes",
            ErrorClass::NoSpace => "no space left on the device",
            ErrorClass::NoSuchFile => "file does not exist",
            ErrorClass::Quota => "quota exceeded",
            ErrorClass::ReadOnly => "read-only file or file system",
            ErrorClass::UnsupportedDatarep => "unsupported data representation",
            ErrorClass::Name => "service name not published",
            ErrorClass::Port => "invalid port name",
            ErrorClass::Service => "invalid service name (not published, or published already)",
            ErrorClass::Spawn => "processes could not be spawned",
        }
    }

    /// The class for an MPICH error-class value, if it is one stormpi produces.
    pub const fn from_code(code: i32) -> Option<ErrorClass> {
        Some(match code {
            1 => ErrorClass::Buffer,
            2 => ErrorClass::Count,
            3 => ErrorClass::Type,
            4 => ErrorClass::Tag,
            5 => ErrorClass::Comm,
            6 => ErrorClass::Rank,
            7 => ErrorClass::Root,
            8 => ErrorClass::Group,
            9 => ErrorClass::Op,
            10 => ErrorClass::Topology,
            11 => ErrorClass::Dims,
            12 => ErrorClass::Arg,
            13 => ErrorClass::Unknown,
            14 => ErrorClass::Truncate,
            15 => ErrorClass::Other,
            16 => ErrorClass::Intern,
            17 => ErrorClass::InStatus,
            18 => ErrorClass::Pending,
            19 => ErrorClass::Request,
            28 => ErrorClass::Info,
            29 => ErrorClass::InfoKey,
            30 => ErrorClass::InfoValue,
            31 => ErrorClass::InfoNokey,
            34 => ErrorClass::NoMem,
            45 => ErrorClass::Win,
            48 => ErrorClass::Keyval,
            44 => ErrorClass::UnsupportedOperation,
            51 => ErrorClass::Size,
            46 => ErrorClass::Base,
            47 => ErrorClass::Locktype,
            49 => ErrorClass::RmaConflict,
            50 => ErrorClass::RmaSync,
            52 => ErrorClass::Disp,
            53 => ErrorClass::Assert,
            55 => ErrorClass::RmaRange,
            56 => ErrorClass::RmaAttach,
            57 => ErrorClass::RmaShared,
            58 => ErrorClass::RmaFlavor,
            75 => ErrorClass::Session,
            76 => ErrorClass::ProcAborted,
            77 => ErrorClass::ValueTooLarge,
            20 => ErrorClass::Access,
            21 => ErrorClass::Amode,
            22 => ErrorClass::BadFile,
            23 => ErrorClass::Conversion,
            24 => ErrorClass::DupDatarep,
            25 => ErrorClass::FileExists,
            26 => ErrorClass::FileInUse,
            27 => ErrorClass::File,
            32 => ErrorClass::Io,
            35 => ErrorClass::NotSame,
            36 => ErrorClass::NoSpace,
            37 => ErrorClass::NoSuchFile,
            39 => ErrorClass::Quota,
            40 => ErrorClass::ReadOnly,
            43 => ErrorClass::UnsupportedDatarep,
            33 => ErrorClass::Name,
            38 => ErrorClass::Port,
            41 => ErrorClass::Service,
            42 => ErrorClass::Spawn,
            _ => return None,
        })
    }

    /// The numeric value (MPICH ABI).
    pub const fn code(self) -> i32 {
        self as i32
    }
}

/// What exactly went wrong, with the values involved (field names say what each value is).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A rank outside `0..size` (and not a permitted wildcard).
    RankOutOfRange { rank: i32, size: u32 },
    /// A tag below zero or above the tag upper bound.
    TagOutOfRange { tag: i32, ub: i32 },
    /// A negative element count.
    NegativeCount { count: i64 },
    /// A byte count that does not fit the address space or the wire.
    CountTooLarge,
    /// A communicator handle that names no live communicator.
    InvalidComm,
    /// A datatype handle that names no datatype.
    InvalidDatatype,
    /// A null buffer with a non-zero count.
    NullBuffer,
    /// A request handle that names no live request.
    InvalidRequest,
    /// A receive buffer smaller than the message.
    Truncated {
        message_bytes: u64,
        buffer_bytes: u64,
    },
    /// A fixed-capacity resource ran out.
    Exhausted {
        what: &'static str,
        capacity: u32,
        param: &'static str,
    },
    /// A pool or table could not grow: the engine's memory would pass its bound.
    MemoryBound {
        what: &'static str,
        max: usize,
        param: &'static str,
    },
    /// A pool or table could not grow: the platform has no more memory to grant.
    PlatformOutOfMemory { what: &'static str },
    /// The memory the platform handed over is too small for the configured capacities.
    MemoryTooSmall { needed: usize, given: usize },
    /// No BTL can reach a process.
    Unreachable { proc: u32 },
    /// The function or mode is not implemented yet.
    Unsupported { what: &'static str },
    /// An invalid argument, described.
    BadArgument { what: &'static str },
    /// The runtime (launcher, PMI) failed.
    Runtime { what: &'static str },
    /// A transport failed.
    Transport {
        btl: &'static str,
        what: &'static str,
    },
    /// A parameter value could not be parsed or is out of range.
    BadParam {
        name: &'static str,
        allowed: Allowed,
    },
    /// MPI is not initialised, or already finalised.
    NotInitialized,
    /// One of stormpi's own invariants does not hold: a bug in stormpi, reported through the
    /// error handler rather than by aborting inside the library.
    Internal { what: &'static str },
}

/// The values a parameter accepts, named when another is refused (so that a user who raised a
/// limit too far learns how far it goes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// An integer in `min..=max`.
    Range {
        /// The smallest value accepted.
        min: i64,
        /// The largest value accepted.
        max: i64,
    },
    /// Described in words.
    Text(&'static str),
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Allowed::Range { min, max } => write!(f, "an integer from {min} to {max}"),
            Allowed::Text(t) => f.write_str(t),
        }
    }
}

/// An MPI error: its class and the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// The class the standard names for this error.
    pub class: ErrorClass,
    /// What went wrong.
    pub reason: Reason,
}

impl Error {
    /// An error of `class` for `reason`.
    pub const fn new(class: ErrorClass, reason: Reason) -> Error {
        Error { class, reason }
    }

    /// An `MPI_ERR_UNSUPPORTED_OPERATION` error naming what is not supported.
    pub const fn unsupported(what: &'static str) -> Error {
        Error::new(
            ErrorClass::UnsupportedOperation,
            Reason::Unsupported { what },
        )
    }

    /// An `MPI_ERR_ARG` error.
    pub const fn bad_arg(what: &'static str) -> Error {
        Error::new(ErrorClass::Arg, Reason::BadArgument { what })
    }

    /// An `MPI_ERR_INTERN` error: an invariant of stormpi's own does not hold (`what` says which).
    pub const fn internal(what: &'static str) -> Error {
        Error::new(ErrorClass::Intern, Reason::Internal { what })
    }

    /// An exhausted fixed-capacity resource.
    pub const fn exhausted(what: &'static str, capacity: u32, param: &'static str) -> Error {
        Error::new(
            ErrorClass::NoMem,
            Reason::Exhausted {
                what,
                capacity,
                param,
            },
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::RankOutOfRange { rank, size } => {
                write!(f, "rank {rank} is out of range (communicator size {size})")
            }
            Reason::TagOutOfRange { tag, ub } => {
                write!(f, "tag {tag} is out of range (0..={ub})")
            }
            Reason::NegativeCount { count } => write!(f, "count {count} is negative"),
            Reason::CountTooLarge => f.write_str("message size does not fit in memory"),
            Reason::InvalidComm => f.write_str("the communicator handle is not a live communicator"),
            Reason::InvalidDatatype => f.write_str("the datatype handle is not a datatype"),
            Reason::NullBuffer => f.write_str("buffer is NULL but count is not zero"),
            Reason::InvalidRequest => f.write_str("the request handle is not a live request"),
            Reason::Truncated { message_bytes, buffer_bytes } => write!(
                f,
                "message of {message_bytes} bytes truncated to the {buffer_bytes}-byte receive buffer"
            ),
            Reason::Exhausted { what, capacity, param } => write!(
                f,
                "{what} exhausted (capacity {capacity}); raise the parameter {param}"
            ),
            Reason::MemoryBound { what, max, param } => write!(
                f,
                "{what} cannot grow: the engine's memory would pass its bound of {max} bytes; \
                 raise the parameter {param}"
            ),
            Reason::PlatformOutOfMemory { what } => write!(
                f,
                "{what} cannot grow: the platform has no more memory to grant (within \
                 mpi_memory_max)"
            ),
            Reason::MemoryTooSmall { needed, given } => write!(
                f,
                "engine needs {needed} bytes of memory for its pools but was given {given}"
            ),
            Reason::Unreachable { proc } => write!(f, "no transport can reach process {proc}"),
            Reason::Unsupported { what } => write!(f, "{what} is not supported by stormpi yet"),
            Reason::BadArgument { what } => f.write_str(what),
            Reason::Runtime { what } => write!(f, "runtime failure: {what}"),
            Reason::Transport { btl, what } => write!(f, "transport {btl} failed: {what}"),
            Reason::BadParam { name, allowed } => {
                write!(f, "parameter {name} has an invalid value; allowed: {allowed}")
            }
            Reason::NotInitialized => f.write_str("MPI is not initialized (or already finalized)"),
            Reason::Internal { what } => {
                write!(f, "internal error in stormpi: {what} (please report it)")
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class.name(), self.reason)
    }
}

/// The engine's result type.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 0..100 {
            if let Some(class) = ErrorClass::from_code(code) {
                assert_eq!(class.code(), code);
            }
        }
        assert_eq!(ErrorClass::Truncate.code(), 14);
        assert_eq!(ErrorClass::UnsupportedOperation.code(), 44);
    }

    #[test]
    fn display_names_class_and_values() {
        extern crate std;
        use std::string::ToString;
        let e = Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange { rank: 7, size: 4 },
        );
        assert_eq!(
            e.to_string(),
            "MPI_ERR_RANK: rank 7 is out of range (communicator size 4)"
        );
    }
}
