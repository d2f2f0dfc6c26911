//! The PML's wire headers from any bytes: `Header::parse` never panics; what it accepts is
//! written back by `Header::emit` and parses to the same header; the eager fast path agrees
//! with the full parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_core::wire::Header;

fuzz_target!(|frag: &[u8]| {
    let parsed = Header::parse(frag);
    if let Some((env, payload)) = Header::parse_native_match(frag) {
        let Ok((Header::Match(e), p)) = parsed else {
            panic!("the fast path took what parse does not read as an eager message");
        };
        assert_eq!((e, p), (env, payload));
    }
    if let Ok((h, payload)) = parsed {
        let mut out = [0u8; 256];
        let n = h.emit(&mut out);
        assert!(n <= frag.len() - payload.len() || n <= out.len());
        let (again, rest) = Header::parse(&out[..n]).expect("an emitted header parses");
        assert_eq!(again, h);
        assert!(rest.is_empty());
    }
});
