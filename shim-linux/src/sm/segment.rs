//! Segment files: the inbound rings of one process, in one file under the backing directory.
//!
//! Each process on a node creates its own segment, `<dir>/stormpi-<job>-sm-<rank>`, holding one
//! inbound ring per other local process, and maps the segments of the peers it sends to. The
//! name is all a peer needs, so no address goes through the modex.
//!
//! ```text
//! 0                     header (field offsets in `field`), the ready word at 64
//! HEADER_BYTES          nrings control blocks of CTL_BYTES (tail, head)
//! data_base (page)      nrings data areas of ring_bytes each
//! coll_base             the collective area of coll_bytes (`stormpi_core::coll::sm`)
//! ```
//!
//! The creator fills in the header and stores the ready word with Release last; a peer reads
//! nothing else before it has loaded that word with Acquire, then checks every field of a private
//! copy of the header against what it expects before it maps and uses the rings.

use std::fmt;
use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

use stormpi_core::btl::Area;

use super::ring::{min_ring_bytes, RingMem, CTL_BYTES};

/// Bytes of the segment header (one page, so rings start page-aligned).
pub(crate) const HEADER_BYTES: usize = 4096;
const PAGE: usize = 4096;
const MAGIC: [u8; 8] = *b"STORM-SM";
const VERSION: u32 = 3;
/// Value of the ready word once the segment is usable (not just "non-zero", so that a stray
/// write is unlikely to pass for it).
const READY: u32 = 0x5245_4459;
/// Most rings one segment may hold (processes on a node, less one).
pub(crate) const MAX_RINGS: u32 = 1 << 16;
/// Largest data area of one ring.
pub(crate) const MAX_RING_BYTES: usize = 1 << 30;

/// Byte offsets of the header fields (native byte order: the segment never leaves the node).
mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..8;
    pub const VERSION: Range<usize> = 8..12;
    /// World rank of the creator.
    pub const OWNER: Range<usize> = 12..16;
    pub const NRINGS: Range<usize> = 16..20;
    /// Longest payload a record in these rings may carry.
    pub const MAX_FRAG: Range<usize> = 20..24;
    pub const RING_BYTES: Range<usize> = 24..32;
    pub const TOTAL: Range<usize> = 32..40;
    /// Bytes of the collective area.
    pub const COLL_BYTES: Range<usize> = 40..48;
    /// Bytes a peer copies and checks.
    pub const LEN: usize = 48;
    /// Process id of the creator, for single-copy reads of its memory (`process_vm_readv`).
    pub const PID: Range<usize> = 48..52;
    /// Address of the segment in the creator's address space: a peer that reads the header
    /// there with `process_vm_readv` and finds what it maps has the right process.
    pub const BASE: Range<usize> = 56..64;
    /// The ready word (an AtomicU32), on its own cache line.
    pub const READY: usize = 64;
}

/// The start of the header of the segment file at `path` as its creator wrote it (read from the
/// file, not mapped), with the process id and the address it recorded there: what the
/// one-sided single-copy path ([`super::osc`]) reads back from that process to check the id.
/// `None` until the creator has written them.
pub(crate) fn recorded_origin(
    path: &Path,
) -> io::Result<Option<(u32, u64, [u8; field::BASE.end])>> {
    use std::io::Read;
    let mut h = [0u8; field::BASE.end];
    let mut f = File::open(path)?;
    f.read_exact(&mut h)?;
    let mut pid = [0u8; 4];
    pid.copy_from_slice(&h[field::PID]);
    let mut base = [0u8; 8];
    base.copy_from_slice(&h[field::BASE]);
    let (pid, base) = (u32::from_ne_bytes(pid), u64::from_ne_bytes(base));
    Ok((pid != 0 && base != 0).then_some((pid, base, h)))
}

/// The shape of a segment: how many rings, how big.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Inbound rings (senders).
    pub nrings: u32,
    /// Data bytes of each ring, a power of two.
    pub ring_bytes: usize,
    /// Longest payload a record may carry.
    pub max_frag: u32,
    /// Bytes of the collective area after the rings (a multiple of 64).
    pub coll_bytes: usize,
}

impl Geometry {
    fn data_base(&self) -> usize {
        let ctl_end = HEADER_BYTES + self.nrings as usize * CTL_BYTES;
        ctl_end.div_ceil(PAGE) * PAGE
    }

    /// Total bytes of the segment, if the geometry is one this module creates and accepts.
    pub(crate) fn check(&self) -> Result<usize, &'static str> {
        if self.nrings == 0 || self.nrings > MAX_RINGS {
            return Err("ring count out of range");
        }
        if !self.ring_bytes.is_power_of_two() || self.ring_bytes > MAX_RING_BYTES {
            return Err("ring size is not a power of two up to 1 GiB");
        }
        if self.ring_bytes < min_ring_bytes(self.max_frag as usize) {
            return Err("rings are too small for two records of the largest fragment");
        }
        if !self.coll_bytes.is_multiple_of(64) || self.coll_bytes > MAX_RING_BYTES {
            return Err("collective area is not a multiple of 64 bytes up to 1 GiB");
        }
        self.coll_base()
            .and_then(|d| d.checked_add(self.coll_bytes))
            .filter(|&t| t <= isize::MAX as usize)
            .ok_or("segment size overflows")
    }

    /// Offset of the collective area: the end of the rings.
    fn coll_base(&self) -> Option<usize> {
        (self.nrings as usize)
            .checked_mul(self.ring_bytes)
            .and_then(|d| d.checked_add(self.data_base()))
    }

    fn encode(&self, owner: u32, total: usize) -> [u8; field::LEN] {
        let mut h = [0u8; field::LEN];
        h[field::MAGIC].copy_from_slice(&MAGIC);
        h[field::VERSION].copy_from_slice(&VERSION.to_ne_bytes());
        h[field::OWNER].copy_from_slice(&owner.to_ne_bytes());
        h[field::NRINGS].copy_from_slice(&self.nrings.to_ne_bytes());
        h[field::MAX_FRAG].copy_from_slice(&self.max_frag.to_ne_bytes());
        h[field::RING_BYTES].copy_from_slice(&(self.ring_bytes as u64).to_ne_bytes());
        h[field::TOTAL].copy_from_slice(&(total as u64).to_ne_bytes());
        h[field::COLL_BYTES].copy_from_slice(&(self.coll_bytes as u64).to_ne_bytes());
        h
    }

    /// Checks a copy of a peer's header against what we expect of it; returns its geometry and
    /// total size.
    fn parse(h: &[u8; field::LEN], want: &Expect) -> Result<(Geometry, usize), &'static str> {
        // The fields are constant ranges inside the header, so `get` always finds them.
        let u32_at = |r: std::ops::Range<usize>| {
            h.get(r)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_ne_bytes)
        };
        let u64_at = |r: std::ops::Range<usize>| {
            h.get(r)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_ne_bytes)
        };
        if h[field::MAGIC] != MAGIC {
            return Err("bad magic (not an sm segment)");
        }
        if u32_at(field::VERSION) != VERSION {
            return Err("unsupported segment version");
        }
        if u32_at(field::OWNER) != want.owner {
            return Err("segment belongs to another rank");
        }
        let geo = Geometry {
            nrings: u32_at(field::NRINGS),
            ring_bytes: usize::try_from(u64_at(field::RING_BYTES)).map_err(|_| "ring size")?,
            max_frag: u32_at(field::MAX_FRAG),
            coll_bytes: usize::try_from(u64_at(field::COLL_BYTES))
                .map_err(|_| "collective area size")?,
        };
        if geo.nrings != want.nrings {
            return Err("ring count differs from the node's process count");
        }
        if geo.coll_bytes != want.coll_bytes {
            return Err("collective area differs from ours (coll_sm or coll_sm_contexts differs)");
        }
        if want.ring >= geo.nrings {
            return Err("our ring index is outside the segment");
        }
        if (geo.max_frag as usize) < want.max_len {
            return Err(
                "peer accepts smaller fragments than we send (btl_sm_max_send_size differs)",
            );
        }
        let total = geo.check()?;
        if u64_at(field::TOTAL) != total as u64 {
            return Err("recorded size disagrees with the geometry");
        }
        Ok((geo, total))
    }
}

/// What a sender expects of a receiver's segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expect {
    /// The receiver's world rank.
    pub owner: u32,
    /// Rings in its segment (processes on the node, less one).
    pub nrings: u32,
    /// Index of our ring in it.
    pub ring: u32,
    /// Longest payload we send.
    pub max_len: usize,
    /// Bytes of the collective area (alike at every process of the job).
    pub coll_bytes: usize,
}

/// Why a segment could not be created or attached.
#[derive(Debug)]
pub(crate) struct SegError {
    /// What failed, for the core's error (static text).
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The system's error, if one.
    pub io: Option<io::Error>,
}

impl SegError {
    fn new(what: &'static str, path: &Path, io: Option<io::Error>) -> SegError {
        SegError {
            what,
            path: path.to_path_buf(),
            io,
        }
    }
}

impl fmt::Display for SegError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)?;
        if let Some(e) = &self.io {
            write!(f, ": {e}")?;
        }
        Ok(())
    }
}

/// A shared, read-write mapping of (the start of) a file.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is an address range owned by this value; who may access which part of it,
// and how, is governed by the ring protocol, not by the thread that holds it.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(file: &File, len: usize) -> io::Result<Mapping> {
        // SAFETY: a new mapping at an address the kernel picks aliases no Rust object; the fd is
        // open for the duration of the call. Access beyond the file's size would fault, so
        // callers map only what fstat showed to exist.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let Some(ptr) = NonNull::new(p.cast()) else {
            return Err(io::Error::other("mmap returned a null mapping"));
        };
        Ok(Mapping { ptr, len })
    }

    fn at(&self, off: usize) -> *mut u8 {
        assert!(off < self.len);
        // SAFETY: in bounds of the mapping (checked above).
        unsafe { self.ptr.as_ptr().add(off) }
    }

    fn ready(&self) -> &AtomicU32 {
        // SAFETY: field::READY + 4 <= HEADER_BYTES <= len, 4-aligned (the mapping is
        // page-aligned); the word is only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.at(field::READY).cast()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range mapped in `new`; the rings that point into it are
        // owned alongside it and dropped with it, so nothing uses it afterwards.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A mapped segment whose geometry has been checked.
pub(crate) struct Segment {
    map: Mapping,
    geo: Geometry,
}

impl Segment {
    /// Creates the segment file at `path` (which must not exist) for process `owner` with
    /// geometry `geo`, mode 0600, its memory reserved, header filled in — but not yet ready.
    pub(crate) fn create(path: &Path, owner: u32, geo: Geometry) -> Result<Segment, SegError> {
        let total = geo
            .check()
            .map_err(|what| SegError::new(what, path, None))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| {
                let what = if e.kind() == io::ErrorKind::AlreadyExists {
                    "segment file exists already (left by a crashed job with the same id?)"
                } else {
                    "cannot create the segment file"
                };
                SegError::new(what, path, Some(e))
            })?;
        // From here on the file is ours: remove it again if anything below fails.
        let mut undo = RemoveOnDrop(Some(path));
        let io = |what| move |e| SegError::new(what, path, Some(e));
        // The umask may have removed owner bits; peers of the same user need read-write.
        file.set_permissions(Permissions::from_mode(0o600))
            .map_err(io("cannot set the segment's mode"))?;
        file.set_len(total as u64)
            .map_err(io("cannot size the segment"))?;
        reserve_space(&file, total).map_err(io("not enough room for the segment"))?;
        let map = Mapping::new(&file, total).map_err(io("cannot map the segment"))?;
        let header = geo.encode(owner, total);
        let pid = std::process::id().to_ne_bytes();
        let base = (map.at(0) as u64).to_ne_bytes();
        // SAFETY: the mapping is fresh, at least HEADER_BYTES long, and nobody reads the header
        // before the ready word is stored, which happens after these writes.
        unsafe {
            ptr::copy_nonoverlapping(header.as_ptr(), map.at(0), header.len());
            ptr::copy_nonoverlapping(pid.as_ptr(), map.at(field::PID.start), pid.len());
            ptr::copy_nonoverlapping(base.as_ptr(), map.at(field::BASE.start), base.len());
        }
        undo.0 = None;
        Ok(Segment { map, geo })
    }

    /// Marks the segment usable: everything written to it so far is visible to a peer that sees
    /// the ready word.
    pub(crate) fn publish(&self) {
        self.map.ready().store(READY, Ordering::Release);
    }

    /// The segment's geometry.
    #[cfg(test)]
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The creator's process id and the address of this segment in its address space, as it
    /// recorded them in the header; with [`Segment::header_start`], what a single-copy reader
    /// checks before it trusts the process id (`sm::cma`).
    pub(crate) fn origin(&self) -> (u32, u64) {
        let mut pid = [0u8; 4];
        let mut base = [0u8; 8];
        // SAFETY: both fields lie in the header (HEADER_BYTES <= len), written by the creator
        // before its Release store of the ready word, which we loaded with Acquire before
        // this segment was made; a private copy is taken.
        unsafe {
            ptr::copy_nonoverlapping(self.map.at(field::PID.start), pid.as_mut_ptr(), 4);
            ptr::copy_nonoverlapping(self.map.at(field::BASE.start), base.as_mut_ptr(), 8);
        }
        (u32::from_ne_bytes(pid), u64::from_ne_bytes(base))
    }

    /// The first bytes of the header (magic, version, owner, geometry, process id, base) as
    /// mapped here.
    pub(crate) fn header_start(&self) -> [u8; field::BASE.end] {
        let mut h = [0u8; field::BASE.end];
        // SAFETY: within the header; immutable once the segment is ready (see `origin`).
        unsafe { ptr::copy_nonoverlapping(self.map.at(0), h.as_mut_ptr(), h.len()) };
        h
    }

    /// Ring `i` (a sender's slot).
    pub(crate) fn ring(&self, i: u32) -> RingMem {
        assert!(i < self.geo.nrings);
        let ctl = HEADER_BYTES + i as usize * CTL_BYTES;
        let data = self.geo.data_base() + i as usize * self.geo.ring_bytes;
        assert!(data + self.geo.ring_bytes <= self.map.len);
        // SAFETY: the geometry was checked against the mapping's length (asserted above): the
        // control block and data area lie inside the mapping, 8-aligned (page-aligned base,
        // multiples of 8), ring_bytes a power of two >= 16 (Geometry::check). The mapping lives
        // as long as this Segment, and its owner keeps the Segment beside the rings it hands out.
        unsafe { RingMem::new(self.map.at(ctl), self.map.at(data), self.geo.ring_bytes) }
    }

    /// The collective area; `None` when it is empty.
    pub(crate) fn coll_area(&self) -> Option<Area> {
        let off = self.geo.coll_base()?;
        if self.geo.coll_bytes == 0 {
            return None;
        }
        assert!(off + self.geo.coll_bytes <= self.map.len);
        Some(Area {
            base: NonNull::new(self.map.at(off))?,
            len: self.geo.coll_bytes,
        })
    }
}

/// Removes a file when dropped, unless disarmed.
struct RemoveOnDrop<'a>(Option<&'a Path>);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Allocates the file's pages now, so that running out of room in the backing directory is an
/// error here rather than a SIGBUS on the first touch of a page later.
pub(crate) fn reserve_space(file: &File, len: usize) -> io::Result<()> {
    // SAFETY: a plain system call on an open descriptor.
    let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
    match r {
        0 => Ok(()),
        // A file system that cannot preallocate: go on with a sparse file.
        libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// A peer's segment on its way to being mapped; [`Attaching::step`] advances it without ever
/// blocking, so the sender can retry after progress while the peer is still starting.
#[derive(Default)]
pub(crate) enum Attaching {
    /// Not opened yet (or not there yet).
    #[default]
    Closed,
    /// Opened, but the peer has not sized it yet.
    Open(File),
    /// Header mapped, waiting for the ready word.
    Header(File, Mapping),
}

impl Attaching {
    /// Takes as many steps as possible: `Ok(Some(segment))` once the peer's segment is ready and
    /// checked, `Ok(None)` if the peer is not that far yet, `Err` if the file is not one we may
    /// trust.
    pub(crate) fn step(&mut self, path: &Path, want: &Expect) -> Result<Option<Segment>, SegError> {
        loop {
            match std::mem::take(self) {
                Attaching::Closed => {
                    let file = match OpenOptions::new()
                        .read(true)
                        .write(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(path)
                    {
                        Ok(f) => f,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                        Err(e) => {
                            return Err(SegError::new(
                                "cannot open the peer's segment",
                                path,
                                Some(e),
                            ))
                        }
                    };
                    check_owner(&file, path)?;
                    *self = Attaching::Open(file);
                }
                Attaching::Open(file) => {
                    if file_len(&file, path)? < HEADER_BYTES as u64 {
                        *self = Attaching::Open(file);
                        return Ok(None);
                    }
                    let header = Mapping::new(&file, HEADER_BYTES).map_err(|e| {
                        SegError::new("cannot map the peer's segment header", path, Some(e))
                    })?;
                    *self = Attaching::Header(file, header);
                }
                Attaching::Header(file, header) => {
                    // Acquire: the header the peer wrote before its Release store is visible.
                    if header.ready().load(Ordering::Acquire) != READY {
                        *self = Attaching::Header(file, header);
                        return Ok(None);
                    }
                    let mut copy = [0u8; field::LEN];
                    // SAFETY: the header mapping holds HEADER_BYTES >= field::LEN bytes. We check
                    // a private copy, so the peer cannot change what we validated.
                    unsafe {
                        ptr::copy_nonoverlapping(header.at(0), copy.as_mut_ptr(), copy.len())
                    };
                    let (geo, total) = Geometry::parse(&copy, want)
                        .map_err(|what| SegError::new(what, path, None))?;
                    if file_len(&file, path)? < total as u64 {
                        return Err(SegError::new(
                            "peer's segment file is shorter than its header says",
                            path,
                            None,
                        ));
                    }
                    let map = Mapping::new(&file, total).map_err(|e| {
                        SegError::new("cannot map the peer's segment", path, Some(e))
                    })?;
                    return Ok(Some(Segment { map, geo }));
                }
            }
        }
    }
}

fn file_len(file: &File, path: &Path) -> Result<u64, SegError> {
    file.metadata()
        .map(|m| m.len())
        .map_err(|e| SegError::new("cannot stat the peer's segment", path, Some(e)))
}

/// Refuses a file that is not a regular file of our own user, private to it: anything else was
/// not made by a process of this job.
fn check_owner(file: &File, path: &Path) -> Result<(), SegError> {
    let m = file
        .metadata()
        .map_err(|e| SegError::new("cannot stat the peer's segment", path, Some(e)))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_file() || m.uid() != me || m.mode() & 0o077 != 0 {
        return Err(SegError::new(
            "peer's segment is not a private regular file of this user",
            path,
            None,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!(
            "stormpi-unit-{}-{}-{name}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let _ = std::fs::remove_file(&p);
        p
    }

    const GEO: Geometry = Geometry {
        nrings: 3,
        ring_bytes: 8192,
        max_frag: 1024,
        coll_bytes: 4096,
    };

    fn want(owner: u32) -> Expect {
        Expect {
            owner,
            nrings: 3,
            ring: 2,
            max_len: 1024,
            coll_bytes: 4096,
        }
    }

    #[test]
    fn create_then_attach_after_ready() {
        let path = scratch("ok");
        let seg = Segment::create(&path, 7, GEO).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len() as usize, GEO.check().unwrap());
        let mut a = Attaching::default();
        assert!(a.step(&path, &want(7)).unwrap().is_none(), "not ready yet");
        assert!(matches!(a, Attaching::Header(..)));
        seg.publish();
        let peer = a.step(&path, &want(7)).unwrap().expect("ready");
        assert_eq!(peer.geometry(), GEO);
        // Both mappings show the same ring memory.
        let (mine, theirs) = (seg.ring(2), peer.ring(2));
        let mut p = super::super::ring::Producer::new(theirs).unwrap();
        p.reserve(3).unwrap().copy_from_slice(b"abc");
        p.commit(stormpi_core::btl::AmTag(9), 3);
        let mut c = super::super::ring::Consumer::new(mine, 1024);
        let mut got = Vec::new();
        c.poll(|tag, f| {
            got.push((tag.0, f.to_vec()));
            stormpi_core::btl::Delivery::Consumed
        })
        .unwrap();
        assert_eq!(got, vec![(9, b"abc".to_vec())]);
        // The collective areas: after the rings, the same memory in both mappings.
        let (a, b) = (seg.coll_area().unwrap(), peer.coll_area().unwrap());
        assert_eq!(a.len, 4096);
        assert_eq!(a.base.as_ptr() as usize % 64, 0);
        // SAFETY: both areas are 4096 bytes of live mappings of the same file.
        unsafe {
            a.base.as_ptr().add(4095).write(0x5a);
            assert_eq!(b.base.as_ptr().add(4095).read(), 0x5a);
        }
        drop((seg, peer));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_peer_with_another_collective_area_is_refused() {
        let path = scratch("coll");
        let seg = Segment::create(&path, 7, GEO).unwrap();
        seg.publish();
        let mut a = Attaching::default();
        let other = Expect {
            coll_bytes: 8192,
            ..want(7)
        };
        let e = a.step(&path, &other).err().expect("refused");
        assert!(e.what.contains("collective area"), "{e}");
        drop(seg);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn missing_file_is_not_yet_and_existing_file_is_refused_for_create() {
        let path = scratch("absent");
        let mut a = Attaching::default();
        assert!(a.step(&path, &want(0)).unwrap().is_none());
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o600)).unwrap();
        // Exists but empty: the peer has not sized it yet.
        assert!(a.step(&path, &want(0)).unwrap().is_none());
        assert!(matches!(a, Attaching::Open(_)));
        let e = Segment::create(&path, 0, GEO).err().expect("O_EXCL");
        assert!(e.what.contains("exists"), "{e}");
        // The failed create must not remove someone else's file.
        assert!(path.exists());
        std::fs::remove_file(&path).unwrap();
    }

    fn forged(name: &str, edit: impl FnOnce(&mut [u8])) -> SegError {
        let path = scratch(name);
        let seg = Segment::create(&path, 7, GEO).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        edit(&mut bytes);
        drop(seg);
        std::fs::write(&path, &bytes).unwrap();
        let mut a = Attaching::default();
        let e = a.step(&path, &want(7)).err().expect("refused");
        std::fs::remove_file(&path).unwrap();
        e
    }

    fn set_ready(b: &mut [u8]) {
        b[field::READY..field::READY + 4].copy_from_slice(&READY.to_ne_bytes());
    }

    #[test]
    fn corrupt_headers_are_refused() {
        type Case = (&'static str, fn(&mut [u8]), &'static str);
        let cases: [Case; 7] = [
            ("magic", |b| b[0] ^= 1, "magic"),
            ("version", |b| b[field::VERSION][0] = 9, "version"),
            ("owner", |b| b[field::OWNER][0] = 8, "another rank"),
            ("nrings", |b| b[field::NRINGS][0] = 2, "ring count"),
            (
                "small-frag",
                |b| b[field::MAX_FRAG][1] = 0,
                "smaller fragments",
            ),
            (
                "ring-bytes",
                |b| b[field::RING_BYTES][1] = 0x30,
                "power of two",
            ),
            ("total", |b| b[field::TOTAL][0] ^= 8, "recorded size"),
        ];
        for (name, edit, msg) in cases {
            let e = forged(name, |b| {
                edit(b);
                set_ready(b);
            });
            assert!(e.what.contains(msg), "{name}: {e}");
        }
    }

    #[test]
    fn truncated_file_and_foreign_mode_are_refused() {
        let path = scratch("short");
        let seg = Segment::create(&path, 7, GEO).unwrap();
        seg.publish();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(HEADER_BYTES as u64).unwrap();
        let mut a = Attaching::default();
        let e = a.step(&path, &want(7)).err().expect("short file");
        assert!(e.what.contains("shorter"), "{e}");
        drop(seg);
        std::fs::remove_file(&path).unwrap();

        let path = scratch("mode");
        let seg = Segment::create(&path, 7, GEO).unwrap();
        seg.publish();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let e = Attaching::default()
            .step(&path, &want(7))
            .err()
            .expect("world-readable");
        assert!(e.what.contains("private"), "{e}");
        drop(seg);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn bad_geometries_are_not_created() {
        for geo in [
            Geometry { nrings: 0, ..GEO },
            Geometry {
                ring_bytes: 3000,
                ..GEO
            },
            Geometry {
                ring_bytes: 2048,
                ..GEO
            },
        ] {
            let path = scratch("geo");
            assert!(Segment::create(&path, 0, geo).is_err(), "{geo:?}");
            assert!(!path.exists());
        }
    }
}
