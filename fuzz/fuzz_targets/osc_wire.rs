//! The one-sided active messages from any bytes: `Am::parse` never panics; what it accepts is
//! written back by `AmHdr::emit` to the same bytes, with the data after the type description.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_core::osc::wire::Am;

fuzz_target!(|msg: &[u8]| {
    if let Ok(am) = Am::parse(msg) {
        let head = msg.len() - am.data.len();
        let mut out = vec![0u8; head];
        let n = am.hdr.emit(am.nodes, &mut out).expect("room for what was parsed");
        assert_eq!(n, head);
        assert_eq!(&out[..], &msg[..head], "emit wrote other bytes than it parsed");
    }
});
