//! PMI-1 command lines from any bytes: `Message::parse` never panics, and a parsed message is
//! written back (`to_line`) as a line that parses to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_bootstrap::pmi::wire::Message;

fuzz_target!(|line: &[u8]| {
    if let Ok(m) = Message::parse(line) {
        let written = m.to_line();
        let back = Message::parse(&written[..written.len() - 1]);
        assert_eq!(
            back.as_ref(),
            Ok(&m),
            "written as {:?}",
            String::from_utf8_lossy(&written)
        );
    }
});
