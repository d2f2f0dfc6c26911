//! stormrun's PMI server fed any bytes by a rank: it never panics, and whatever the rank sends
//! it stays able to serve the job (a well-formed command from another rank is still answered).
//! An odd first byte gives the server a job key, so the bytes also go through the
//! authentication exchange (`initack` with a nonce, challenge, response).
#![no_main]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use libfuzzer_sys::fuzz_target;
use stormpi_bootstrap::auth::Key;
use stormpi_bootstrap::pmi::PmiServer;

fuzz_target!(|data: &[u8]| {
    let mut s = PmiServer::new("kvs_fuzz", vec![0, 0]);
    if data.first().is_some_and(|b| b & 1 == 1) {
        s.require_key(Key::from_bytes([0x42; 32]));
    }
    let (Ok(a), Ok(b)) = (s.connect_rank(0), s.connect_rank(1)) else {
        return;
    };
    let (mut a, mut b) = (UnixStream::from(a), UnixStream::from(b));
    let mut events = Vec::new();
    // In pieces, as a socket delivers them.
    for chunk in data.chunks(509) {
        if a.write_all(chunk).is_err() {
            break;
        }
        s.on_readable(0, &mut events);
    }
    b.write_all(b"cmd=get_appnum\n").expect("socketpair");
    s.on_readable(1, &mut events);
    b.set_nonblocking(true).expect("socketpair");
    let mut reply = [0u8; 64];
    let n = b.read(&mut reply).unwrap_or(0);
    assert_eq!(&reply[..n], b"cmd=appnum appnum=0\n");
    let _ = a.set_nonblocking(true);
    let mut sink = [0u8; 4096];
    while matches!(a.read(&mut sink), Ok(n) if n > 0) {}
});
