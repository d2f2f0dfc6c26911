//! File views: which bytes of the file a process sees, and in what order.
//!
//! A view is a displacement, an elementary type and a filetype tiled from the displacement on
//! (instance `k` starts at `disp + k * extent`). The process sees the filetype's data bytes one
//! after another — the *view stream* — and every access names a range of that stream. [`runs`]
//! turns a stream range into file byte ranges by walking the filetype's committed description
//! (the datatype engine's `Node` runs and loops), joining ranges that touch, so a contiguous
//! view costs one range whatever its type's shape.

use crate::datatype::desc::Node;
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Reason, Result};

/// A process's view of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// Bytes from the start of the file to the first filetype instance.
    pub disp: u64,
    /// The unit of offsets and positions.
    pub etype: Datatype,
    /// The pattern of visible bytes, as the user gave it.
    pub filetype: Datatype,
    /// The type whose description places the view stream in the file: the filetype, or its
    /// layout in the file's sizes (`layout::build`) when the representation changes sizes.
    pub layout: Datatype,
    /// The file sizes of predefined types when the representation changes some of them (the
    /// view stream then counts file bytes); `None` when the file has native sizes.
    pub sizes: Option<super::layout::Sizes>,
    /// Packed bytes of one etype.
    pub etype_size: u64,
    /// Packed bytes of one filetype instance.
    pub size: u64,
    /// Extent of the filetype (the tiling stride).
    pub extent: i64,
    /// `Some(at)` when instances are back to back runs starting `at` bytes into each: stream
    /// byte `p` is then file byte `disp + at + p`.
    pub dense_at: Option<i64>,
    /// The data representation is `external32` (big-endian, MPI's sizes) rather than native.
    pub external32: bool,
    /// A data representation registered with `MPI_Register_datarep` (its slot in the C API's
    /// table): the C API converts through its callbacks around the native-layout transfer.
    pub datarep: Option<u8>,
}

impl View {
    /// The view every file has at open: bytes from offset 0.
    pub const fn bytes() -> View {
        View {
            disp: 0,
            etype: Datatype::BYTE,
            filetype: Datatype::BYTE,
            layout: Datatype::BYTE,
            sizes: None,
            etype_size: 1,
            size: 1,
            extent: 1,
            dense_at: Some(0),
            external32: false,
            datarep: None,
        }
    }
}

fn outside() -> Error {
    Error::new(
        ErrorClass::Arg,
        Reason::BadArgument {
            what: "the view places data before the start of the file or beyond 2^63 bytes",
        },
    )
}

/// Walks one description, feeding byte ranges to a sink.
struct Walk<'a> {
    /// Stream bytes still to skip before the range starts.
    skip: u64,
    /// Stream bytes of the range still to place.
    left: u64,
    /// The range being joined: file offset and length.
    pending: (i64, u64),
    out: &'a mut dyn FnMut(u64, u64) -> Result<()>,
}

impl Walk<'_> {
    fn emit(&mut self, at: i64, n: u64) -> Result<()> {
        if at < 0 {
            return Err(outside());
        }
        let (p, len) = self.pending;
        if len > 0 && p.checked_add(len as i64) == Some(at) {
            self.pending.1 += n;
            return Ok(());
        }
        self.flush()?;
        self.pending = (at, n);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let (p, len) = self.pending;
        if len > 0 {
            (self.out)(p as u64, len)?;
        }
        self.pending = (0, 0);
        Ok(())
    }

    /// Walks `nodes` based at `base`; `true` once the range is placed.
    fn walk(&mut self, nodes: &[Node], base: i64) -> Result<bool> {
        let mut i = 0;
        while i < nodes.len() {
            match nodes[i] {
                Node::Run { disp, count, basic } => {
                    let bytes = count * basic.size as u64;
                    if self.skip >= bytes {
                        self.skip -= bytes;
                    } else {
                        let take = (bytes - self.skip).min(self.left);
                        let at = base
                            .checked_add(disp as i64)
                            .and_then(|a| a.checked_add(self.skip as i64))
                            .ok_or_else(outside)?;
                        self.emit(at, take)?;
                        self.skip = 0;
                        self.left -= take;
                        if self.left == 0 {
                            return Ok(true);
                        }
                    }
                    i += 1;
                }
                Node::Loop {
                    disp,
                    count,
                    stride,
                    body,
                    packed,
                } => {
                    let inner = &nodes[i + 1..(i + 1 + body as usize).min(nodes.len())];
                    // Whole iterations before the range are skipped without walking them.
                    let mut j = 0;
                    if let Some(whole) = self.skip.checked_div(packed) {
                        j = whole.min(count);
                        self.skip -= j * packed;
                    }
                    while j < count {
                        let at = (j as i64)
                            .checked_mul(stride as i64)
                            .and_then(|s| s.checked_add(disp as i64))
                            .and_then(|s| s.checked_add(base))
                            .ok_or_else(outside)?;
                        if self.walk(inner, at)? {
                            return Ok(true);
                        }
                        j += 1;
                    }
                    i += 1 + body as usize;
                }
            }
        }
        Ok(false)
    }
}

/// Feeds `out` the file ranges (offset, length) holding view-stream bytes
/// `start..start + len` of `view` (whose filetype is described by `nodes`), in stream order,
/// ranges that touch joined into one.
pub fn runs(
    nodes: &[Node],
    view: &View,
    start: u64,
    len: u64,
    out: &mut dyn FnMut(u64, u64) -> Result<()>,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    if view.size == 0 {
        return Err(Error::bad_arg("the view's filetype holds no data"));
    }
    if let Some(at) = view.dense_at {
        let off = (view.disp as i64)
            .checked_add(at)
            .and_then(|o| o.checked_add(i64::try_from(start).ok()?))
            .filter(|o| *o >= 0 && o.checked_add(len as i64).is_some())
            .ok_or_else(outside)?;
        return out(off as u64, len);
    }
    let mut k = start / view.size;
    let mut w = Walk {
        skip: start % view.size,
        left: len,
        pending: (0, 0),
        out,
    };
    loop {
        let base = i64::try_from(k)
            .ok()
            .and_then(|k| k.checked_mul(view.extent))
            .and_then(|b| b.checked_add(view.disp as i64))
            .ok_or_else(outside)?;
        if w.walk(nodes, base)? {
            break;
        }
        k += 1;
    }
    w.flush()
}

/// The file offset of view-stream byte `pos` (`MPI_File_get_byte_offset`).
pub fn byte_offset(nodes: &[Node], view: &View, pos: u64) -> Result<u64> {
    let mut found = 0;
    runs(nodes, view, pos, 1, &mut |off, _| {
        found = off;
        Ok(())
    })?;
    Ok(found)
}

/// View-stream bytes that lie before file offset `end` (where `MPI_SEEK_END` counts from).
pub fn stream_before(nodes: &[Node], view: &View, end: u64) -> Result<u64> {
    if view.size == 0 || end <= view.disp {
        return Ok(0);
    }
    if let Some(at) = view.dense_at {
        let first = view.disp as i64 + at;
        return Ok((end as i64 - first).max(0) as u64);
    }
    // Count instance by instance from one before the last that can start before `end`, since
    // an instance's data may reach beyond its extent.
    let span = (end - view.disp) / view.extent.max(1) as u64;
    let mut k = span.saturating_sub(1);
    let mut total = k * view.size;
    loop {
        let mut before = 0u64;
        let mut any = false;
        runs(nodes, view, k * view.size, view.size, &mut |off, n| {
            if off < end {
                before += n.min(end - off);
            }
            any |= off + n > end;
            Ok(())
        })?;
        total += before;
        if any || before == 0 {
            return Ok(total);
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::datatype::desc::Basic;
    use crate::datatype::repr::{Elem, Width};
    use std::vec;
    use std::vec::Vec;

    fn ints(disp: isize, count: u64) -> Node {
        Node::Run {
            disp,
            count,
            basic: Basic::native(Elem::Int(Width::Fixed(4))),
        }
    }

    fn collect(nodes: &[Node], view: &View, start: u64, len: u64) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        runs(nodes, view, start, len, &mut |o, n| {
            v.push((o, n));
            Ok(())
        })
        .unwrap();
        v
    }

    /// A vector of 3 blocks of 2 ints, stride 5 ints, resized to extent 60.
    fn vector() -> (Vec<Node>, View) {
        let nodes = vec![
            Node::Loop {
                disp: 0,
                count: 3,
                stride: 20,
                body: 1,
                packed: 8,
            },
            ints(0, 2),
        ];
        let view = View {
            disp: 100,
            etype: Datatype::INT,
            filetype: Datatype::INT,
            layout: Datatype::INT,
            sizes: None,
            etype_size: 4,
            size: 24,
            extent: 60,
            dense_at: None,
            external32: false,
            datarep: None,
        };
        (nodes, view)
    }

    #[test]
    fn a_vector_view_maps_to_its_blocks_tile_after_tile() {
        let (nodes, view) = vector();
        assert_eq!(
            collect(&nodes, &view, 0, 48),
            [(100, 8), (120, 8), (140, 8), (160, 8), (180, 8), (200, 8)]
        );
    }

    #[test]
    fn a_range_starting_inside_a_block_starts_at_its_byte() {
        let (nodes, view) = vector();
        assert_eq!(collect(&nodes, &view, 12, 8), [(124, 4), (140, 4)]);
        assert_eq!(collect(&nodes, &view, 30, 2), [(166, 2)]);
    }

    #[test]
    fn touching_blocks_are_joined() {
        let nodes = vec![ints(0, 1), ints(4, 1), ints(12, 1)];
        let view = View {
            disp: 0,
            etype: Datatype::INT,
            filetype: Datatype::INT,
            layout: Datatype::INT,
            sizes: None,
            etype_size: 4,
            size: 12,
            extent: 16,
            dense_at: None,
            external32: false,
            datarep: None,
        };
        assert_eq!(collect(&nodes, &view, 0, 24), [(0, 8), (12, 12), (28, 4)]);
    }

    #[test]
    fn a_dense_view_is_one_range() {
        let view = View {
            disp: 7,
            ..View::bytes()
        };
        assert_eq!(collect(&[], &view, 5, 1000), [(12, 1000)]);
    }

    #[test]
    fn byte_offsets_and_end_positions_follow_the_view() {
        let (nodes, view) = vector();
        assert_eq!(byte_offset(&nodes, &view, 0).unwrap(), 100);
        assert_eq!(byte_offset(&nodes, &view, 9).unwrap(), 121);
        assert_eq!(byte_offset(&nodes, &view, 24).unwrap(), 160);
        assert_eq!(stream_before(&nodes, &view, 100).unwrap(), 0);
        assert_eq!(stream_before(&nodes, &view, 124).unwrap(), 12);
        assert_eq!(stream_before(&nodes, &view, 160).unwrap(), 24);
        assert_eq!(stream_before(&nodes, &view, 1000).unwrap(), 24 * 15);
    }

    #[test]
    fn a_view_reaching_before_the_file_is_refused() {
        let nodes = vec![ints(-8, 1)];
        let view = View {
            disp: 0,
            etype: Datatype::INT,
            filetype: Datatype::INT,
            layout: Datatype::INT,
            sizes: None,
            etype_size: 4,
            size: 4,
            extent: 4,
            dense_at: None,
            external32: false,
            datarep: None,
        };
        assert!(runs(&nodes, &view, 0, 4, &mut |_, _| Ok(())).is_err());
    }
}
