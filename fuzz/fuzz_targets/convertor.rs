//! The convertor against a packer written here: random datatype trees over predefined types
//! (every constructor, with small arguments, checked against the reference model as in
//! `datatype_ctor`), a few instances of one over a buffer of at most 64 KiB of random bytes.
//! Packing (all at once, in fragments of random sizes, at random positions, cut at element
//! boundaries) gives the bytes the type map names, in order; unpacking them (in fragments, out
//! of order when no two elements overlap) writes exactly those bytes and nothing else; the
//! round trip gives the stream back; `external32` packs each element byte-reversed and unpacks
//! from fragments cut anywhere, elements split between them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_core::datatype::convertor::{prefix, Packer, Unpacker};
use stormpi_core::datatype::repr::Repr;
use stormpi_core::datatype::table::TypeTable;
use stormpi_fuzz::{
    agree, free_pool, grow, indexed, predefined_pool, with_table, Args, Conv, Input, Made,
};

/// Largest buffer a type's instances may span.
const SPAN_MAX: i128 = 64 << 10;

/// A small generator of filler bytes (xorshift), seeded from the input.
struct Bytes(u64);

impl Bytes {
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *b = self.0 as u8;
        }
    }
}

/// Fragment lengths chosen by the input: 1 to 200 bytes, sometimes the whole rest.
fn frag(inp: &mut Input<'_>, rest: usize) -> usize {
    match inp.u8() {
        0 => rest.max(1),
        n => 1 + (n as usize * 7 + inp.u8() as usize) % 200,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    with_table(|t| {
        let mut pool = predefined_pool();
        for _ in 0..1 + inp.u8() % 6 {
            if let Some(m) = grow(&mut inp, t, &pool, Args::Small) {
                pool.push(m);
            }
        }
        // Sometimes the newest moved next to an end of the address space (its loops' bases may
        // then lie beyond it; only its elements' addresses must fit).
        if inp.u8().is_multiple_of(4) {
            let m = &pool[pool.len() - 1].model;
            let slack = inp.u8() as i128;
            let d = match inp.u8() % 2 {
                0 => isize::MIN as i128 - m.true_lb + slack,
                _ => isize::MAX as i128 - (m.true_lb + m.true_extent) - slack,
            };
            if let Ok(d) = isize::try_from(d) {
                let old = pool[pool.len() - 1].ty;
                let model = indexed(&[1], None, Some(&[d]), m);
                let made = t.indexed_block(1, None, Some(&[d]), old);
                if let Some((ty, model)) = agree(made, model, t, &format!("moved by {d}")) {
                    pool.push(Made {
                        ty,
                        model,
                        derived: true,
                    });
                }
            }
        }
        // The newest types are the interesting ones.
        let k = inp.below(pool.len().min(4));
        let at = pool.len() - 1 - k;
        let count = 1 + inp.u8() % 3;
        check(t, &pool[at], count as u64, &mut inp);
        free_pool(t, pool);
    });
});

fn check(t: &mut TypeTable, m: &Made, count: u64, inp: &mut Input<'_>) {
    let model = &m.model;
    let Some(map) = &model.map else { return };
    let n = count as i128;
    if map.len() as i128 * n > 4096 {
        return;
    }
    // The instances' elements, in stream order: (memory offset, element).
    let elems: Vec<(i128, stormpi_fuzz::Elem)> = (0..n)
        .flat_map(|i| map.iter().map(move |e| (i * model.extent + e.disp, *e)))
        .collect();
    let lo = elems.iter().map(|(at, _)| *at).min().unwrap_or(0);
    let hi = elems
        .iter()
        .map(|(at, e)| at + e.size as i128)
        .max()
        .unwrap_or(0);
    if hi - lo > SPAN_MAX {
        return;
    }
    t.commit(m.ty).expect("a live type commits");

    let mut fill = Bytes(inp.u64() | 1);
    let mut src = vec![0u8; (hi - lo) as usize];
    fill.fill(&mut src);
    let base = src.as_ptr().wrapping_offset((lo as isize).wrapping_neg());
    // The reference: each element's bytes, in type-map order; and where elements end.
    let mut stream = Vec::new();
    let mut ends = vec![0usize];
    for (at, e) in &elems {
        let i = (at - lo) as usize;
        stream.extend_from_slice(&src[i..i + e.size as usize]);
        ends.push(stream.len());
    }
    let len = stream.len();

    // Packing: all at once, in order, at random positions.
    // SAFETY: every byte the type map of `count` instances touches from `base` is in `src`,
    // which outlives the packer and is not written meanwhile.
    let mut p = unsafe { Packer::new(base, count, m.ty, t) }.expect("a committed type packs");
    assert_eq!(p.packed_len(), len);
    // Room for any fragment length `frag` chooses.
    let mut out = vec![0u8; len + 256];
    assert_eq!(p.pack(t, 0, &mut out), len);
    assert_eq!(&out[..len], &stream[..], "packed at once");
    let mut pos = 0;
    while pos < len {
        let k = frag(inp, len - pos);
        let got = p.pack(t, pos, &mut out[..k]);
        assert_eq!(got, k.min(len - pos), "a fragment at {pos}");
        assert_eq!(&out[..got], &stream[pos..pos + got], "a fragment at {pos}");
        pos += got;
    }
    for _ in 0..4 {
        let pos = inp.below(len + 1);
        let k = frag(inp, len - pos);
        let got = p.pack(t, pos, &mut out[..k]);
        assert_eq!(got, k.min(len - pos));
        assert_eq!(&out[..got], &stream[pos..pos + got], "seeking to {pos}");
    }
    drop(p);

    // Cut at element boundaries (a converting receiver's fragments).
    // SAFETY: as above.
    let mut p = unsafe { Packer::new(base, count, m.ty, t) }.expect("a committed type packs");
    p.whole_elements();
    let mut pos = 0;
    while pos < len {
        let k = frag(inp, len - pos).max(16);
        let got = p.pack(t, pos, &mut out[..k]);
        assert!(got > 0, "no whole element in {k} bytes at {pos}");
        assert!(
            ends.binary_search(&(pos + got)).is_ok(),
            "cut inside an element"
        );
        assert_eq!(&out[..got], &stream[pos..pos + got]);
        pos += got;
    }
    drop(p);

    // A buffered send's copy: the stream itself, cut at element boundaries.
    // SAFETY: `stream` holds the packed bytes of the `count` instances and outlives the packer.
    let mut p = unsafe { Packer::packed(stream.as_ptr(), count, m.ty, t) }.expect("packs");
    p.whole_elements();
    let mut pos = 0;
    while pos < len {
        let k = frag(inp, len - pos).max(16);
        let got = p.pack(t, pos, &mut out[..k]);
        assert!(
            got > 0 && ends.binary_search(&(pos + got)).is_ok(),
            "packed copy at {pos}"
        );
        assert_eq!(&out[..got], &stream[pos..pos + got], "packed copy at {pos}");
        pos += got;
    }
    drop(p);

    // What a prefix of the stream holds: its bytes, and its elements when it ends between two.
    for _ in 0..4 {
        let b = inp.below(len + 1);
        let (native, whole) = prefix(t, m.ty, &Repr::NATIVE, b as u64).expect("a live type");
        assert_eq!(native, b as u64, "native bytes of a {b}-byte prefix");
        assert_eq!(
            whole,
            ends.binary_search(&b).ok().map(|k| k as u64),
            "elements in a {b}-byte prefix"
        );
    }

    // Unpacking: what the reference writes, and nothing else. Elements that overlap are
    // written in stream order (fragments in order); otherwise the fragments come in any order.
    let overlap = model.overlaps(n) == Some(true);
    let mut dst = vec![0u8; src.len()];
    fill.fill(&mut dst);
    let mut want = dst.clone();
    let mut at_stream = 0;
    for (at, e) in &elems {
        let i = (at - lo) as usize;
        let s = e.size as usize;
        want[i..i + s].copy_from_slice(&stream[at_stream..at_stream + s]);
        at_stream += s;
    }
    let mut frags = Vec::new();
    let mut pos = 0;
    while pos < len {
        let k = frag(inp, len - pos).min(len - pos);
        frags.push((pos, k));
        pos += k;
    }
    if !overlap {
        for i in (1..frags.len()).rev() {
            frags.swap(i, inp.below(i + 1));
        }
    }
    {
        let dbase = dst
            .as_mut_ptr()
            .wrapping_offset((lo as isize).wrapping_neg());
        // SAFETY: every byte the type map touches from `dbase` is in `dst`, which nothing else
        // touches while the unpacker lives.
        let mut u = unsafe { Unpacker::new(dbase, count, m.ty, t) }.expect("unpacks");
        assert_eq!(u.capacity(), len);
        for &(pos, k) in &frags {
            assert_eq!(
                u.unpack(t, pos, &stream[pos..pos + k]),
                k,
                "unpacking at {pos}"
            );
        }
        assert_eq!(u.unpack(t, len, &[1, 2, 3]), 0, "past the end");
        assert_eq!(u.error(), None);
        assert_eq!(u.local_len(), len as u64);
    }
    assert!(dst == want, "unpacked bytes differ from the type map's");

    // The round trip (overlapping elements were written in stream order, each with the bytes
    // it was read from: the stream comes back too).
    {
        let dbase = dst.as_ptr().wrapping_offset((lo as isize).wrapping_neg());
        // SAFETY: as for the first packer, over `dst`.
        let mut p = unsafe { Packer::new(dbase, count, m.ty, t) }.expect("packs");
        let mut back = vec![0u8; len];
        assert_eq!(p.pack(t, 0, &mut back), len);
        assert!(back == stream, "the round trip changed the stream");
    }

    // external32: integers and floats big-endian, bytes as they are.
    if elems.iter().any(|(_, e)| e.conv == Conv::Other) || cfg!(target_endian = "big") {
        return;
    }
    let mut ext = Vec::with_capacity(len);
    for (at, e) in &elems {
        let i = (at - lo) as usize;
        let b = &src[i..i + e.size as usize];
        match e.conv {
            Conv::Reverse => ext.extend(b.iter().rev()),
            _ => ext.extend_from_slice(b),
        }
    }
    // SAFETY: as for the first packer.
    let mut p = unsafe { Packer::external(base, count, m.ty, t, Repr::EXTERNAL32) }
        .expect("packs external32");
    assert_eq!(p.packed_len(), len);
    let mut pos = 0;
    while pos < len {
        let k = frag(inp, len - pos).max(16);
        let got = p.pack(t, pos, &mut out[..k]);
        assert!(got > 0 && ends.binary_search(&(pos + got)).is_ok());
        assert_eq!(&out[..got], &ext[pos..pos + got], "external32 at {pos}");
        pos += got;
    }
    assert!(!p.overflowed());
    drop(p);
    let mut dst = vec![0u8; src.len()];
    fill.fill(&mut dst);
    let mut want = dst.clone();
    for (at, e) in &elems {
        let i = (at - lo) as usize;
        let s = e.size as usize;
        want[i..i + s].copy_from_slice(&src[i..i + s]);
    }
    {
        let dbase = dst
            .as_mut_ptr()
            .wrapping_offset((lo as isize).wrapping_neg());
        // SAFETY: as for the first unpacker.
        let mut u = unsafe { Unpacker::new(dbase, count, m.ty, t) }.expect("unpacks");
        u.set_source(t, &Repr::EXTERNAL32)
            .expect("external32 is known");
        let mut pos = 0;
        while pos < len {
            let k = frag(inp, len - pos).min(len - pos);
            assert_eq!(
                u.unpack(t, pos, &ext[pos..pos + k]),
                k,
                "external32 at {pos}"
            );
            pos += k;
        }
        assert_eq!(u.error(), None);
    }
    assert!(dst == want, "external32 unpacked differs from the source");
}
