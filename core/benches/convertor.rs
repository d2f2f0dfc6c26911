//! Throughput of the convertor against plain `memcpy` of the same bytes on this machine:
//! - unpacking a message of doubles (and of ints) that arrives in the local byte order (a copy)
//!   and in the other byte order (every element swapped: receiver makes right);
//! - packing one column of a 4096×4096 matrix of doubles (a vector type: a strided gather).
//!
//! The message is 8 MiB and arrives in 64 KiB fragments, as the PML hands them over. Run with
//! `cargo bench -p stormpi-core --bench convertor`.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::Instant;

use stormpi_core::arch::Endian;
use stormpi_core::arena::{Arena, Sizer};
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::datatype::repr::Repr;
use stormpi_core::datatype::table::TypeTable;
use stormpi_core::datatype::Datatype;
use stormpi_core::params::Params;

const BYTES: usize = 8 << 20;
const FRAG: usize = 64 << 10;

fn table() -> TypeTable {
    let params = Params::new(&[]);
    let mut s = Sizer::default();
    TypeTable::size(&params, &mut s);
    let memory = Box::leak(vec![MaybeUninit::uninit(); s.bytes()].into_boxed_slice());
    TypeTable::new(&params, &mut Arena::new(memory)).unwrap()
}

/// Best of seven runs, in bytes per second.
fn rate(bytes: usize, mut f: impl FnMut()) -> f64 {
    f();
    let best = (0..7)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    bytes as f64 / best
}

/// The other byte order's representation of this machine's types.
fn swapped() -> Repr {
    Repr {
        endian: match Endian::NATIVE {
            Endian::Little => Endian::Big,
            Endian::Big => Endian::Little,
        },
        ..Repr::NATIVE
    }
}

fn unpack_rate(
    types: &TypeTable,
    ty: Datatype,
    from: Option<Repr>,
    src: &[u8],
    dst: &mut [u8],
) -> f64 {
    let count = (dst.len() / ty.size()) as u64;
    rate(src.len(), || {
        // SAFETY: `dst` holds `count` elements and outlives the unpacker.
        let mut u = unsafe { Unpacker::new(dst.as_mut_ptr(), count, ty, types).unwrap() };
        if let Some(r) = from {
            u.set_source(types, &r).unwrap();
        }
        for (i, frag) in src.chunks(FRAG).enumerate() {
            u.unpack(types, i * FRAG, frag);
        }
        assert!(u.error().is_none());
        black_box(&mut *dst);
    })
}

fn main() {
    let types = table();
    let src: Vec<u8> = (0..BYTES).map(|i| (i * 7 + 3) as u8).collect();
    let mut dst = vec![0u8; BYTES];

    let memcpy = rate(BYTES, || {
        for (d, s) in dst.chunks_mut(FRAG).zip(src.chunks(FRAG)) {
            d.copy_from_slice(s);
        }
        black_box(&mut dst);
    });
    let rows = [
        (
            "unpack MPI_DOUBLE, same byte order",
            unpack_rate(&types, Datatype::DOUBLE, None, &src, &mut dst),
        ),
        (
            "unpack MPI_DOUBLE, swapped",
            unpack_rate(&types, Datatype::DOUBLE, Some(swapped()), &src, &mut dst),
        ),
        (
            "unpack MPI_INT, same byte order",
            unpack_rate(&types, Datatype::INT, None, &src, &mut dst),
        ),
        (
            "unpack MPI_INT, swapped",
            unpack_rate(&types, Datatype::INT, Some(swapped()), &src, &mut dst),
        ),
    ];
    // One column of a 4096x4096 matrix of doubles: 4096 strided 8-byte elements.
    let n = 4096usize;
    let matrix: Vec<f64> = (0..n * n).map(|i| i as f64).collect();
    let mut types = types;
    let col = types
        .vector(n as i64, 1, Some(n as i64), None, Datatype::DOUBLE)
        .unwrap();
    types.commit(col).unwrap();
    let mut out = vec![0u8; n * 8];
    let column = rate(n * 8, || {
        // SAFETY: the matrix holds the column's every element and outlives the packer.
        let mut p = unsafe { Packer::new(matrix.as_ptr().cast(), 1, col, &types).unwrap() };
        p.pack(&types, 0, &mut out);
        black_box(&mut out);
    });
    let gb = |r: f64| r / 1e9;
    println!("convertor throughput, 8 MiB in 64 KiB fragments (best of 7)");
    println!("{:<40} {:>9} {:>10}", "case", "GB/s", "vs memcpy");
    println!(
        "{:<40} {:>9.2} {:>10}",
        "memcpy of the same bytes",
        gb(memcpy),
        "1.00"
    );
    for (name, r) in rows {
        println!("{:<40} {:>9.2} {:>10.2}", name, gb(r), r / memcpy);
    }
    println!(
        "{:<40} {:>9.2} {:>10.2}",
        "pack one column of 4096x4096 doubles",
        gb(column),
        column / memcpy
    );
}
