//! Background file transfers for non-blocking MPI-IO: one worker thread per process, started
//! at the first transfer, does them in the order they were started with `pread`/`pwrite`, so
//! the bytes move while the process computes (and without holding the engine).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, OnceLock};

use stormpi_core::io::fs::{Fd, IoError, Run, Ticket};

use crate::fs::{Background, PosixFs};

/// The Linux platform's file system: the POSIX calls, and transfers in the background by the
/// worker.
pub static FS: PosixFs = PosixFs::new(Some(Background { submit, poll }));

/// A transfer waiting for the worker.
struct Job {
    ticket: u64,
    fd: Fd,
    write: bool,
    /// The buffer's address (the submitter's contract keeps it valid until the job is over).
    buf: usize,
    runs: Vec<Run>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    done: HashMap<u64, Result<u64, IoError>>,
    next: u64,
}

struct Worker {
    state: Mutex<State>,
    work: Condvar,
}

static WORKER: OnceLock<Option<&'static Worker>> = OnceLock::new();

/// The worker, started on first use; `None` when no thread could be made.
fn worker() -> Option<&'static Worker> {
    *WORKER.get_or_init(|| {
        let w: &'static Worker = Box::leak(Box::new(Worker {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("stormpi-io".into())
            .spawn(move || run(w))
            .ok()
            .map(|_| w)
    })
}

fn run(w: &'static Worker) {
    loop {
        let job = {
            let Ok(mut s) = w.state.lock() else { return };
            loop {
                if let Some(j) = s.queue.pop_front() {
                    break j;
                }
                s = match w.work.wait(s) {
                    Ok(s) => s,
                    Err(_) => return,
                };
            }
        };
        let r = transfer(&job);
        let Ok(mut s) = w.state.lock() else { return };
        s.done.insert(job.ticket, r);
    }
}

/// Moves a job's bytes: its runs one after another through its buffer.
fn transfer(job: &Job) -> Result<u64, IoError> {
    let fs = &crate::fs::POSIX_FS;
    let mut at = 0usize;
    for r in &job.runs {
        let len = r.len as usize;
        let p = (job.buf + at) as *mut u8;
        if job.write {
            // SAFETY: the submitter's contract: the buffer holds the runs' total length and stays
            // valid until the job is reported over.
            let src = unsafe { std::slice::from_raw_parts(p, len) };
            stormpi_core::io::fs::FileSystem::write_at(fs, job.fd, src, r.off)?;
            at += len;
        } else {
            // SAFETY: as above, and writable: the reader's buffer is the transfer's alone.
            let dst = unsafe { std::slice::from_raw_parts_mut(p, len) };
            let got = stormpi_core::io::fs::FileSystem::read_at(fs, job.fd, dst, r.off)?;
            at += got;
            if got < len {
                break;
            }
        }
    }
    Ok(at as u64)
}

/// Queues a transfer; `None` when no worker thread could be started.
pub fn submit(fd: Fd, write: bool, buf: *mut u8, runs: &[Run]) -> Option<Ticket> {
    let w = worker()?;
    let mut s = w.state.lock().ok()?;
    let ticket = s.next;
    s.next += 1;
    s.queue.push_back(Job {
        ticket,
        fd,
        write,
        buf: buf as usize,
        runs: runs.to_vec(),
    });
    drop(s);
    w.work.notify_one();
    Some(Ticket(ticket))
}

/// The outcome of transfer `t` once it is over (then forgotten); `None` while it is queued or
/// running.
pub fn poll(t: Ticket) -> Option<Result<u64, IoError>> {
    let w = (*WORKER.get()?)?;
    let mut s = w.state.lock().ok()?;
    s.done.remove(&t.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormpi_core::io::fs::{FileSystem, OpenHow};

    fn wait(t: Ticket) -> Result<u64, IoError> {
        loop {
            if let Some(r) = poll(t) {
                return r;
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn transfers_run_in_order_and_report_what_they_moved() {
        let path = std::env::temp_dir().join(format!("stormpi-fsw-{}", std::process::id()));
        let fs = &crate::fs::POSIX_FS;
        let how = OpenHow {
            read: true,
            write: true,
            create: true,
            exclusive: false,
        };
        let fd = fs.open(path.as_os_str().as_encoded_bytes(), how).unwrap();
        let mut data: Vec<u8> = (0..64u8).collect();
        // Two runs with a hole between them, then an overwrite of the first run queued after.
        let runs = [Run { off: 0, len: 16 }, Run { off: 32, len: 48 }];
        let t1 = submit(fd, true, data.as_mut_ptr(), &runs).unwrap();
        let mut over = vec![0xAAu8; 16];
        let t2 = submit(fd, true, over.as_mut_ptr(), &[Run { off: 0, len: 16 }]).unwrap();
        assert_eq!(wait(t1), Ok(64));
        assert_eq!(wait(t2), Ok(16));
        assert_eq!(poll(t1), None, "a ticket is spent once reported");
        // Read past the end: the read stops there.
        let mut back = vec![0u8; 100];
        let t3 = submit(fd, false, back.as_mut_ptr(), &[Run { off: 0, len: 100 }]).unwrap();
        assert_eq!(wait(t3), Ok(80));
        assert_eq!(&back[..16], &[0xAA; 16]);
        assert_eq!(&back[16..32], &[0; 16]);
        assert_eq!(&back[32..80], &data[16..64]);
        fs.close(fd).unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}
