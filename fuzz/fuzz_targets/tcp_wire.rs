//! The TCP BTL's frame header, connection challenge and handshake and address record from any
//! bytes: parsing never panics, and whatever parses is written back to bytes that parse the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpi::tcp::wire::{
    AddrRecord, Challenge, Frame, Handshake, ADDR_LEN, CHALLENGE_LEN, FRAME_LEN, HANDSHAKE_LEN,
};

fuzz_target!(|data: &[u8]| {
    if let Some(b) = data.first_chunk::<FRAME_LEN>() {
        let max = data.get(FRAME_LEN).map_or(1 << 20, |&m| (m as u32) << 12);
        if let Ok(f) = Frame::parse(b, max) {
            assert_eq!(Frame::parse(&f.to_bytes(), max), Ok(f));
        }
    }
    if let Some(b) = data.first_chunk::<HANDSHAKE_LEN>() {
        if let Ok(h) = Handshake::parse(b) {
            assert_eq!(Handshake::parse(&h.to_bytes()), Ok(h));
        }
    }
    if let Some(b) = data.first_chunk::<CHALLENGE_LEN>() {
        if let Ok(c) = Challenge::parse(b) {
            assert_eq!(Challenge::parse(&c.to_bytes()), Ok(c));
        }
    }
    if let Ok(a) = AddrRecord::parse(data) {
        let b: [u8; ADDR_LEN] = a.to_bytes();
        assert_eq!(AddrRecord::parse(&b), Ok(a));
    }
});
