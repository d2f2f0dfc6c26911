//! The partitioned handshake record from any bytes: `Handshake::parse` never panics, accepts
//! only what a peer could have written, and `emit` writes back the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_core::part::{Handshake, HS_LEN, MAX_CHANNELS, MAX_PARTITIONS};

fuzz_target!(|msg: &[u8]| {
    let Ok(b) = <&[u8; HS_LEN]>::try_from(msg.get(..HS_LEN).unwrap_or(&[])) else {
        return;
    };
    if let Some(h) = Handshake::parse(b) {
        assert!(h.partitions >= 1 && h.partitions <= MAX_PARTITIONS);
        assert!(h.chan < MAX_CHANNELS);
        let mut out = [0u8; HS_LEN];
        h.emit(&mut out);
        assert_eq!(&out, b, "emit wrote other bytes than it parsed");
    }
});
