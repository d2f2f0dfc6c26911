//! Forwarding of the ranks' stdout/stderr, a whole line at a time.
//!
//! Each rank writes into its own pipes; the launcher reads them and writes
//! only complete lines to its own stdout/stderr, so lines of different ranks
//! never mix. A line still unterminated when its pipe closes is written with
//! a newline added, for the same reason.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys;

/// A line longer than this is written out in pieces of this size (each
/// ended by a newline) so that a rank printing without newlines cannot grow
/// the launcher without bound.
pub const MAX_PARTIAL_LINE: usize = 256 * 1024;

/// Where forwarded output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// stormrun's stdout.
    Stdout,
    /// stormrun's stderr.
    Stderr,
}

/// Splits one output stream into prefixed whole lines.
#[derive(Debug)]
pub struct LineBuffer {
    prefix: Vec<u8>,
    partial: Vec<u8>,
}

impl LineBuffer {
    /// A buffer that starts every line it emits with `prefix` (may be empty).
    pub fn new(prefix: Vec<u8>) -> LineBuffer {
        LineBuffer {
            prefix,
            partial: Vec::new(),
        }
    }

    /// Appends to `out` every line that `data` completes.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            out.extend_from_slice(&self.prefix);
            out.extend_from_slice(&self.partial);
            out.extend_from_slice(&data[..=nl]);
            self.partial.clear();
            data = &data[nl + 1..];
        }
        self.partial.extend_from_slice(data);
        while self.partial.len() >= MAX_PARTIAL_LINE {
            let rest = self.partial.split_off(MAX_PARTIAL_LINE);
            self.emit_partial(out);
            self.partial = rest;
        }
    }

    /// Appends the unterminated rest, if any, as a line of its own.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.partial.is_empty() {
            self.emit_partial(out);
        }
    }

    fn emit_partial(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.prefix);
        out.append(&mut self.partial);
        out.push(b'\n');
    }
}

/// One rank's stdout or stderr pipe being forwarded.
#[derive(Debug)]
pub struct Forwarder {
    pipe: File,
    lines: LineBuffer,
    dest: Dest,
    /// `--output-filename`'s file, which gets the bytes as they come.
    file: Option<File>,
    /// Whether lines also go to `dest`.
    copy: bool,
}

impl Forwarder {
    /// Forwards the read end `pipe` to `dest`, prefixing lines with `prefix`;
    /// with `tee`, also writes everything to its file, and to `dest` only if
    /// its flag says so.
    pub fn new(
        pipe: OwnedFd,
        prefix: Vec<u8>,
        dest: Dest,
        tee: Option<(File, bool)>,
    ) -> io::Result<Forwarder> {
        sys::set_nonblocking(pipe.as_raw_fd())?;
        let (file, copy) = match tee {
            Some((f, copy)) => (Some(f), copy),
            None => (None, true),
        };
        Ok(Forwarder {
            pipe: File::from(pipe),
            lines: LineBuffer::new(prefix),
            dest,
            file,
            copy,
        })
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> RawFd {
        self.pipe.as_raw_fd()
    }

    /// Reads what the pipe holds and forwards the complete lines. Returns
    /// `false` once the pipe is at end of file (the partial line is flushed).
    pub fn on_readable(&mut self) -> bool {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut out = Vec::new();
        let mut open = true;
        // Bounded so that one rank flooding output cannot starve the rest;
        // poll reports the remainder on the next round.
        for _ in 0..4 {
            match self.pipe.read(&mut chunk) {
                Ok(0) => {
                    open = false;
                    self.lines.finish(&mut out);
                    break;
                }
                Ok(n) => {
                    if let Some(f) = &mut self.file {
                        // A full disk must not stop the job's supervision.
                        let _ = f.write_all(&chunk[..n]);
                    }
                    if self.copy {
                        self.lines.push(&chunk[..n], &mut out);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    open = false;
                    self.lines.finish(&mut out);
                    break;
                }
            }
        }
        write_out(self.dest, &out);
        open
    }

    /// Flushes the unterminated rest when we stop reading this pipe early.
    pub fn finish(&mut self) {
        let mut out = Vec::new();
        self.lines.finish(&mut out);
        write_out(self.dest, &out);
    }
}

/// Writes whole lines to our stdout/stderr. Errors (a closed pipe, a full
/// disk) are dropped: losing output must not stop the job's supervision.
fn write_out(dest: Dest, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let _ = match dest {
        Dest::Stdout => {
            let mut out = io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
        Dest::Stderr => io::stderr().lock().write_all(bytes),
    };
}

/// Creates `DIR/1/rank.R/stdout` and `stderr` (Open MPI's layout, job number
/// 1) for `--output-filename`, replacing earlier ones.
pub fn rank_files(dir: &std::path::Path, rank: u32) -> io::Result<(File, File)> {
    let d = dir.join("1").join(format!("rank.{rank}"));
    std::fs::create_dir_all(&d)
        .map_err(|e| io::Error::new(e.kind(), format!("--output-filename {}: {e}", d.display())))?;
    Ok((
        File::create(d.join("stdout"))?,
        File::create(d.join("stderr"))?,
    ))
}

/// The `--tag-output` prefix, in Open MPI's format (`[jobid,rank]<stream>:`,
/// with job number 1).
pub fn tag(rank: u32, dest: Dest) -> Vec<u8> {
    let stream = match dest {
        Dest::Stdout => "stdout",
        Dest::Stderr => "stderr",
    };
    format!("[1,{rank}]<{stream}>:").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emits_only_whole_lines() {
        let mut lb = LineBuffer::new(b"[1,3]<stdout>:".to_vec());
        let mut out = Vec::new();
        lb.push(b"hel", &mut out);
        assert!(out.is_empty());
        lb.push(b"lo\nwor", &mut out);
        assert_eq!(out, b"[1,3]<stdout>:hello\n");
        out.clear();
        lb.push(b"ld\n\nlast", &mut out);
        assert_eq!(out, b"[1,3]<stdout>:world\n[1,3]<stdout>:\n");
        out.clear();
        lb.finish(&mut out);
        assert_eq!(out, b"[1,3]<stdout>:last\n");
        out.clear();
        lb.finish(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn untagged_output_is_unchanged() {
        let mut lb = LineBuffer::new(Vec::new());
        let mut out = Vec::new();
        lb.push(b"a\nb\nc", &mut out);
        lb.finish(&mut out);
        assert_eq!(out, b"a\nb\nc\n");
    }

    #[test]
    fn huge_lines_are_cut() {
        let mut lb = LineBuffer::new(b"> ".to_vec());
        let mut out = Vec::new();
        lb.push(&vec![b'x'; MAX_PARTIAL_LINE * 2 + 5], &mut out);
        assert_eq!(out.len(), 2 * (2 + MAX_PARTIAL_LINE + 1));
        assert!(out.starts_with(b"> xxx"));
        out.clear();
        lb.push(b"y\n", &mut out);
        assert_eq!(out, b"> xxxxxy\n");
    }

    #[test]
    fn tags_match_open_mpi() {
        assert_eq!(tag(12, Dest::Stderr), b"[1,12]<stderr>:");
        assert_eq!(tag(0, Dest::Stdout), b"[1,0]<stdout>:");
    }
}
