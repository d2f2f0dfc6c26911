//! Convertors: moving a message's bytes between user memory and fragments, by position.
//!
//! The PML never touches user memory itself. A send asks its [`Packer`] for the packed bytes at
//! any offset of the message; a receive hands each arriving fragment to its [`Unpacker`] with the
//! fragment's offset, in any order.
//!
//! A message is a *stream*: the basic elements of `count` instances of a datatype, in type-map
//! order, each in the stream's representation. Between peers of one architecture the stream is in
//! native form and a dense type (one run of bytes per instance, no gaps) is a plain bounded copy —
//! the fast path. Otherwise the convertor walks the type's flattened description ([`Node`]s):
//! a [`Cursor`] says where in the description a stream position falls, kept between calls so the
//! next fragment resumes in O(1); a position elsewhere is found by arithmetic (`seek`), not by
//! replaying the walk. A run of elements is one copy (or one conversion call), a vector is a loop
//! over such copies.
//!
//! Receiver makes right: a sender packs native bytes, cut at element boundaries when its peer
//! converts ([`Packer::whole_elements`]); the receiver learns the sender's representation at
//! match time ([`Unpacker::set_source`]) and converts while unpacking. `MPI_Pack_external` packs
//! into `external32` with the same walk ([`Packer::external`]).
//!
//! A convertor holds a raw pointer to memory the user lent for the life of a request: that loan
//! is the one boundary here, stated on the constructors.
//!
//! Memory positions are computed with wrapping arithmetic, from a base that may be anywhere
//! (`MPI_BOTTOM` is address 0): a loop's base can lie outside the type's bounds (a loop at
//! `isize::MIN` whose body starts 36 bytes up, moved 4 bytes down), and only the elements'
//! final addresses are the type's, which its constructor checked fit.

use core::sync::atomic::{AtomicU32, Ordering};

use super::desc::{Basic, Node};
use super::repr::{convert, Fault, Repr};
use super::table::{TypeTable, MAX_DEPTH};
use super::Datatype;
use crate::btl::DataRef;
use crate::error::{Error, ErrorClass, Reason, Result};

/// One enclosing loop of the cursor's position.
#[derive(Clone, Copy, Debug, Default)]
struct Level {
    /// Index of the loop node.
    node: u32,
    /// Current iteration.
    iter: u32,
    /// Memory base outside the loop.
    outer: isize,
}

/// Where a stream position falls in a type's description.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    /// The stream position this cursor stands at.
    pos: u64,
    /// Instance of the type (0..count).
    inst: u64,
    /// Current node: a run with data, once settled.
    at: u32,
    /// Stream bytes of the current run already passed.
    off: u64,
    /// Memory offset of the current nesting level's base from the buffer.
    base: isize,
    /// Enclosing loops.
    depth: u8,
    levels: [Level; MAX_DEPTH],
}

/// The fixed facts of a typed stream.
#[derive(Clone, Copy, Debug)]
struct Shape {
    ty: Datatype,
    count: u64,
    extent: isize,
    /// Stream bytes of one instance.
    inst: u64,
    /// The stream's representation (memory is always native).
    stream: Repr,
    /// Whether elements change form between stream and memory.
    convert: bool,
    /// The memory holds the stream itself, already packed (a buffered send's copy): the walk
    /// only finds element boundaries.
    packed: bool,
    /// The whole message as one run, when the type is one dense run (then `count` is 1): a
    /// converted array of a predefined type is one conversion call per fragment, not one per
    /// element.
    flat: Option<Node>,
}

impl Shape {
    /// The description to walk: the type's, or the one flat run.
    fn nodes<'a>(&self, types: &'a TypeTable, flat: &'a mut [Node; 1]) -> Option<&'a [Node]> {
        match self.flat {
            Some(n) => {
                flat[0] = n;
                Some(&flat[..])
            }
            None => types.nodes(self.ty).ok(),
        }
    }
}

/// A contiguous piece of the walk: `bytes` stream bytes (`elems` whole elements when converting)
/// of element `basic`, at memory offset `mem` from the buffer.
#[derive(Clone, Copy, Debug)]
struct Piece {
    mem: isize,
    basic: Basic,
    bytes: u64,
    elems: u64,
}

impl Cursor {
    fn start() -> Cursor {
        Cursor {
            pos: 0,
            inst: 0,
            at: 0,
            off: 0,
            base: 0,
            depth: 0,
            levels: [Level::default(); MAX_DEPTH],
        }
    }

    fn body_end(&self, nodes: &[Node]) -> usize {
        match self.depth {
            0 => nodes.len(),
            d => {
                let l = self.levels[d as usize - 1].node as usize;
                l + nodes[l].span()
            }
        }
    }

    /// Moves forward to the next run with data and returns it (`disp, count, basic`); `None`
    /// past the last instance.
    fn settle(&mut self, nodes: &[Node], shape: &Shape) -> Option<(isize, u64, Basic)> {
        while self.inst < shape.count {
            let at = self.at as usize;
            if at == self.body_end(nodes) {
                if self.depth == 0 {
                    self.inst += 1;
                    self.at = 0;
                    self.base = (self.inst as isize).wrapping_mul(shape.extent);
                    continue;
                }
                let l = &mut self.levels[self.depth as usize - 1];
                let Node::Loop {
                    disp,
                    count,
                    stride,
                    ..
                } = nodes[l.node as usize]
                else {
                    // Levels are pushed on loops only; were one not, the walk ends here, short.
                    debug_assert!(false, "a level on a run");
                    self.inst = shape.count;
                    return None;
                };
                l.iter += 1;
                if (l.iter as u64) < count {
                    self.at = l.node + 1;
                    self.base = l
                        .outer
                        .wrapping_add(disp)
                        .wrapping_add((l.iter as isize).wrapping_mul(stride));
                } else {
                    self.at = l.node + nodes[l.node as usize].span() as u32;
                    self.base = l.outer;
                    self.depth -= 1;
                }
                continue;
            }
            match nodes[at] {
                Node::Run { disp, count, basic } if count > 0 => return Some((disp, count, basic)),
                Node::Run { .. } => self.at += 1,
                Node::Loop { count: 0, .. } => self.at += nodes[at].span() as u32,
                Node::Loop { disp, .. } => {
                    self.levels[self.depth as usize] = Level {
                        node: at as u32,
                        iter: 0,
                        outer: self.base,
                    };
                    self.depth += 1;
                    self.base = self.base.wrapping_add(disp);
                    self.at += 1;
                }
            }
        }
        None
    }

    /// A cursor at stream position `pos`, found by arithmetic.
    fn seek(nodes: &[Node], shape: &Shape, pos: u64) -> Cursor {
        let mut c = Cursor::start();
        c.pos = pos;
        // A message without data (no instances, or empty ones) ends everywhere.
        c.inst = pos.checked_div(shape.inst).unwrap_or(shape.count);
        c.base = (c.inst as isize).wrapping_mul(shape.extent);
        if c.inst >= shape.count {
            return c;
        }
        let mut rem = pos % shape.inst;
        loop {
            let at = c.at as usize;
            let size = node_stream(nodes, at, shape);
            if rem >= size {
                rem -= size;
                c.at += nodes[at].span() as u32;
                continue;
            }
            match nodes[at] {
                Node::Run { .. } => {
                    c.off = rem;
                    return c;
                }
                Node::Loop {
                    disp,
                    count,
                    stride,
                    ..
                } => {
                    let per = size / count;
                    let iter = rem / per;
                    rem %= per;
                    c.levels[c.depth as usize] = Level {
                        node: at as u32,
                        iter: iter as u32,
                        outer: c.base,
                    };
                    c.depth += 1;
                    c.base = c
                        .base
                        .wrapping_add(disp)
                        .wrapping_add((iter as isize).wrapping_mul(stride));
                    c.at += 1;
                }
            }
        }
    }

    /// Walks `len` stream bytes from `pos` (seeking first if the cursor is elsewhere), handing
    /// each contiguous piece to `visit`; stops early at an element boundary when `whole` and the
    /// next element does not fit. Returns the stream bytes walked.
    fn walk(
        &mut self,
        nodes: &[Node],
        shape: &Shape,
        pos: u64,
        len: u64,
        whole: bool,
        mut visit: impl FnMut(Piece),
    ) -> u64 {
        if self.pos != pos {
            *self = Cursor::seek(nodes, shape, pos);
        }
        let mut on = self.settle(nodes, shape);
        let mut done = 0u64;
        while done < len {
            let Some((disp, count, basic)) = on else {
                break;
            };
            let es = if shape.convert {
                shape.stream.size(basic.elem) as u64
            } else {
                basic.size as u64
            };
            let run = count * es;
            // A vector's column: the run is a whole loop body; take every iteration that fits.
            if !shape.convert && self.off == 0 && self.depth > 0 && run <= len - done {
                let l = self.levels[self.depth as usize - 1];
                if let Node::Loop {
                    count: iters,
                    stride,
                    body: 1,
                    ..
                } = nodes[l.node as usize]
                {
                    let n = (iters - l.iter as u64).min((len - done) / run);
                    for k in 0..n as isize {
                        visit(Piece {
                            mem: self
                                .base
                                .wrapping_add(disp)
                                .wrapping_add(k.wrapping_mul(stride)),
                            basic,
                            bytes: run,
                            elems: count,
                        });
                    }
                    done += n * run;
                    // Stand on the end of the last iteration taken; the step below moves on.
                    let last = &mut self.levels[self.depth as usize - 1];
                    last.iter += n as u32 - 1;
                    self.base = self
                        .base
                        .wrapping_add((n as isize - 1).wrapping_mul(stride));
                    self.off = run;
                }
            }
            if self.off < run {
                if shape.convert && !self.off.is_multiple_of(es) {
                    // Only a corrupt peer starts a fragment inside an element.
                    break;
                }
                let mut take = (run - self.off).min(len - done);
                if whole || shape.convert {
                    take -= take % es;
                    if take == 0 {
                        break;
                    }
                }
                let mem = if shape.convert {
                    (self.off / es) * basic.size as u64
                } else {
                    self.off
                };
                visit(Piece {
                    mem: self.base.wrapping_add(disp).wrapping_add(mem as isize),
                    basic,
                    bytes: take,
                    elems: take / es,
                });
                done += take;
                self.off += take;
            }
            if self.off == run {
                self.off = 0;
                self.at += 1;
                on = self.settle(nodes, shape);
            }
        }
        self.pos = pos + done;
        done
    }

    /// Stream bytes of the element the cursor stands before (0 at the end).
    fn elem_stream(&self, nodes: &[Node], shape: &Shape) -> u64 {
        match nodes.get(self.at as usize) {
            Some(Node::Run { basic, .. }) if self.inst < shape.count => {
                shape.stream.size(basic.elem) as u64
            }
            _ => 0,
        }
    }
}

/// Stream bytes of node `at` (with its body).
fn node_stream(nodes: &[Node], at: usize, shape: &Shape) -> u64 {
    match nodes[at] {
        Node::Run { count, basic, .. } => {
            let es = if shape.convert {
                shape.stream.size(basic.elem)
            } else {
                basic.size as usize
            };
            count * es as u64
        }
        Node::Loop {
            count,
            body,
            packed,
            ..
        } => {
            if shape.convert {
                count
                    * super::desc::stream_size(
                        &nodes[at + 1..at + 1 + body as usize],
                        &shape.stream,
                    )
            } else {
                count * packed
            }
        }
    }
}

/// How a convertor reaches its bytes.
// The cursor lives inline in the request slot: no heap in the core, one size for every slot.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// `len` bytes from `base + at`, copied as they are; fragments may be cut every `granule`
    /// bytes (the element size when the peer converts).
    Dense { at: isize, len: usize, granule: u8 },
    /// A walk of the type's description.
    Typed { shape: Shape, cur: Cursor },
}

/// The datatype, count and hold of a typed convertor.
#[derive(Clone, Copy, Debug)]
struct Typing {
    ty: Datatype,
    count: u64,
    hold: Option<&'static AtomicU32>,
}

fn typing(types: &TypeTable, ty: Datatype, count: u64) -> Result<(Typing, Layout)> {
    let info = *types.check_committed(ty)?;
    let hold = types.hold(ty);
    let t = Typing { ty, count, hold };
    let layout = match (info.dense_at, info.uniform) {
        (Some(at), Some(basic)) => Layout::Dense {
            at,
            len: (count * info.size) as usize,
            granule: basic.size,
        },
        _ => typed(types, ty, count, Repr::NATIVE)?,
    };
    Ok((t, layout))
}

fn typed(types: &TypeTable, ty: Datatype, count: u64, stream: Repr) -> Result<Layout> {
    let info = types.info(ty)?;
    let convert = !stream.same_as(&Repr::NATIVE);
    let inst = if convert {
        types.stream_size(ty, &stream)?
    } else {
        info.size
    };
    let (flat, count, inst) = match (info.dense_at, info.uniform) {
        (Some(disp), Some(basic)) if inst > 0 => {
            let run = Node::Run {
                disp,
                count: count * info.elems,
                basic,
            };
            (Some(run), count.min(1), count * inst)
        }
        _ => (None, count, inst),
    };
    Ok(Layout::Typed {
        shape: Shape {
            ty,
            count: if inst == 0 { 0 } else { count },
            extent: info.extent,
            inst,
            stream,
            convert,
            packed: false,
            flat,
        },
        cur: Cursor::start(),
    })
}

fn total(layout: &Layout) -> usize {
    match layout {
        Layout::Dense { len, .. } => *len,
        Layout::Typed { shape, .. } => (shape.count * shape.inst) as usize,
    }
}

fn release(typing: &Option<Typing>) {
    if let Some(Typing { hold: Some(h), .. }) = typing {
        h.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What went wrong converting a message's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvError {
    /// A value did not fit its destination type (its truncation was stored).
    Overflow,
    /// A `long double` arrived in a format that cannot be converted to this machine's.
    LongDoubleFormat,
    /// A fragment from a converting peer did not end on an element boundary.
    Misaligned,
}

impl From<Fault> for ConvError {
    fn from(f: Fault) -> ConvError {
        match f {
            Fault::Overflow => ConvError::Overflow,
            Fault::LongDoubleFormat => ConvError::LongDoubleFormat,
        }
    }
}

impl ConvError {
    /// The error to report in the request's status.
    pub fn to_error(self) -> Error {
        match self {
            ConvError::Overflow => Error::new(
                ErrorClass::ValueTooLarge,
                Reason::BadArgument {
                    what: "a received value does not fit the receiving type on this architecture (e.g. a 64-bit long into a 32-bit long)",
                },
            ),
            ConvError::LongDoubleFormat => Error::new(
                ErrorClass::UnsupportedOperation,
                Reason::BadArgument {
                    what: "a long double from a peer whose long double format cannot be converted to this machine's (e.g. IBM double-double); zero was stored",
                },
            ),
            ConvError::Misaligned => Error::new(
                ErrorClass::Other,
                Reason::BadArgument {
                    what: "a fragment from a peer of another architecture split an element; the rest of the message was dropped",
                },
            ),
        }
    }
}

/// Reads a message out of user memory.
pub struct Packer {
    base: *const u8,
    layout: Layout,
    typing: Option<Typing>,
    whole: bool,
    overflow: bool,
}

/// Writes a message into user memory.
pub struct Unpacker {
    base: *mut u8,
    layout: Layout,
    typing: Option<Typing>,
    error: Option<ConvError>,
    /// Native bytes written (for the status of a converted message).
    local: u64,
    /// The start of an element cut by a storage boundary, waiting for its rest.
    carry: Carry,
}

/// Part of one element, kept until the bytes that follow it arrive.
#[derive(Clone, Copy, Debug, Default)]
struct Carry {
    pos: u64,
    len: u8,
    need: u8,
    bytes: [u8; 16],
}

// SAFETY: a convertor is only a loan of user memory (and an atomic hold on its type); the
// constructors' contract makes the memory valid for the request's life, whichever thread
// progresses the request.
unsafe impl Send for Packer {}
// SAFETY: as for `Packer`.
unsafe impl Send for Unpacker {}

impl Drop for Packer {
    fn drop(&mut self) {
        release(&self.typing);
    }
}

impl Drop for Unpacker {
    fn drop(&mut self) {
        release(&self.typing);
    }
}

/// Copies `n` bytes of a contiguous message, once per message: the common element sizes and
/// one- and two-byte messages as single moves. (Written out rather than calling
/// [`copy_piece`] for the rest: that cost the windowed 1-byte sender 5 instructions.)
///
/// # Safety
/// `src..src+n` readable, `dst..dst+n` writable, not overlapping.
#[inline(always)]
unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        match n {
            8 => dst
                .cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned()),
            4 => dst
                .cast::<u32>()
                .write_unaligned(src.cast::<u32>().read_unaligned()),
            16 => dst
                .cast::<u128>()
                .write_unaligned(src.cast::<u128>().read_unaligned()),
            2 => dst
                .cast::<u16>()
                .write_unaligned(src.cast::<u16>().read_unaligned()),
            1 => dst.write(src.read()),
            _ => core::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// Copies one piece of a typed message, the common element sizes as single loads and stores.
/// Three sizes only: with five the choice became a jump table, ~1.5 instructions more per
/// element of a vector type.
///
/// # Safety
/// As for [`copy`].
#[inline(always)]
unsafe fn copy_piece(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        match n {
            8 => dst
                .cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned()),
            4 => dst
                .cast::<u32>()
                .write_unaligned(src.cast::<u32>().read_unaligned()),
            16 => dst
                .cast::<u128>()
                .write_unaligned(src.cast::<u128>().read_unaligned()),
            _ => core::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

impl Packer {
    /// A packer over `len` contiguous bytes at `base`.
    ///
    /// # Safety
    /// `base..base+len` must stay valid for reads, and unchanged, until the request that owns
    /// this packer completes (MPI's rule for send buffers). `base` may be dangling if `len` is 0.
    pub unsafe fn contiguous(base: *const u8, len: usize) -> Packer {
        Packer {
            base,
            layout: Layout::Dense {
                at: 0,
                len,
                granule: 1,
            },
            typing: None,
            whole: false,
            overflow: false,
        }
    }

    /// A packer over a borrowed slice, for sends that complete before the borrow ends.
    pub fn from_slice(data: &[u8]) -> Packer {
        // SAFETY: the slice is valid for its length; the caller completes the send before the
        // borrow ends (this constructor's documented use).
        unsafe { Packer::contiguous(data.as_ptr(), data.len()) }
    }

    /// A packer over `count` instances of committed type `ty` at `base`, in native form.
    ///
    /// # Safety
    /// Every byte the type map of `count` instances touches, from `base`, must stay valid for
    /// reads and unchanged until the request that owns this packer completes.
    pub unsafe fn new(
        base: *const u8,
        count: u64,
        ty: Datatype,
        types: &TypeTable,
    ) -> Result<Packer> {
        let (t, layout) = typing(types, ty, count)?;
        Ok(Packer {
            base,
            layout,
            typing: Some(t),
            whole: false,
            overflow: false,
        })
    }

    /// A packer over `count` elements of predefined contiguous type `ty` (no table needed).
    ///
    /// # Safety
    /// As for [`Packer::contiguous`], over `count * ty.size()` bytes.
    pub unsafe fn elements(base: *const u8, count: usize, ty: Datatype) -> Packer {
        debug_assert!(ty.is_contiguous());
        Packer {
            base,
            layout: Layout::Dense {
                at: 0,
                len: count * ty.size(),
                granule: ty.size() as u8,
            },
            typing: Some(Typing {
                ty,
                count: count as u64,
                hold: None,
            }),
            whole: false,
            overflow: false,
        }
    }

    /// A packer over `count` instances of `ty` already packed at `base` (in native form), which
    /// can still cut fragments at element boundaries for a converting receiver.
    ///
    /// # Safety
    /// As for [`Packer::contiguous`], over the packed size of the instances.
    pub unsafe fn packed(
        base: *const u8,
        count: u64,
        ty: Datatype,
        types: &TypeTable,
    ) -> Result<Packer> {
        // SAFETY: the caller's contract covers the packed bytes, which are all this reads.
        let mut p = unsafe { Packer::new(base, count, ty, types)? };
        match &mut p.layout {
            Layout::Dense { at, .. } => *at = 0,
            Layout::Typed { shape, .. } => shape.packed = true,
        }
        Ok(p)
    }

    /// A packer that writes `count` instances of `ty` in representation `repr` (`external32` for
    /// `MPI_Pack_external`).
    ///
    /// # Safety
    /// As for [`Packer::new`].
    pub unsafe fn external(
        base: *const u8,
        count: u64,
        ty: Datatype,
        types: &TypeTable,
        repr: Repr,
    ) -> Result<Packer> {
        types.check_committed(ty)?;
        let hold = types.hold(ty);
        let typing = Some(Typing { ty, count, hold });
        let layout = match typed(types, ty, count, repr) {
            Ok(l) => l,
            Err(e) => {
                release(&typing);
                return Err(e);
            }
        };
        Ok(Packer {
            base,
            layout,
            typing,
            whole: false,
            overflow: false,
        })
    }

    /// Cuts every pack at an element boundary: the receiver converts, element by element.
    pub fn whole_elements(&mut self) {
        self.whole = true;
    }

    /// Packed size of the whole message.
    #[inline]
    pub fn packed_len(&self) -> usize {
        total(&self.layout)
    }

    /// Whether a value did not fit the target representation (external32 packing).
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// The user memory holding packed bytes `pos..pos + len`, when the message is stored
    /// contiguously (so a transport can send it without packing) and that range may be sent as
    /// one fragment.
    #[inline]
    pub fn data_ref(&self, pos: usize, len: usize) -> Option<DataRef> {
        let Layout::Dense {
            at,
            len: total,
            granule,
        } = self.layout
        else {
            return None;
        };
        if pos.checked_add(len)? > total
            || (self.whole && (!len.is_multiple_of(granule as usize) && pos + len != total))
        {
            return None;
        }
        // SAFETY: `pos + len <= total` of the loan, which the constructor's contract keeps valid
        // and unchanged until the request completes; the PML completes a request only after every
        // send reading from it has been reported complete.
        Some(unsafe { DataRef::new(self.base.wrapping_offset(at).wrapping_add(pos), len) })
    }

    /// How many of `want` bytes from `pos` one fragment should carry; never 0 unless the message
    /// is done. When the peer converts, a contiguous message's length is cut to whole elements;
    /// a typed message's is not (its element boundaries are in the type's description), so
    /// reserve this much and send what [`Packer::pack`] returns, which never splits an element.
    pub fn fragment_len(&self, pos: usize, want: usize) -> usize {
        let n = want.min(self.packed_len().saturating_sub(pos));
        match self.layout {
            Layout::Dense { granule, .. } if self.whole && pos + n != self.packed_len() => {
                let g = granule as usize;
                (n - n % g).max(g.min(n))
            }
            _ => n,
        }
    }

    /// Copies packed bytes starting at `pos` into `out`; returns how many: `out.len()`, fewer at
    /// the end of the message, or fewer to end on an element boundary when the receiver converts.
    #[inline(always)]
    pub fn pack(&mut self, types: &TypeTable, pos: usize, out: &mut [u8]) -> usize {
        match &mut self.layout {
            Layout::Dense { at, len, granule } => {
                if pos >= *len {
                    return 0;
                }
                let mut n = out.len().min(*len - pos);
                if self.whole && pos + n != *len {
                    n -= n % *granule as usize;
                }
                // SAFETY: `pos + n <= len`, and the constructor's contract makes the type's
                // bytes from `base` readable; `out` holds at least `n` bytes.
                unsafe {
                    copy(
                        self.base.wrapping_offset(*at).wrapping_add(pos),
                        out.as_mut_ptr(),
                        n,
                    )
                };
                n
            }
            Layout::Typed { .. } => self.pack_typed(types, pos, out),
        }
    }

    // Out of line: the dense case above is the common one and stays small enough to inline.
    // `pack` calls it for typed layouts only; a dense one would go the dense way.
    #[inline(never)]
    fn pack_typed(&mut self, types: &TypeTable, pos: usize, out: &mut [u8]) -> usize {
        match &mut self.layout {
            Layout::Dense { .. } => self.pack(types, pos, out),
            Layout::Typed { shape, cur } => {
                let mut flat = [Node::Run {
                    disp: 0,
                    count: 0,
                    basic: Basic::native(super::repr::Elem::Byte),
                }];
                let Some(nodes) = shape.nodes(types, &mut flat) else {
                    return 0;
                };
                let base = self.base;
                let shape = *shape;
                let mut w = 0usize;
                let mut overflow = false;
                cur.walk(
                    nodes,
                    &shape,
                    pos as u64,
                    out.len() as u64,
                    self.whole,
                    |p| {
                        let dst = &mut out[w..w + p.bytes as usize];
                        // SAFETY: `p.mem` is an offset the type map of the loaned instances
                        // touches, so (by the constructor's contract) readable for the element.
                        unsafe {
                            let src = if shape.packed {
                                base.add(pos + w)
                            } else {
                                base.wrapping_offset(p.mem)
                            };
                            if shape.convert {
                                let n = p.elems as usize;
                                let src =
                                    core::slice::from_raw_parts(src, n * p.basic.size as usize);
                                overflow |= convert(
                                    p.basic.elem,
                                    &Repr::NATIVE,
                                    src,
                                    &shape.stream,
                                    dst,
                                    n,
                                )
                                .is_err();
                            } else {
                                copy_piece(src, dst.as_mut_ptr(), p.bytes as usize);
                            }
                        }
                        w += p.bytes as usize;
                    },
                );
                self.overflow |= overflow;
                w
            }
        }
    }
}

impl Unpacker {
    /// An unpacker into `len` contiguous bytes at `base`.
    ///
    /// # Safety
    /// `base..base+len` must stay valid for writes, and not be accessed otherwise, until the
    /// request that owns this unpacker completes. `base` may be dangling if `len` is 0.
    pub unsafe fn contiguous(base: *mut u8, len: usize) -> Unpacker {
        Unpacker {
            base,
            layout: Layout::Dense {
                at: 0,
                len,
                granule: 1,
            },
            typing: None,
            error: None,
            local: 0,
            carry: Carry::default(),
        }
    }

    /// An unpacker into a borrowed slice, for receives that complete before the borrow ends.
    pub fn from_slice(data: &mut [u8]) -> Unpacker {
        // SAFETY: the slice is valid and exclusively ours for its length; the caller completes
        // the receive before the borrow ends (this constructor's documented use).
        unsafe { Unpacker::contiguous(data.as_mut_ptr(), data.len()) }
    }

    /// An unpacker with room for nothing (zero-byte messages, barriers).
    pub fn empty() -> Unpacker {
        // SAFETY: nothing is ever written through a zero-length loan.
        unsafe { Unpacker::contiguous(core::ptr::NonNull::dangling().as_ptr(), 0) }
    }

    /// An unpacker into `count` instances of committed type `ty` at `base`.
    ///
    /// # Safety
    /// Every byte the type map of `count` instances touches, from `base`, must stay valid for
    /// writes, and not be accessed otherwise, until the request that owns this unpacker completes.
    pub unsafe fn new(
        base: *mut u8,
        count: u64,
        ty: Datatype,
        types: &TypeTable,
    ) -> Result<Unpacker> {
        let (t, layout) = typing(types, ty, count)?;
        Ok(Unpacker {
            base,
            layout,
            typing: Some(t),
            error: None,
            local: 0,
            carry: Carry::default(),
        })
    }

    /// An unpacker into `count` elements of predefined contiguous type `ty` (no table needed).
    ///
    /// # Safety
    /// As for [`Unpacker::contiguous`], over `count * ty.size()` bytes.
    pub unsafe fn elements(base: *mut u8, count: usize, ty: Datatype) -> Unpacker {
        debug_assert!(ty.is_contiguous());
        Unpacker {
            base,
            layout: Layout::Dense {
                at: 0,
                len: count * ty.size(),
                granule: ty.size() as u8,
            },
            typing: Some(Typing {
                ty,
                count: count as u64,
                hold: None,
            }),
            error: None,
            local: 0,
            carry: Carry::default(),
        }
    }

    /// The message arrives in representation `repr` (its sender's, or `external32`): convert
    /// while unpacking. Byte-only unpackers (no datatype) take bytes as they come.
    #[inline]
    pub fn set_source(&mut self, types: &TypeTable, repr: &Repr) -> Result<()> {
        match (&self.typing, &self.layout) {
            (None, _) => Ok(()),
            (Some(_), Layout::Dense { .. }) if repr.same_as(&Repr::NATIVE) => Ok(()),
            _ => self.set_source_typed(types, repr),
        }
    }

    #[inline(never)]
    fn set_source_typed(&mut self, types: &TypeTable, repr: &Repr) -> Result<()> {
        let Some(t) = self.typing else { return Ok(()) };
        let native = repr.same_as(&Repr::NATIVE);
        match self.layout {
            Layout::Dense { .. } if native => Ok(()),
            Layout::Typed { shape, .. } if shape.stream.same_as(repr) => Ok(()),
            _ => {
                self.layout = typed(types, t.ty, t.count, *repr)?;
                Ok(())
            }
        }
    }

    /// Capacity in stream bytes: what fits without truncation.
    #[inline]
    pub fn capacity(&self) -> usize {
        total(&self.layout)
    }

    /// Whether this unpacker keeps a derived type alive (until it is dropped); one over a
    /// predefined type holds nothing.
    #[inline]
    pub fn retains_type(&self) -> bool {
        self.typing.as_ref().is_some_and(|t| t.hold.is_some())
    }

    /// The first conversion error, if any (an element left incomplete counts as one).
    pub fn error(&self) -> Option<ConvError> {
        self.error
            .or((self.carry.len > 0).then_some(ConvError::Misaligned))
    }

    /// Native bytes written so far (equal to the stream bytes unless converting).
    pub fn local_len(&self) -> u64 {
        self.local
    }

    /// Where stream bytes `pos..pos + len` go in user memory, when a transport may write them
    /// there itself: the message is stored contiguously in native form and the range is inside
    /// the capacity. The transport reports what it wrote with [`Unpacker::placed`].
    #[inline]
    pub fn dest_ref(&self, pos: usize, len: usize) -> Option<*mut u8> {
        let Layout::Dense { at, len: total, .. } = self.layout else {
            return None;
        };
        if pos.checked_add(len)? > total || self.carry.len > 0 {
            return None;
        }
        Some(self.base.wrapping_offset(at).wrapping_add(pos))
    }

    /// Counts `len` bytes a transport wrote where [`Unpacker::dest_ref`] said.
    #[inline]
    pub fn placed(&mut self, len: usize) {
        self.local += len as u64;
    }

    /// Writes `data`, which sits at stream offset `pos` of the message. Bytes beyond the
    /// capacity are dropped (the caller reports the truncation); returns how many were taken.
    ///
    /// When converting, a piece that ends inside an element (unexpected-message storage cuts
    /// where it likes) keeps that element's start until a piece continuing it arrives.
    #[inline(always)]
    pub fn unpack(&mut self, types: &TypeTable, pos: usize, data: &[u8]) -> usize {
        let c = self.carry;
        if c.len == 0 || pos as u64 != c.pos + c.len as u64 {
            return self.unpack_at(types, pos, data);
        }
        let k = ((c.need - c.len) as usize).min(data.len());
        let mut whole = c;
        whole.bytes[c.len as usize..c.len as usize + k].copy_from_slice(&data[..k]);
        whole.len += k as u8;
        if whole.len < whole.need {
            self.carry = whole;
            return k;
        }
        self.carry = Carry::default();
        self.unpack_at(
            types,
            whole.pos as usize,
            &whole.bytes[..whole.need as usize],
        );
        k + self.unpack_at(types, pos + k, &data[k..])
    }

    #[inline]
    fn unpack_at(&mut self, types: &TypeTable, pos: usize, data: &[u8]) -> usize {
        match &mut self.layout {
            Layout::Dense { at, len, .. } => {
                if pos >= *len {
                    return 0;
                }
                let n = data.len().min(*len - pos);
                // SAFETY: `pos + n <= len`, and the constructor's contract makes the loaned
                // bytes writable and unaliased for the request's life; `data` holds `n` bytes.
                unsafe {
                    copy(
                        data.as_ptr(),
                        self.base.wrapping_offset(*at).wrapping_add(pos),
                        n,
                    )
                };
                self.local += n as u64;
                n
            }
            Layout::Typed { .. } => self.unpack_typed(types, pos, data),
        }
    }

    // Out of line, as for packing (and a dense layout, likewise, would go the dense way).
    #[inline(never)]
    fn unpack_typed(&mut self, types: &TypeTable, pos: usize, data: &[u8]) -> usize {
        match &mut self.layout {
            Layout::Dense { .. } => self.unpack_at(types, pos, data),
            Layout::Typed { shape, cur } => {
                let mut flat = [Node::Run {
                    disp: 0,
                    count: 0,
                    basic: Basic::native(super::repr::Elem::Byte),
                }];
                let Some(nodes) = shape.nodes(types, &mut flat) else {
                    return 0;
                };
                let base = self.base;
                let shape = *shape;
                let want =
                    (data.len() as u64).min((shape.count * shape.inst).saturating_sub(pos as u64));
                let mut r = 0usize;
                let mut local = 0u64;
                let mut fault = None;
                let done = cur.walk(nodes, &shape, pos as u64, want, false, |p| {
                    let src = &data[r..r + p.bytes as usize];
                    // SAFETY: `p.mem` is an offset the type map of the loaned instances touches,
                    // so (by the constructor's contract) writable for the element.
                    unsafe {
                        let dst = base.wrapping_offset(p.mem);
                        if shape.convert {
                            let n = p.elems as usize;
                            let bytes = n * p.basic.size as usize;
                            let dst = core::slice::from_raw_parts_mut(dst, bytes);
                            if let Err(f) =
                                convert(p.basic.elem, &shape.stream, src, &Repr::NATIVE, dst, n)
                            {
                                fault = fault.or(Some(f));
                            }
                            local += bytes as u64;
                        } else {
                            copy_piece(src.as_ptr(), dst, p.bytes as usize);
                            local += p.bytes;
                        }
                    }
                    r += p.bytes as usize;
                });
                if let (Some(f), None) = (fault, self.error) {
                    self.error = Some(f.into());
                }
                self.local += local;
                let rest = want - done;
                if rest == 0 {
                    return done as usize;
                }
                let es = cur.elem_stream(nodes, &shape);
                if rest < es && cur.off.is_multiple_of(es) {
                    let mut bytes = [0u8; 16];
                    bytes[..rest as usize].copy_from_slice(&data[done as usize..want as usize]);
                    self.carry = Carry {
                        pos: pos as u64 + done,
                        len: rest as u8,
                        need: es as u8,
                        bytes,
                    };
                    return want as usize;
                }
                if self.error.is_none() {
                    self.error = Some(ConvError::Misaligned);
                }
                done as usize
            }
        }
    }
}

/// Native bytes and basic elements in the first `bytes` stream bytes of `count` instances of
/// `ty` in representation `stream`; `elems` is `None` when `bytes` ends inside an element.
pub fn prefix(
    types: &TypeTable,
    ty: Datatype,
    stream: &Repr,
    bytes: u64,
) -> Result<(u64, Option<u64>)> {
    let info = *types.info(ty)?;
    let nodes = types.nodes(ty)?;
    let inst = types.stream_size(ty, stream)?;
    if inst == 0 {
        return Ok((0, Some(0)));
    }
    let (full, rem) = (bytes / inst, bytes % inst);
    let (native, elems, partial) = prefix_of(nodes, stream, rem);
    Ok((
        full * info.size + native,
        (!partial).then_some(full * info.elems + elems),
    ))
}

/// (native bytes, whole elements, ends inside an element) of the first `rem` stream bytes of
/// one instance of `nodes`.
fn prefix_of(nodes: &[Node], stream: &Repr, mut rem: u64) -> (u64, u64, bool) {
    let (mut native, mut elems) = (0u64, 0u64);
    let mut i = 0;
    while i < nodes.len() && rem > 0 {
        match nodes[i] {
            Node::Run { count, basic, .. } => {
                let es = stream.size(basic.elem) as u64;
                let k = (rem / es).min(count);
                native += k * basic.size as u64;
                elems += k;
                rem -= k * es;
                if k < count && rem > 0 {
                    // Inside an element: between peers of one form its bytes count one for one.
                    return (native + rem.min(basic.size as u64), elems, true);
                }
            }
            Node::Loop {
                count,
                body,
                packed,
                ..
            } => {
                let b = &nodes[i + 1..i + 1 + body as usize];
                let per = super::desc::stream_size(b, stream);
                let per_elems = elems_of(b);
                let k = (rem / per.max(1)).min(count);
                native += k * packed;
                elems += k * per_elems;
                rem -= k * per;
                if k < count && rem > 0 {
                    let (n, e, partial) = prefix_of(b, stream, rem);
                    return (native + n, elems + e, partial);
                }
            }
        }
        i += nodes[i].span();
    }
    (native, elems, false)
}

fn elems_of(nodes: &[Node]) -> u64 {
    let mut total = 0;
    let mut i = 0;
    while i < nodes.len() {
        total += match nodes[i] {
            Node::Run { count, .. } => count,
            Node::Loop { count, body, .. } => {
                count * elems_of(&nodes[i + 1..i + 1 + body as usize])
            }
        };
        i += nodes[i].span();
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_at_every_position() {
        let data: [u8; 10] = core::array::from_fn(|i| i as u8);
        let mut p = Packer::from_slice(&data);
        let types = crate::datatype::table::tests::table();
        for pos in 0..=11 {
            let mut out = [0xffu8; 4];
            let n = p.pack(&types, pos, &mut out);
            assert_eq!(n, 4.min(10usize.saturating_sub(pos)));
            assert_eq!(&out[..n], &data[pos.min(10)..pos.min(10) + n]);
        }
    }

    #[test]
    fn a_loop_based_outside_the_address_space_packs_what_its_type_map_says() {
        // Found by fuzzing (datatype_ctor): two copies of a char 36 bytes up a 36-byte resized
        // type, at isize::MIN, then moved 4 bytes down. The loop's base goes below isize::MIN
        // while every element's address fits; shifting it overflowed.
        let mut t = crate::datatype::table::tests::table();
        let a = t.resized(Datatype::CHAR, 2, 36).unwrap();
        let b = t.indexed_block(1, None, Some(&[36]), a).unwrap();
        let c = t.indexed_block(2, None, Some(&[isize::MIN]), b).unwrap();
        let d = t.indexed_block(1, None, Some(&[-4]), c).unwrap();
        let info = *t.info(d).unwrap();
        assert_eq!(
            (info.size, info.true_lb, info.true_extent),
            (2, isize::MIN + 32, 37)
        );
        t.commit(d).unwrap();
        let mut mem = [0u8; 37];
        mem[0] = 7;
        mem[36] = 9;
        // The user's buffer is where the type's lowest element lies.
        let base = mem.as_mut_ptr().wrapping_offset(-(isize::MIN + 32));
        // SAFETY: the type map's two bytes from `base` are `mem[0]` and `mem[36]`.
        let mut p = unsafe { Packer::new(base, 1, d, &t) }.unwrap();
        let mut out = [0u8; 4];
        assert_eq!(p.pack(&t, 0, &mut out), 2);
        assert_eq!(&out[..2], &[7, 9]);
        assert_eq!(p.pack(&t, 1, &mut out[..1]), 1);
        assert_eq!(out[0], 9);
        drop(p);
        mem = [0; 37];
        // SAFETY: as above, for writes.
        let mut u = unsafe { Unpacker::new(base, 1, d, &t) }.unwrap();
        assert_eq!(u.unpack(&t, 1, &[5]), 1);
        assert_eq!(u.unpack(&t, 0, &[4]), 1);
        drop(u);
        assert_eq!((mem[0], mem[36]), (4, 5));
        assert_eq!(mem[1..36], [0; 35]);
        for x in [a, b, c, d] {
            t.free(x).unwrap();
        }
        assert_eq!(t.derived_in_use(), 0);
    }

    #[test]
    fn only_an_unpacker_over_a_derived_type_retains_it() {
        let mut t = crate::datatype::table::tests::table();
        let mut mem = [0u8; 16];
        // SAFETY: 4 ints fit in `mem`.
        let u = unsafe { Unpacker::elements(mem.as_mut_ptr(), 4, Datatype::INT) };
        assert!(!u.retains_type());
        drop(u);
        let v = t.resized(Datatype::INT, 0, 8).unwrap();
        t.commit(v).unwrap();
        // SAFETY: two 8-byte extents of one int each fit in `mem`.
        let u = unsafe { Unpacker::new(mem.as_mut_ptr(), 2, v, &t) }.unwrap();
        assert!(u.retains_type());
        drop(u);
        t.free(v).unwrap();
        assert_eq!(t.derived_in_use(), 0);
    }

    #[test]
    fn unpack_out_of_order_and_clipped() {
        let types = crate::datatype::table::tests::table();
        let mut buf = [0u8; 8];
        {
            let mut u = Unpacker::from_slice(&mut buf);
            assert_eq!(u.unpack(&types, 4, &[5, 6, 7, 8, 9, 10]), 4); // clipped at capacity
            assert_eq!(u.unpack(&types, 0, &[1, 2, 3, 4]), 4);
            assert_eq!(u.unpack(&types, 8, &[1]), 0);
            assert_eq!(u.unpack(&types, 100, &[1]), 0);
        }
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
