//! PMI-2 commands from any bytes: the length prefix, `Command::parse` and the process mapping
//! never panic, and a parsed command is written back (`to_wire`) as one that parses to the same
//! command, its prefix giving its length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_bootstrap::pmi::v2::{self, Command};

fuzz_target!(|data: &[u8]| {
    let (prefix, body) = data.split_at(data.len().min(v2::LEN_DIGITS));
    let _ = v2::parse_length(prefix);
    if let Ok(c) = Command::parse(body) {
        if let Ok(wire) = c.to_wire() {
            let (len, back) = wire.split_at(v2::LEN_DIGITS);
            assert_eq!(v2::parse_length(len), Ok(back.len()));
            assert_eq!(Command::parse(back).as_ref(), Ok(&c), "written as {wire:?}");
        }
        if let Some(map) = c.get("value") {
            let size = u32::from(prefix.first().copied().unwrap_or(0)) * 16;
            if let Ok(nodes) = v2::parse_process_mapping(map, size) {
                assert_eq!(nodes.len(), size as usize);
            }
        }
    }
});
