//! Errors of the PMI client.

use std::fmt;
use std::io;

use super::names::NameFault;

/// Everything that can go wrong talking to a PMI server. Malformed input from
/// the server always ends up here, never in a panic.
#[derive(Debug)]
pub enum PmiError {
    /// An environment variable the launcher sets is missing or malformed.
    Env {
        /// The variable, e.g. `PMI_FD`.
        var: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A system call on the PMI connection failed.
    Io {
        /// What we were doing.
        op: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// The server closed the connection (the launcher is gone or killed us).
    Closed,
    /// The server's reply could not be parsed or was not the expected one.
    Malformed(String),
    /// The server answered a request with a non-zero `rc`.
    Refused {
        /// The request's `cmd`, e.g. `put`.
        request: String,
        /// The server's return code.
        rc: i64,
        /// The server's `msg`, if it sent one.
        msg: String,
    },
    /// `get` found no value for this key (not put, or not yet fenced).
    KeyNotFound {
        /// The key as the caller named it.
        key: String,
        /// The rank whose value was asked for.
        rank: u32,
    },
    /// A key the caller passed cannot be used (bad characters, too long).
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A value read back from the key-value space is not in our encoding.
    CorruptValue {
        /// The wire key that held it.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The launcher wants something this client does not speak yet.
    Unsupported(String),
    /// The launcher's name service refused a publish, lookup or unpublish of `service`.
    Name {
        /// The service name asked about.
        service: String,
        /// Why.
        fault: NameFault,
    },
}

impl fmt::Display for PmiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmiError::Env { var, problem } => write!(f, "PMI environment: {var} {problem}"),
            PmiError::Io { op, source } => write!(f, "PMI {op} failed: {source}"),
            PmiError::Closed => f.write_str("PMI server closed the connection"),
            PmiError::Malformed(detail) => write!(f, "malformed PMI reply: {detail}"),
            PmiError::Refused { request, rc, msg } => {
                write!(f, "PMI server refused `{request}` (rc={rc}): {msg}")
            }
            PmiError::KeyNotFound { key, rank } => {
                write!(f, "PMI key `{key}` of rank {rank} not found")
            }
            PmiError::InvalidKey { key, reason } => write!(f, "invalid PMI key `{key}`: {reason}"),
            PmiError::CorruptValue { key, detail } => {
                write!(f, "corrupt PMI value under `{key}`: {detail}")
            }
            PmiError::Unsupported(what) => write!(f, "unsupported PMI setup: {what}"),
            PmiError::Name { service, fault } => write!(f, "service `{service}`: {fault}"),
        }
    }
}

impl std::error::Error for PmiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PmiError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The parts of a server's reply that say whether a request worked.
pub(crate) struct Reply<'a> {
    /// The reply's command.
    pub cmd: &'a str,
    /// Its return code, if it has one (none counts as success, as in several of Hydra's
    /// replies).
    pub rc: Option<&'a str>,
    /// Its error message, if any.
    pub msg: Option<&'a str>,
}

/// Checks that the reply to `request` is the command `expect` with return code 0 or none;
/// `shown` is the whole reply, for the error.
pub(crate) fn check_reply(
    request: &str,
    expect: &str,
    reply: Reply<'_>,
    shown: &dyn fmt::Display,
) -> Result<(), PmiError> {
    if let Some(rc) = reply.rc {
        let rc: i64 = rc
            .parse()
            .map_err(|_| PmiError::Malformed(format!("non-numeric rc in `{shown}`")))?;
        if rc != 0 {
            return Err(PmiError::Refused {
                request: request.to_string(),
                rc,
                msg: reply.msg.unwrap_or("").to_string(),
            });
        }
    }
    if reply.cmd != expect {
        return Err(PmiError::Malformed(format!(
            "expected `{expect}` in reply to `{request}`, got `{shown}`"
        )));
    }
    Ok(())
}
