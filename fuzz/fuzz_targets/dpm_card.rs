//! Business cards of processes joining from another job (`MPI_Comm_connect`/`accept`/`join`),
//! from any bytes: `Cards::parse` never panics, every card it accepts can be read whole (each
//! card, each entry, every modex question the engine asks), and a card written back through
//! `CardWriter` is the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_core::btl::{Modex, ModexPut};
use stormpi_core::dpm::{
    Card, CardModex, CardWriter, Cards, KEY_ME_THERE, KEY_RANK, KEY_SAME_HOST, KEY_SECRET, MAX_CARD,
};
use stormpi_core::rte::ProcId;

/// The card `c` written again; `None` when a key is not UTF-8 (a writer only takes `&str`) or
/// the architecture is not one a writer could have put.
fn rewrite(c: &Card, out: &mut [u8; MAX_CARD]) -> Option<usize> {
    let mut w = CardWriter::new(out, c.rank, c.base, c.arch?, c.host).ok()?;
    for (k, v) in c.entries() {
        w.put(core::str::from_utf8(k).ok()?, v).ok()?;
    }
    Some(w.len())
}

fuzz_target!(|data: &[u8]| {
    let Some((&count, list)) = data.split_first() else {
        return;
    };
    let count = u32::from(count % 8);
    let Ok(cards) = Cards::parse(list, count) else {
        return;
    };
    let mut m = CardModex {
        cards,
        first: ProcId(100),
        my_index: 3,
        secret: [7; 32],
        host: b"here",
    };
    let mut at = 0;
    for i in 0..count {
        let c = cards.get(i).expect("a parsed list has every card");
        // The card's bytes in the list, after their length.
        let len = usize::from(u16::from_be_bytes([list[at], list[at + 1]]));
        let bytes = &list[at + 2..at + 2 + len];
        at += 2 + len;
        let mut out = [0u8; MAX_CARD];
        if let Some(n) = rewrite(&c, &mut out) {
            assert_eq!(&out[..n], bytes, "a card written back differs");
        } else {
            assert!(c.arch.is_none() || c.entries().any(|(k, _)| core::str::from_utf8(k).is_err()));
        }
        let mut value = [0u8; 64];
        for key in [
            KEY_SECRET,
            KEY_ME_THERE,
            KEY_RANK,
            KEY_SAME_HOST,
            "arch",
            "tcp.addr.0",
        ] {
            let _ = m.get(ProcId(100 + i), key, &mut value);
        }
        for (k, _) in c.entries() {
            if let Ok(k) = core::str::from_utf8(k) {
                assert!(c.get(k).is_some(), "an entry is not found by its key");
            }
        }
    }
    assert_eq!(
        at,
        list.len(),
        "a parsed list has bytes after its last card"
    );
    assert!(m
        .get(ProcId(100 + count), KEY_RANK, &mut [0u8; 4])
        .ok()
        .flatten()
        .is_none());
});
