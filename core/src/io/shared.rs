//! The shared file pointer: one counter (in etypes) per open file, common to its members.
//!
//! It lives in a hidden side file beside the data file (`.NAME.stormpi-shfp` in the same
//! directory), 8 bytes in native order, read and changed under an exclusive byte-range lock:
//! processes on every host that shares the file system agree on it without any message, and
//! no process has to serve the others (a counter held by rank 0 would need rank 0 to make
//! progress). The side file is created by the first shared access, removed by rank 0 at open
//! (one a crashed job left) and at close. A missing or empty side file reads as 0.

use super::fs::{Fd, FileSystem, IoError, OpenHow};
use super::{file_system, FileId, PATH_MAX};
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};

const SUFFIX: &[u8] = b".stormpi-shfp";

/// The side file's name for data file `path`; its length in `out`.
fn side_name(path: &[u8], out: &mut [u8; PATH_MAX + 32]) -> Option<usize> {
    let cut = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let (dir, base) = path.split_at(cut);
    let n = dir.len() + 1 + base.len() + SUFFIX.len();
    if n > out.len() {
        return None;
    }
    out[..dir.len()].copy_from_slice(dir);
    out[dir.len()] = b'.';
    out[dir.len() + 1..dir.len() + 1 + base.len()].copy_from_slice(base);
    out[n - SUFFIX.len()..n].copy_from_slice(SUFFIX);
    Some(n)
}

/// Deletes the side file of `path`, if there is one.
pub fn remove_side_file(fs: &dyn FileSystem, path: &[u8]) {
    let mut buf = [0u8; PATH_MAX + 32];
    if let Some(n) = side_name(path, &mut buf) {
        let _ = fs.delete(&buf[..n]);
    }
}

fn io(err: IoError) -> Error {
    err.to_error("the shared file pointer's side file")
}

/// The side file of `id`, opened at its first use.
fn side_fd(e: &mut Engine, id: FileId) -> Result<(&'static dyn FileSystem, Fd)> {
    let fs = file_system(e)?;
    let f = e.io.get_mut(id)?;
    if let Some(fd) = f.shared_fd {
        return Ok((fs, fd));
    }
    let mut buf = [0u8; PATH_MAX + 32];
    let n = side_name(f.path(), &mut buf).ok_or(Error::new(
        ErrorClass::BadFile,
        Reason::BadArgument {
            what: "the file name is too long for the shared file pointer's side file",
        },
    ))?;
    let how = OpenHow {
        read: true,
        write: true,
        create: true,
        exclusive: false,
    };
    let fd = fs.open(&buf[..n], how).map_err(io)?;
    f.shared_fd = Some(fd);
    Ok((fs, fd))
}

fn read(fs: &dyn FileSystem, fd: Fd) -> Result<u64> {
    let mut b = [0u8; 8];
    let got = fs.read_at(fd, &mut b, 0).map_err(io)?;
    Ok(if got == 8 { u64::from_le_bytes(b) } else { 0 })
}

/// Runs `f` on the counter under the lock; `f` returns (the value to store, the result).
fn with_counter(
    e: &mut Engine,
    id: FileId,
    f: impl FnOnce(u64) -> Result<(u64, u64)>,
) -> Result<u64> {
    let (fs, fd) = side_fd(e, id)?;
    fs.lock(fd, 0, 8, true).map_err(io)?;
    let r = read(fs, fd).and_then(f).and_then(|(new, out)| {
        // Little-endian: members of different byte orders share the file.
        fs.write_at(fd, &new.to_le_bytes(), 0).map_err(io)?;
        Ok(out)
    });
    let _ = fs.unlock(fd, 0, 8);
    r
}

/// Adds `n` etypes to the shared pointer; returns its value before.
pub fn fetch_add(e: &mut Engine, id: FileId, n: u64) -> Result<u64> {
    with_counter(e, id, |v| {
        let new = v.checked_add(n).ok_or(Error::bad_arg(
            "the shared file pointer would pass 2^64 etypes",
        ))?;
        Ok((new, v))
    })
}

/// Sets the shared pointer to `v`.
pub fn set(e: &mut Engine, id: FileId, v: u64) -> Result<()> {
    with_counter(e, id, |_| Ok((v, 0))).map(|_| ())
}

/// The shared pointer's value.
pub fn get(e: &mut Engine, id: FileId) -> Result<u64> {
    with_counter(e, id, |v| Ok((v, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_side_file_sits_hidden_beside_the_data_file() {
        let mut buf = [0u8; PATH_MAX + 32];
        let n = side_name(b"/tmp/run/out.h5", &mut buf).unwrap();
        assert_eq!(&buf[..n], b"/tmp/run/.out.h5.stormpi-shfp");
        let n = side_name(b"data", &mut buf).unwrap();
        assert_eq!(&buf[..n], b".data.stormpi-shfp");
    }
}
