//! The datatype constructors with extreme arguments: counts, strides, displacements and bounds
//! anywhere in their C types (i32::MIN..=i32::MAX, isize::MIN..=isize::MAX), nested several
//! levels over each other's results. Each constructor either refuses, or makes a type whose
//! size, bounds, extent, true bounds and element count equal the reference's, computed in i128
//! where nothing wraps (`stormpi_fuzz::Model`); it never panics and never reports a wrapped value.
//! A type whose every bound fits is never refused (unless memory or the 16-level nesting limit
//! runs out). Every type made is freed again and the table holds no more derived types after.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormpi_fuzz::{free_pool, grow, predefined_pool, with_table, Args, Input};

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    with_table(|t| {
        let mut pool = predefined_pool();
        for _ in 0..10 {
            if inp.is_empty() {
                break;
            }
            if let Some(m) = grow(&mut inp, t, &pool, Args::Extreme) {
                pool.push(m);
            }
        }
        free_pool(t, pool);
    });
});
