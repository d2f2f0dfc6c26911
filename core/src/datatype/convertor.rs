//! Convertors: moving a message's bytes between user memory and fragments, by position.
//!
//! The PML never touches user memory itself. A send asks its [`Packer`] for the packed bytes at
//! any offset of the message; a receive hands each arriving fragment to its [`Unpacker`] with the
//! fragment's offset, in any order. For contiguous data this is a bounded copy; derived datatypes
//! and receiver-makes-right conversion will live behind the same two calls.
//!
//! A convertor holds a raw pointer to memory the user lent for the life of a request: that loan
//! is the one boundary here, stated on the constructors.

/// Reads a message out of user memory.
pub struct Packer {
    base: *const u8,
    len: usize,
}

/// Writes a message into user memory.
pub struct Unpacker {
    base: *mut u8,
    len: usize,
}

// SAFETY: a convertor is only a loan of user memory; the constructors' contract makes the memory
// valid for the request's life, whichever thread progresses the request.
unsafe impl Send for Packer {}
// SAFETY: as for `Packer`.
unsafe impl Send for Unpacker {}

impl Packer {
    /// A packer over `len` contiguous bytes at `base`.
    ///
    /// # Safety
    /// `base..base+len` must stay valid for reads, and unchanged, until the request that owns
    /// this packer completes (MPI's rule for send buffers). `base` may be dangling if `len` is 0.
    pub unsafe fn contiguous(base: *const u8, len: usize) -> Packer {
        Packer { base, len }
    }

    /// A packer over a borrowed slice, for sends that complete before the borrow ends.
    pub fn from_slice(data: &[u8]) -> Packer {
        Packer {
            base: data.as_ptr(),
            len: data.len(),
        }
    }

    /// Packed size of the whole message.
    #[inline]
    pub fn packed_len(&self) -> usize {
        self.len
    }

    /// The user memory holding packed bytes `pos..pos + len`, when the message is stored
    /// contiguously (so a transport can send it without packing).
    #[inline]
    pub fn data_ref(&self, pos: usize, len: usize) -> Option<crate::btl::DataRef> {
        if pos.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: `pos + len <= len` of the loan, which the constructor's contract keeps valid and
        // unchanged until the request completes; the PML completes a request only after every
        // send reading from it has been reported complete.
        Some(unsafe { crate::btl::DataRef::new(self.base.wrapping_add(pos), len) })
    }

    /// Copies packed bytes starting at `pos` into `out`; returns how many (`out.len()` or fewer
    /// at the end of the message).
    #[inline]
    pub fn pack(&self, pos: usize, out: &mut [u8]) -> usize {
        if pos >= self.len {
            return 0;
        }
        let n = out.len().min(self.len - pos);
        // SAFETY: `pos + n <= len`, and the constructor's contract makes `base..base+len` readable.
        let src = unsafe { core::slice::from_raw_parts(self.base.add(pos), n) };
        out[..n].copy_from_slice(src);
        n
    }
}

impl Unpacker {
    /// An unpacker into `len` contiguous bytes at `base`.
    ///
    /// # Safety
    /// `base..base+len` must stay valid for writes, and not be accessed otherwise, until the
    /// request that owns this unpacker completes. `base` may be dangling if `len` is 0.
    pub unsafe fn contiguous(base: *mut u8, len: usize) -> Unpacker {
        Unpacker { base, len }
    }

    /// An unpacker with room for nothing (zero-byte messages, barriers).
    pub fn empty() -> Unpacker {
        Unpacker {
            base: core::ptr::NonNull::dangling().as_ptr(),
            len: 0,
        }
    }

    /// Capacity in packed bytes: what fits without truncation.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.len
    }

    /// Writes `data`, which sits at packed offset `pos` of the message. Bytes beyond the capacity
    /// are dropped (the caller reports the truncation); returns how many were written.
    #[inline]
    pub fn unpack(&mut self, pos: usize, data: &[u8]) -> usize {
        if pos >= self.len {
            return 0;
        }
        let n = data.len().min(self.len - pos);
        // SAFETY: `pos + n <= len`, and the constructor's contract makes `base..base+len` writable
        // and unaliased for the request's life.
        let dst = unsafe { core::slice::from_raw_parts_mut(self.base.add(pos), n) };
        dst.copy_from_slice(&data[..n]);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_at_every_position() {
        let data: [u8; 10] = core::array::from_fn(|i| i as u8);
        let p = Packer::from_slice(&data);
        for pos in 0..=11 {
            let mut out = [0xffu8; 4];
            let n = p.pack(pos, &mut out);
            assert_eq!(n, 4.min(10usize.saturating_sub(pos)));
            assert_eq!(&out[..n], &data[pos.min(10)..pos.min(10) + n]);
        }
    }

    #[test]
    fn unpack_out_of_order_and_clipped() {
        let mut buf = [0u8; 8];
        {
            // SAFETY: `buf` outlives the unpacker and is not touched while it lives.
            let mut u = unsafe { Unpacker::contiguous(buf.as_mut_ptr(), buf.len()) };
            assert_eq!(u.unpack(4, &[5, 6, 7, 8, 9, 10]), 4); // clipped at capacity
            assert_eq!(u.unpack(0, &[1, 2, 3, 4]), 4);
            assert_eq!(u.unpack(8, &[1]), 0);
            assert_eq!(u.unpack(100, &[1]), 0);
        }
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
