//! The target's side of an active message: walking the target type's description over the
//! window's memory, and storing, fetching or combining there.
//!
//! Every message is checked whole before it touches memory — its description well formed, every
//! run inside the window, the data as long as the runs — so a bad message changes nothing.
//! The engine applies one message at a time under its progress, so each operation is atomic with
//! respect to every other operation on this target (the standard's per-element atomicity of
//! accumulates, and more).

use super::wire::WireNode;
use crate::datatype::Datatype;
use crate::op::{self, Op};

/// Deepest loop nesting a description may have (deeper ones are refused, not recursed into).
pub const MAX_NESTING: u32 = 16;

/// Why a message could not be applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A run lies outside the window's memory (`MPI_ERR_RMA_RANGE` at the origin).
    Range,
    /// The description is malformed, or the data does not match it.
    Malformed,
    /// The operation is not defined on the element type.
    Op,
}

/// The memory a window exposes: absolute address ranges `(start, len)`, and where displacement
/// 0 is with its unit (a dynamic window's displacements are addresses: base 0, unit 1).
#[derive(Clone, Copy, Debug)]
pub struct Exposed<'a> {
    /// Address of displacement 0.
    pub base: usize,
    /// Bytes per displacement unit.
    pub unit: usize,
    /// The ranges a message may touch.
    pub regions: &'a [(usize, usize)],
}

impl Exposed<'_> {
    /// The address of a run `off` bytes from displacement `disp`, if all `len` bytes of it lie
    /// in one exposed range.
    pub fn locate(&self, disp: i64, off: i64, len: usize) -> Option<usize> {
        let addr = self.base as i128 + disp as i128 * self.unit as i128 + off as i128;
        let end = addr + len as i128;
        self.regions
            .iter()
            .any(|&(s, l)| addr >= s as i128 && end <= s as i128 + l as i128)
            .then_some(addr as usize)
    }
}

/// The target memory of one message: `count` instances of the description `nodes`, `extent`
/// bytes apart, from displacement `disp`.
#[derive(Clone, Copy, Debug)]
pub struct Span<'a> {
    /// The target type's description.
    pub nodes: &'a [WireNode],
    /// Displacement, in the window's units.
    pub disp: i64,
    /// Instances.
    pub count: u64,
    /// Bytes between instances.
    pub extent: i64,
}

/// Calls `f(offset, bytes)` for every run of `count` instances of the description `nodes`
/// (instances `extent` bytes apart), in the order of the packed stream.
pub fn walk(
    nodes: &[WireNode],
    count: u64,
    extent: i64,
    f: &mut dyn FnMut(i64, usize) -> Result<(), Fault>,
) -> Result<(), Fault> {
    for i in 0..count {
        let at = (i as i64).checked_mul(extent).ok_or(Fault::Malformed)?;
        body(nodes, at, 0, f)?;
    }
    Ok(())
}

fn body(
    nodes: &[WireNode],
    base: i64,
    depth: u32,
    f: &mut dyn FnMut(i64, usize) -> Result<(), Fault>,
) -> Result<(), Fault> {
    if depth > MAX_NESTING {
        return Err(Fault::Malformed);
    }
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        let at = base.checked_add(n.disp).ok_or(Fault::Malformed)?;
        if n.loop_ == 0 {
            let bytes = n
                .count
                .checked_mul(n.size as u64)
                .and_then(|b| usize::try_from(b).ok())
                .ok_or(Fault::Malformed)?;
            if bytes > 0 {
                f(at, bytes)?;
            }
            i += 1;
        } else {
            let b = n.body as usize;
            let inner = nodes.get(i + 1..i + 1 + b).ok_or(Fault::Malformed)?;
            for k in 0..n.count {
                let step = (k as i64).checked_mul(n.stride).ok_or(Fault::Malformed)?;
                body(
                    inner,
                    at.checked_add(step).ok_or(Fault::Malformed)?,
                    depth + 1,
                    f,
                )?;
            }
            i += 1 + b;
        }
    }
    Ok(())
}

/// Checks that every run of the target lies in `mem` and that the runs hold `len` bytes.
pub fn check(mem: &Exposed, t: &Span, len: u64) -> Result<(), Fault> {
    let mut total = 0u64;
    walk(t.nodes, t.count, t.extent, &mut |off, bytes| {
        mem.locate(t.disp, off, bytes).ok_or(Fault::Range)?;
        total += bytes as u64;
        Ok(())
    })?;
    if total == len {
        Ok(())
    } else {
        Err(Fault::Malformed)
    }
}

/// Copies `data` into the target runs (checked by [`check`]).
///
/// # Safety
/// `mem`'s ranges are memory this process lets peers write (the window's), not borrowed by Rust.
pub unsafe fn put(mem: &Exposed, t: &Span, data: &[u8]) -> Result<(), Fault> {
    let mut pos = 0usize;
    walk(t.nodes, t.count, t.extent, &mut |off, bytes| {
        let dst = mem.locate(t.disp, off, bytes).ok_or(Fault::Range)?;
        let src = data.get(pos..pos + bytes).ok_or(Fault::Malformed)?;
        // SAFETY: `locate` put `dst..dst+bytes` inside the window; the caller's contract makes it
        // writable and unaliased by Rust references; `src` is the message, elsewhere.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, bytes) };
        pos += bytes;
        Ok(())
    })
}

/// Copies the target runs into `out`, which holds exactly their bytes.
///
/// # Safety
/// As for [`put`], for reads.
pub unsafe fn get(mem: &Exposed, t: &Span, out: &mut [u8]) -> Result<(), Fault> {
    let mut pos = 0usize;
    walk(t.nodes, t.count, t.extent, &mut |off, bytes| {
        let src = mem.locate(t.disp, off, bytes).ok_or(Fault::Range)?;
        let dst = out.get_mut(pos..pos + bytes).ok_or(Fault::Malformed)?;
        // SAFETY: as in `put`, reading.
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), bytes) };
        pos += bytes;
        Ok(())
    })
}

/// Combines `data` (elements of predefined `dt`) into the target runs with `op`.
///
/// # Safety
/// As for [`put`].
pub unsafe fn accumulate(
    mem: &Exposed,
    t: &Span,
    op: Op,
    dt: Datatype,
    data: &[u8],
) -> Result<(), Fault> {
    if op == Op::NoOp {
        return Ok(());
    }
    let size = dt.size();
    if size == 0 {
        return Err(Fault::Op);
    }
    let mut pos = 0usize;
    walk(t.nodes, t.count, t.extent, &mut |off, bytes| {
        if !bytes.is_multiple_of(size) {
            return Err(Fault::Malformed);
        }
        let dst = mem.locate(t.disp, off, bytes).ok_or(Fault::Range)?;
        let src = data.get(pos..pos + bytes).ok_or(Fault::Malformed)?;
        // SAFETY: as in `put`; the slice lives only for this run and nothing else refers to it.
        let target = unsafe { core::slice::from_raw_parts_mut(dst as *mut u8, bytes) };
        combine(op, dt, target, src)?;
        pos += bytes;
        Ok(())
    })
}

/// `target = data op target` element-wise (`MPI_REPLACE`: `target = data`).
pub fn combine(op: Op, dt: Datatype, target: &mut [u8], data: &[u8]) -> Result<(), Fault> {
    match op {
        Op::NoOp => Ok(()),
        Op::Replace => {
            target.copy_from_slice(data);
            Ok(())
        }
        // The accumulate most codes make, by vectors (bit-identical to the table's loop).
        Op::Sum
            if dt == Datatype::DOUBLE
                && target.len() == data.len()
                && target.len().is_multiple_of(8) =>
        {
            super::bulk::add_f64(target, data);
            Ok(())
        }
        _ => op::apply(op, dt, target, data).map_err(|_| Fault::Op),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(nodes: &[WireNode], disp: i64, count: u64, extent: i64) -> Span<'_> {
        Span {
            nodes,
            disp,
            count,
            extent,
        }
    }

    fn run(disp: i64, count: u64, size: u8) -> WireNode {
        WireNode {
            loop_: 0,
            size,
            _pad: 0,
            body: 0,
            disp,
            count,
            stride: 0,
        }
    }

    fn vector(count: u64, stride: i64, inner: WireNode) -> [WireNode; 2] {
        [
            WireNode {
                loop_: 1,
                size: 0,
                _pad: 0,
                body: 1,
                disp: 0,
                count,
                stride,
            },
            inner,
        ]
    }

    #[test]
    fn a_vector_walks_its_runs_in_stream_order() {
        let nodes = vector(3, 16, run(4, 2, 4));
        let mut seen = heapless::Vec::<(i64, usize), 8>::new();
        walk(&nodes, 2, 48, &mut |o, b| {
            seen.push((o, b)).unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(
            &seen[..],
            &[(4, 8), (20, 8), (36, 8), (52, 8), (68, 8), (84, 8)]
        );
    }

    #[test]
    fn puts_and_gets_go_through_a_strided_type() {
        let mut win = [0u8; 64];
        let at = win.as_mut_ptr() as usize;
        let regions = [(at, win.len())];
        let mem = Exposed {
            base: at,
            unit: 4,
            regions: &regions,
        };
        let nodes = vector(2, 8, run(0, 1, 4));
        let t = sp(&nodes, 2, 1, 16);
        check(&mem, &t, 8).unwrap();
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8];
        // SAFETY: the window is a local array not otherwise borrowed during the call.
        unsafe { put(&mem, &t, &data).unwrap() };
        assert_eq!(&win[8..12], &[1, 2, 3, 4]);
        assert_eq!(&win[16..20], &[5, 6, 7, 8]);
        let mut out = [0u8; 8];
        // SAFETY: as above.
        unsafe { get(&mem, &t, &mut out).unwrap() };
        assert_eq!(out, data);
    }

    #[test]
    fn a_run_past_the_window_is_a_range_fault_and_changes_nothing() {
        let mut win = [0u8; 16];
        let at = win.as_mut_ptr() as usize;
        let regions = [(at, win.len())];
        let mem = Exposed {
            base: at,
            unit: 1,
            regions: &regions,
        };
        let nodes = [run(0, 4, 4)];
        assert_eq!(check(&mem, &sp(&nodes, 4, 1, 16), 16), Err(Fault::Range));
        assert_eq!(check(&mem, &sp(&nodes, -1, 1, 16), 16), Err(Fault::Range));
        assert_eq!(
            check(&mem, &sp(&nodes, 0, 1, 16), 12),
            Err(Fault::Malformed)
        );
        assert!(check(&mem, &sp(&nodes, 0, 1, 16), 16).is_ok());
    }

    #[test]
    fn accumulates_combine_element_wise_with_every_kind_of_op() {
        let mut win = [0u8; 16];
        for (i, c) in win.chunks_mut(4).enumerate() {
            c.copy_from_slice(&(i as i32 + 1).to_ne_bytes());
        }
        let at = win.as_mut_ptr() as usize;
        let regions = [(at, win.len())];
        let mem = Exposed {
            base: at,
            unit: 4,
            regions: &regions,
        };
        let nodes = [run(0, 4, 4)];
        let mut data = [0u8; 16];
        for c in data.chunks_mut(4) {
            c.copy_from_slice(&10i32.to_ne_bytes());
        }
        let ints = |w: &[u8]| -> [i32; 4] {
            core::array::from_fn(|i| i32::from_ne_bytes(w[i * 4..i * 4 + 4].try_into().unwrap()))
        };
        // SAFETY: the window is a local array not otherwise borrowed during the calls.
        unsafe {
            accumulate(&mem, &sp(&nodes, 0, 1, 16), Op::Sum, Datatype::INT, &data).unwrap();
            assert_eq!(ints(&win), [11, 12, 13, 14]);
            accumulate(&mem, &sp(&nodes, 0, 1, 16), Op::NoOp, Datatype::INT, &data).unwrap();
            assert_eq!(ints(&win), [11, 12, 13, 14]);
            accumulate(
                &mem,
                &sp(&nodes, 0, 1, 16),
                Op::Replace,
                Datatype::INT,
                &data,
            )
            .unwrap();
            assert_eq!(ints(&win), [10; 4]);
            accumulate(&mem, &sp(&nodes, 0, 1, 16), Op::Max, Datatype::INT, &data).unwrap();
            assert_eq!(ints(&win), [10; 4]);
        }
    }

    #[test]
    fn a_malformed_description_is_refused_not_recursed() {
        let nodes = [WireNode {
            loop_: 1,
            size: 0,
            _pad: 0,
            body: 5,
            disp: 0,
            count: 1,
            stride: 0,
        }];
        assert_eq!(
            walk(&nodes, 1, 0, &mut |_, _| Ok(())),
            Err(Fault::Malformed)
        );
    }
}
