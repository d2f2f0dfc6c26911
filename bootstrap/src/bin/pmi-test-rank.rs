//! A small rank program for testing launchers and the PMI client: this
//! crate's integration tests run it under stormrun and under MPICH's Hydra,
//! and it is handy for checking a launcher by hand.
//!
//! ```text
//! pmi-test-rank singleton            print whether a PMI launcher started us
//! pmi-test-rank exchange [BYTES]     put/fence/get with every rank, verify
//! pmi-test-rank nodes                check STORMPI_NODE/LOCAL_* against every
//!                                    rank's (through PMI), then exchange
//! pmi-test-rank lines COUNT LEN      write COUNT lines of LEN bytes, in pieces
//! pmi-test-rank env VAR...           print VAR=value for each VAR
//! pmi-test-rank cpus                 print the CPUs this rank may run on
//! pmi-test-rank fail RANK HOW WAIT   RANK fails (HOW: exit:N, kill, abort:N);
//!                                    the others WAIT (fence or sleep)
//! pmi-test-rank barrier-exit RANK    RANK exits 0 at once; the others fence
//! pmi-test-rank garbage              send a malformed PMI line, then exchange
//! pmi-test-rank hang                 sleep for a minute
//! pmi-test-rank session              print this process's pid, process group
//!                                    and session, then sleep for a minute
//! ```
//!
//! In `fail` mode every rank first creates `/dev/shm/stormpi-<JOBID>-test-<rank>`
//! (when `STORMPI_JOBID` is set) so tests can check that the launcher removes it.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::process::exit;
use std::time::Duration;

use stormpi_bootstrap::pmi::{PmiClient, PmiError};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> &str { args.get(i).map_or("", String::as_str) };
    let num = |i: usize, default: u64| -> u64 { arg(i).parse().unwrap_or(default) };
    match arg(0) {
        "singleton" => match PmiClient::from_env() {
            None => println!("singleton"),
            Some(Ok(p)) => println!("pmi rank {} of {}", p.rank(), p.size()),
            Some(Err(e)) => die(&format!("PMI init failed: {e}")),
        },
        "exchange" => exchange(connect(), num(1, 3000) as usize),
        "nodes" => nodes(connect()),
        "lines" => lines(num(1, 100), num(2, 200) as usize),
        "env" => {
            let rank = std::env::var("PMI_RANK").unwrap_or_default();
            for var in &args[1..] {
                let value = std::env::var(var).unwrap_or_else(|_| "(unset)".into());
                println!("rank {rank} {var}={value}");
            }
        }
        "cpus" => {
            let rank = std::env::var("PMI_RANK").unwrap_or_default();
            let cpus = stormpi_bootstrap::launch::bind::allowed_cpus();
            let list = stormpi_bootstrap::launch::bind::list_text(&cpus);
            println!("rank {rank} cpus {list}");
        }
        "fail" => fail(num(1, 0) as u32, arg(2), arg(3)),
        "barrier-exit" => {
            let mut pmi = connect();
            if pmi.rank() == num(1, 0) as u32 {
                exit(0);
            }
            check(pmi.fence(), "fence");
            println!("rank {} passed a fence it should not have", pmi.rank());
        }
        "garbage" => garbage(),
        "hang" => std::thread::sleep(Duration::from_secs(60)),
        "session" => {
            let rank = std::env::var("PMI_RANK").unwrap_or_default();
            // SAFETY: plain system calls without arguments to check.
            let (pid, pgid, sid) = unsafe { (libc::getpid(), libc::getpgrp(), libc::getsid(0)) };
            println!("rank {rank} pid {pid} pgid {pgid} sid {sid}");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
            println!("rank {rank} was not killed");
        }
        other => die(&format!("unknown mode `{other}`; see the source for usage")),
    }
}

fn die(msg: &str) -> ! {
    eprintln!("pmi-test-rank: {msg}");
    exit(99)
}

fn check<T>(r: Result<T, PmiError>, what: &str) -> T {
    r.unwrap_or_else(|e| die(&format!("{what}: {e}")))
}

fn connect() -> PmiClient {
    match PmiClient::from_env() {
        Some(r) => check(r, "PMI init"),
        None => die("no PMI launcher (PMI_FD and PMI_PORT unset)"),
    }
}

/// Deterministic bytes of `len` for `rank`, covering all byte values.
fn pattern(rank: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(rank * 7) as u8)
        .collect()
}

fn exchange(mut pmi: PmiClient, big: usize) {
    let (rank, size) = (pmi.rank(), pmi.size());
    check(
        pmi.put("greeting", format!("hello from rank {rank}").as_bytes()),
        "put",
    );
    check(pmi.put("big", &pattern(rank, big)), "put big");
    check(pmi.put("empty", b""), "put empty");
    check(pmi.fence(), "fence");
    let mut buf = Vec::new();
    for peer in 0..size {
        check(pmi.get(peer, "greeting", &mut buf), "get greeting");
        if buf != format!("hello from rank {peer}").as_bytes() {
            die(&format!("rank {rank}: wrong greeting from {peer}: {buf:?}"));
        }
        check(pmi.get(peer, "big", &mut buf), "get big");
        if buf != pattern(peer, big) {
            die(&format!(
                "rank {rank}: wrong big value from {peer} ({} bytes)",
                buf.len()
            ));
        }
        check(pmi.get(peer, "empty", &mut buf), "get empty");
        if !buf.is_empty() {
            die(&format!("rank {rank}: empty value from {peer} is {buf:?}"));
        }
    }
    match pmi.get((rank + 1) % size, "never-put", &mut buf) {
        Err(PmiError::KeyNotFound { .. }) => {}
        other => die(&format!("get of a missing key gave {other:?}")),
    }
    check(pmi.barrier(), "barrier");
    println!(
        "rank {rank}/{size} appnum {}: exchange ok ({big}-byte values)",
        pmi.appnum()
    );
    check(pmi.finalize(), "finalize");
}

/// Publishes this rank's node and local rank, reads everyone's, and checks
/// that the ranks naming the same node agree on the local numbering; then
/// runs `exchange`. Prints one line with what it saw.
fn nodes(mut pmi: PmiClient) {
    let (rank, size) = (pmi.rank(), pmi.size());
    let var = |name: &str| -> String {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| die(&format!("rank {rank}: {name} is not set")))
    };
    let node = var("STORMPI_NODE");
    let local_rank: u32 = var("STORMPI_LOCAL_RANK").parse().unwrap_or(u32::MAX);
    let local_size: u32 = var("STORMPI_LOCAL_SIZE").parse().unwrap_or(0);
    let netns = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    check(pmi.put("node", node.as_bytes()), "put node");
    check(
        pmi.put("local", format!("{local_rank}/{local_size}").as_bytes()),
        "put local",
    );
    check(pmi.fence(), "fence");
    let mut buf = Vec::new();
    let mut same_node = Vec::new();
    for peer in 0..size {
        check(pmi.get(peer, "node", &mut buf), "get node");
        if buf == node.as_bytes() {
            check(pmi.get(peer, "local", &mut buf), "get local");
            let want = format!("{}/{local_size}", same_node.len());
            if buf != want.as_bytes() {
                die(&format!(
                    "rank {rank}: rank {peer} on node {node} says local {}, expected {want}",
                    String::from_utf8_lossy(&buf)
                ));
            }
            same_node.push(peer);
        }
    }
    let me = same_node.iter().position(|&r| r == rank);
    if same_node.len() as u32 != local_size || me != Some(local_rank as usize) {
        die(&format!(
            "rank {rank}: node {node} holds ranks {same_node:?}, but STORMPI_LOCAL_RANK/SIZE \
             say {local_rank}/{local_size}"
        ));
    }
    let pmi_via = if std::env::var_os("PMI_PORT").is_some() {
        "port"
    } else {
        "fd"
    };
    println!(
        "rank {rank}/{size} node {node} local {local_rank}/{local_size} pmi {pmi_via} {netns}: nodes ok"
    );
    exchange(pmi, 1000);
}

/// Writes each line in three pieces with flushes in between, so that the
/// launcher sees partial lines from several ranks at once.
fn lines(count: u64, len: usize) {
    let rank = std::env::var("PMI_RANK").unwrap_or_default();
    let mut out = std::io::stdout().lock();
    for i in 0..count {
        let head = format!("r{rank}:{i}:");
        let fill = len.saturating_sub(head.len() + 1).max(1);
        let body: String = std::iter::repeat_n(char::from(b'a' + (i % 26) as u8), fill).collect();
        let line = format!("{head}{body}.");
        let third = line.len() / 3;
        for piece in [&line[..third], &line[third..2 * third], &line[2 * third..]] {
            out.write_all(piece.as_bytes()).unwrap();
            out.flush().unwrap();
        }
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    }
    eprintln!("r{rank}: done");
}

fn fail(failing: u32, how: &str, wait: &str) {
    let mut pmi = connect();
    let rank = pmi.rank();
    if let Ok(jobid) = std::env::var("STORMPI_JOBID") {
        let path = format!("/dev/shm/stormpi-{jobid}-test-{rank}");
        std::fs::write(&path, b"test").unwrap_or_else(|e| die(&format!("{path}: {e}")));
        if rank == 0 {
            println!("jobid={jobid}");
        }
        println!("rank {rank} created {path}");
    }
    std::io::stdout().flush().unwrap();
    check(pmi.fence(), "fence");
    if rank == failing {
        if let Some(code) = how.strip_prefix("exit:") {
            exit(code.parse().unwrap_or(1));
        } else if let Some(code) = how.strip_prefix("abort:") {
            pmi.abort(
                code.parse().unwrap_or(1),
                &format!("test abort from rank {rank}"),
            );
        } else if how == "kill" {
            // SAFETY: plain system calls, no memory involved.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        die(&format!("unknown failure `{how}`"));
    }
    match wait {
        "fence" => check(pmi.fence(), "second fence"),
        _ => std::thread::sleep(Duration::from_secs(30)),
    }
    println!("rank {rank} was not killed");
}

/// Sends a malformed line over the raw PMI socket, expects an error reply,
/// then checks that the connection still serves a normal client.
fn garbage() {
    let fd: i32 = std::env::var("PMI_FD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| die("PMI_FD unset"));
    // SAFETY: dup makes a new descriptor for the same socket; we own it and
    // close it before the PMI client adopts the original.
    let dup = unsafe { libc::dup(fd) };
    if dup < 0 {
        die("dup(PMI_FD) failed");
    }
    // SAFETY: dup is a fresh descriptor owned by nobody else.
    let raw = unsafe { UnixStream::from_raw_fd(dup) };
    let mut reader = BufReader::new(raw);
    reader
        .get_mut()
        .write_all(b"this is not PMI\n")
        .unwrap_or_else(|e| die(&format!("write: {e}")));
    let mut reply = String::new();
    reader
        .read_line(&mut reply)
        .unwrap_or_else(|e| die(&format!("read: {e}")));
    println!("garbage reply: {}", reply.trim_end());
    drop(reader);
    exchange(connect(), 10);
}
