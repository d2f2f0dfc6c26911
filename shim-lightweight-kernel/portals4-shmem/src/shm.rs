//! The wire between processes: one shared-memory segment per process, holding one inbound ring
//! per source rank (its own included).
//!
//! A segment is the file `/dev/shm/stormpi-<job>-ptl-<rank>` (mode 0600). It is built under a
//! temporary name and renamed into place, so a peer never maps a half-initialised segment; a file
//! left behind by a dead process of an earlier run with the same job id is recognised (its owner
//! is gone) and not used.
//!
//! A ring has one producer (the source) and one consumer (the owner) and no lock. Records are
//! 64-byte aligned: a 64-byte [`Hdr`] whose first word announces the record (kind and payload
//! length; zero means "nothing here yet"), then the payload. The producer zeroes the word where
//! the next record will start before it publishes the current one (a Release store of its first
//! word), so the consumer, which reads that word with Acquire, never mistakes stale bytes from an
//! earlier lap for a record. A record that does not fit before the end of the ring is preceded by
//! a `WRAP` record that sends the consumer back to offset 0. The consumer publishes its position
//! (`head`) after it has finished with a record; the producer keeps its own position privately
//! and 64 bytes of slack, so the word it zeroes is always free space.

use std::ffi::CString;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of a record header.
pub const HDR: usize = 64;
const MAGIC: u64 = 0x7374_6f72_6d50_544c; // "stormPTL"
const VERSION: u64 = 1;
const HEADER_BYTES: usize = 4096;
const CTRL_STRIDE: usize = 128;

/// Record kinds (the low byte of the first word; never zero).
pub mod kind {
    pub const PUT: u8 = 1;
    pub const GET: u8 = 2;
    pub const ATOMIC: u8 = 3;
    pub const FETCH: u8 = 4;
    pub const DATA: u8 = 5;
    pub const ACK: u8 = 6;
    pub const REPLY: u8 = 7;
    pub const WRAP: u8 = 8;
}

/// Flags (second byte of the first word).
pub mod flag {
    /// More records of this message follow (`DATA`).
    pub const MORE: u8 = 1;
    /// The data moves by cross-memory attach: `addr` is the initiator's buffer.
    pub const CMA: u8 = 2;
    /// (ACK) the target's entry disabled acknowledgments: no ACK event.
    pub const ACK_DISABLED: u8 = 4;
}

/// A record header as it sits in the ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Hdr {
    /// kind | flags << 8 | ni << 16 | ack_req << 24 | payload bytes << 32 (written last).
    pub word: u64,
    pub match_bits: u64,
    pub hdr_data: u64,
    /// Requests: the requested length. Responses: the manipulated length.
    pub length: u64,
    /// Requests: the remote offset asked for. Responses: the offset used at the target.
    pub offset: u64,
    /// Cross-memory attach: the initiator's buffer address.
    pub addr: u64,
    /// The initiator's operation id (echoed in responses).
    pub op: u32,
    pub pt_index: u32,
    pub uid: u32,
    /// Atomics: operation | datatype << 8. Responses: failure kind << 16.
    pub extra: u32,
}

const _: () = assert!(std::mem::size_of::<Hdr>() == HDR);

impl Hdr {
    pub fn new(kind: u8, flags: u8, ni: u8, ack_req: u8) -> Hdr {
        Hdr {
            word: kind as u64 | (flags as u64) << 8 | (ni as u64) << 16 | (ack_req as u64) << 24,
            ..Hdr::default()
        }
    }
    pub fn kind(&self) -> u8 {
        self.word as u8
    }
    pub fn flags(&self) -> u8 {
        (self.word >> 8) as u8
    }
    pub fn ni(&self) -> u8 {
        (self.word >> 16) as u8
    }
    pub fn ack_req(&self) -> u8 {
        (self.word >> 24) as u8
    }
    pub fn payload(&self) -> usize {
        (self.word >> 32) as usize
    }
    /// The header's 64 bytes as they lie in a ring (native byte order: both ends are one
    /// machine).
    pub fn to_bytes(&self) -> [u8; HDR] {
        let mut b = [0u8; HDR];
        let words = [
            self.word,
            self.match_bits,
            self.hdr_data,
            self.length,
            self.offset,
            self.addr,
        ];
        for (i, w) in words.iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&w.to_ne_bytes());
        }
        for (i, w) in [self.op, self.pt_index, self.uid, self.extra]
            .iter()
            .enumerate()
        {
            b[48 + 4 * i..52 + 4 * i].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
    fn with(&self, kind: u8, flags: u8, payload: usize) -> u64 {
        (self.word & 0xffff_0000) | kind as u64 | (flags as u64) << 8 | (payload as u64) << 32
    }
}

/// Bytes a record with `payload` bytes takes.
pub fn record_bytes(payload: usize) -> usize {
    (HDR + payload + 63) & !63
}

struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap of exactly this length.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Segment geometry (the same for every process of a job).
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub ranks: usize,
    pub ring_bytes: usize,
}

impl Geometry {
    fn bytes(&self) -> usize {
        self.data_start() + self.ranks * self.ring_bytes
    }
    fn data_start(&self) -> usize {
        (HEADER_BYTES + self.ranks * CTRL_STRIDE + 4095) & !4095
    }
}

/// Header fields of a segment (offsets in its first page).
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_PID: usize = 16;
const H_RANKS: usize = 24;
const H_RING: usize = 32;

/// A mapped segment: our own (we consume its rings) or a peer's (we produce into one of them).
pub struct Segment {
    map: Map,
    geo: Geometry,
}

// SAFETY: the mapping is plain shared memory; all access goes through atomics or through
// positions the ring protocol hands to exactly one side.
unsafe impl Send for Segment {}

fn path_of(job: &str, rank: u32) -> String {
    format!("/dev/shm/stormpi-{job}-ptl-{rank}")
}

fn word(base: *mut u8, off: usize) -> &'static AtomicU64 {
    // SAFETY: callers pass 8-aligned offsets inside a live mapping; the reference does not
    // outlive the segment in practice (it is used immediately).
    unsafe { &*(base.add(off) as *const AtomicU64) }
}

impl Segment {
    /// Creates this process's segment (replacing a stale one).
    pub fn create(job: &str, rank: u32, geo: Geometry) -> io::Result<Segment> {
        let path = path_of(job, rank);
        let tmp = format!("{path}.{}.tmp", std::process::id());
        let ctmp = CString::new(tmp.clone()).map_err(|_| io::ErrorKind::InvalidInput)?;
        let len = geo.bytes();
        // SAFETY: plain libc calls on a path we own; errors are checked.
        let map = unsafe {
            let fd = libc::open(
                ctmp.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                0o600,
            );
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::ftruncate(fd, len as libc::off_t) != 0 {
                let e = io::Error::last_os_error();
                libc::close(fd);
                libc::unlink(ctmp.as_ptr());
                return Err(e);
            }
            let p = libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            if p == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                libc::unlink(ctmp.as_ptr());
                return Err(e);
            }
            Map { ptr: p.cast(), len }
        };
        let seg = Segment { map, geo };
        word(seg.map.ptr, H_VERSION).store(VERSION, Ordering::Relaxed);
        word(seg.map.ptr, H_PID).store(std::process::id() as u64, Ordering::Relaxed);
        word(seg.map.ptr, H_RANKS).store(geo.ranks as u64, Ordering::Relaxed);
        word(seg.map.ptr, H_RING).store(geo.ring_bytes as u64, Ordering::Relaxed);
        word(seg.map.ptr, H_MAGIC).store(MAGIC, Ordering::Release);
        let cpath = CString::new(path).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: both paths are valid C strings.
        if unsafe { libc::rename(ctmp.as_ptr(), cpath.as_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: as above.
            unsafe { libc::unlink(ctmp.as_ptr()) };
            return Err(e);
        }
        Ok(seg)
    }

    /// Maps a peer's segment. `Ok(None)`: not there yet (or a stale one of a dead process).
    pub fn attach(job: &str, rank: u32, geo: Geometry) -> io::Result<Option<Segment>> {
        let cpath = CString::new(path_of(job, rank)).map_err(|_| io::ErrorKind::InvalidInput)?;
        let len = geo.bytes();
        // SAFETY: plain libc calls; the mapping length is checked against the file size.
        unsafe {
            let fd = libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if fd < 0 {
                let e = io::Error::last_os_error();
                return if e.kind() == io::ErrorKind::NotFound {
                    Ok(None)
                } else {
                    Err(e)
                };
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 || (st.st_size as usize) < len {
                libc::close(fd);
                return Ok(None);
            }
            let p = libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let seg = Segment {
                map: Map { ptr: p.cast(), len },
                geo,
            };
            if word(seg.map.ptr, H_MAGIC).load(Ordering::Acquire) != MAGIC
                || word(seg.map.ptr, H_VERSION).load(Ordering::Relaxed) != VERSION
                || word(seg.map.ptr, H_RANKS).load(Ordering::Relaxed) != geo.ranks as u64
                || word(seg.map.ptr, H_RING).load(Ordering::Relaxed) != geo.ring_bytes as u64
            {
                return Ok(None);
            }
            let pid = word(seg.map.ptr, H_PID).load(Ordering::Relaxed) as libc::pid_t;
            if libc::kill(pid, 0) != 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            {
                return Ok(None);
            }
            Ok(Some(seg))
        }
    }

    /// The OS process id of the segment's owner.
    pub fn owner_pid(&self) -> libc::pid_t {
        word(self.map.ptr, H_PID).load(Ordering::Relaxed) as libc::pid_t
    }

    /// Removes the segment's name (the mapping stays valid).
    pub fn unlink(job: &str, rank: u32) {
        if let Ok(c) = CString::new(path_of(job, rank)) {
            // SAFETY: valid C string.
            unsafe { libc::unlink(c.as_ptr()) };
        }
    }

    fn head(&self, src: usize) -> &AtomicU64 {
        word(self.map.ptr, HEADER_BYTES + src * CTRL_STRIDE)
    }

    #[inline]
    fn ring(&self, src: usize) -> *mut u8 {
        // SAFETY: inside the mapping by construction of the geometry.
        unsafe {
            self.map
                .ptr
                .add(self.geo.data_start() + src * self.geo.ring_bytes)
        }
    }
}

/// The producer side of one ring (kept by the source).
#[derive(Default)]
pub struct Producer {
    tail: u64,
    head: u64,
}

impl Producer {
    /// Writes one record (header `h` with `kind`/`flags`, `payload` bytes filled by `fill`).
    /// `false` when there is no room now. (Inline: on a small put the call's frame is a
    /// quarter of its cost.)
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn push(
        &mut self,
        seg: &Segment,
        src: usize,
        h: &Hdr,
        kind: u8,
        flags: u8,
        payload: usize,
        fill: impl FnOnce(*mut u8),
    ) -> bool {
        let cap = seg.geo.ring_bytes as u64;
        let need = record_bytes(payload) as u64;
        debug_assert!(need <= cap / 2);
        let pos = self.tail & (cap - 1);
        let to_end = cap - pos;
        let total = if need > to_end { to_end + need } else { need };
        if self.tail - self.head + total + 64 > cap {
            self.head = seg.head(src).load(Ordering::Acquire);
            if self.tail - self.head + total + 64 > cap {
                return false;
            }
        }
        let ring = seg.ring(src);
        let mut at = pos;
        if need > to_end {
            word(ring, 0).store(0, Ordering::Relaxed);
            word(ring, pos as usize).store(kind::WRAP as u64, Ordering::Release);
            at = 0;
            self.tail += to_end;
        }
        let next = (at + need) & (cap - 1);
        word(ring, next as usize).store(0, Ordering::Relaxed);
        // SAFETY: [at, at + need) is free space of the ring (checked above), 64-aligned.
        unsafe {
            let p = ring.add(at as usize);
            let mut hh = *h;
            hh.word = 0;
            ptr::write(p as *mut Hdr, hh);
            // (A zero-byte record, the common control message, has nothing to fill.)
            if payload > 0 {
                fill(p.add(HDR));
            }
        }
        word(ring, at as usize).store(h.with(kind, flags, payload), Ordering::Release);
        self.tail += need;
        true
    }

    /// Largest payload one record may carry in a ring of `ring_bytes`.
    pub fn max_payload(ring_bytes: usize) -> usize {
        ring_bytes / 4 - HDR
    }
}

/// The consumer side of one ring (kept by the owner).
///
/// The ring is written by another process, so nothing read from it is trusted: a record whose
/// payload would run past the end of the ring, or a wrap marker where no producer writes one
/// (at offset 0, which would send the consumer round forever), means the producer is broken or
/// hostile. The consumer then stops reading that ring for good ([`Consumer::broken`]); the
/// records it had taken before stay taken.
pub struct Consumer {
    head: u64,
    /// The ring's first byte and `ring_bytes - 1`, learned at the first look (every poll looks,
    /// so the address is not worked out from the geometry each time).
    ring: *mut u8,
    mask: u64,
    broken: bool,
}

impl Default for Consumer {
    fn default() -> Self {
        Consumer {
            head: 0,
            ring: ptr::null_mut(),
            mask: 0,
            broken: false,
        }
    }
}

impl Consumer {
    #[inline(always)]
    fn ring(&mut self, seg: &Segment, src: usize) -> *mut u8 {
        if self.ring.is_null() {
            self.ring = seg.ring(src);
            self.mask = seg.geo.ring_bytes as u64 - 1;
        }
        self.ring
    }

    /// Whether a record (or a wrap marker) waits: one load.
    #[inline]
    pub fn ready(&mut self, seg: &Segment, src: usize) -> bool {
        let ring = self.ring(seg, src);
        !self.broken && word(ring, (self.head & self.mask) as usize).load(Ordering::Acquire) != 0
    }

    /// Whether the ring held something no producer writes, and is no longer read.
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// The next record, if any: its header and its payload, which lies inside the ring and is
    /// valid until [`Consumer::advance`]. `None` also when the ring turns out to be broken.
    #[inline]
    pub fn peek(&mut self, seg: &Segment, src: usize) -> Option<(Hdr, *const u8)> {
        let ring = self.ring(seg, src);
        if self.broken {
            return None;
        }
        loop {
            let pos = (self.head & self.mask) as usize;
            let w = word(ring, pos).load(Ordering::Acquire);
            if w == 0 {
                return None;
            }
            if w as u8 == kind::WRAP {
                if pos == 0 {
                    // A producer wraps only where a record does not fit before the end.
                    self.broken = true;
                    return None;
                }
                self.head += self.mask + 1 - pos as u64;
                continue;
            }
            // A record never runs past the end of the ring (the producer wraps first).
            let payload = (w >> 32) as usize;
            if record_bytes(payload) as u64 > self.mask + 1 - pos as u64 {
                self.broken = true;
                return None;
            }
            // SAFETY: the record was published (Acquire above); its 64 header bytes are inside
            // the ring (positions are 64-aligned and the ring is a multiple of 64 bytes).
            let mut h = unsafe { ptr::read(ring.add(pos) as *const Hdr) };
            h.word = w;
            // SAFETY: the payload's `h.payload()` bytes end inside the ring (checked above).
            return Some((h, unsafe { ring.add(pos + HDR) as *const u8 }));
        }
    }

    /// Copies `bytes` into the ring where this consumer reads next, up to the ring's end, as a
    /// producer's records would lie there (for fuzzing and tests of a broken or hostile
    /// producer); returns the bytes copied.
    #[doc(hidden)]
    pub fn write_raw(&mut self, seg: &Segment, src: usize, bytes: &[u8]) -> usize {
        let ring = self.ring(seg, src);
        let pos = (self.head & self.mask) as usize;
        let n = bytes.len().min(self.mask as usize + 1 - pos);
        // SAFETY: [pos, pos + n) is inside the ring; the caller stands in for the ring's
        // producer, and nothing reads these bytes before the next `peek`.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), ring.add(pos), n) };
        n
    }

    /// Releases the record returned by the last [`Consumer::peek`].
    #[inline]
    pub fn advance(&mut self, seg: &Segment, src: usize, h: &Hdr) {
        self.head += record_bytes(h.payload()) as u64;
        seg.head(src).store(self.head, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lwk_ring_wraps_and_preserves_order() {
        let job = format!("unit-ring-{}", std::process::id());
        let geo = Geometry {
            ranks: 1,
            ring_bytes: 4096,
        };
        let seg = Segment::create(&job, 0, geo).unwrap();
        let peer = Segment::attach(&job, 0, geo).unwrap().unwrap();
        let mut p = Producer::default();
        let mut c = Consumer::default();
        let mut sent = 0u64;
        let mut got = 0u64;
        for round in 0..2000usize {
            let len = (round * 37) % 700;
            let h = Hdr {
                match_bits: sent,
                ..Hdr::new(kind::PUT, 0, 0, 0)
            };
            if p.push(&peer, 0, &h, kind::PUT, 0, len, |d| unsafe {
                ptr::write_bytes(d, (sent % 251) as u8, len)
            }) {
                sent += 1;
            }
            if round % 3 != 0 {
                while let Some((h, d)) = c.peek(&seg, 0) {
                    assert_eq!(h.match_bits, got);
                    let s = unsafe { std::slice::from_raw_parts(d, h.payload()) };
                    assert!(s.iter().all(|&b| b == (got % 251) as u8));
                    got += 1;
                    c.advance(&seg, 0, &h);
                }
            }
        }
        assert!(sent > 1000);
        Segment::unlink(&job, 0);
    }
}
