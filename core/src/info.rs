//! Info objects: bounded stores of (key, value) string pairs (`MPI_Info`).
//!
//! Every info object of the process — the user's, the predefined read-only `MPI_INFO_ENV`, and
//! the hints kept for each communicator — lives in one [`InfoTable`] carved at init: a slot per
//! object (`info_max`), one entry array shared by all of them (`info_max_entries`) and one byte
//! store holding every key and value (`info_bytes`). Entries keep the order in which their keys
//! were first set, so `MPI_Info_get_nthkey` numbers keys stably. Deleting compacts the entry
//! array and the byte store, so no space is lost to fragmentation; the tables are small and
//! compaction is a `memmove`.
//!
//! Keys are at most [`MAX_KEY`] bytes (`MPI_MAX_INFO_KEY`) and not empty; values at most
//! [`MAX_VALUE`] bytes (`MPI_MAX_INFO_VAL`). Both are byte strings (C strings without their NUL).

use crate::arena::{Arena, Sizer};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef, Params};

/// `info_max`.
pub static INFO_MAX: ParamDef = ParamDef {
    name: "info_max",
    kind: Kind::Int {
        min: 2,
        max: 1 << 16,
    },
    default: Default::Int(128),
    description: "Most info objects alive at once (MPI_INFO_ENV and communicator hints included) (fixed at init: this table does not grow yet)",
};

/// `info_max_entries`.
pub static INFO_MAX_ENTRIES: ParamDef = ParamDef {
    name: "info_max_entries",
    kind: Kind::Int {
        min: 16,
        max: 1 << 20,
    },
    default: Default::Int(512),
    description: "Most (key, value) pairs held by all info objects together (fixed at init: this table does not grow yet)",
};

/// `info_bytes`.
pub static INFO_BYTES: ParamDef = ParamDef {
    name: "info_bytes",
    kind: Kind::Int {
        min: 4096,
        max: 1 << 28,
    },
    default: Default::Int(32 * 1024),
    description: "Bytes for the keys and values of all info objects together (fixed at init: this store does not grow yet)",
};

/// Parameters of this module.
pub static PARAMS: [&ParamDef; 3] = [&INFO_MAX, &INFO_MAX_ENTRIES, &INFO_BYTES];

/// Longest key (`MPI_MAX_INFO_KEY`).
pub const MAX_KEY: usize = 255;
/// Longest value (`MPI_MAX_INFO_VAL`).
pub const MAX_VALUE: usize = 1024;

/// Generations of an info slot (a handle has room for 10 bits).
pub const INFO_GENS: u16 = 1024;

/// An info object: its slot and the slot's generation (so a freed handle is recognised).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InfoId {
    /// Slot.
    pub index: u16,
    /// Generation of the slot when the object was created.
    pub gen: u16,
}

impl InfoId {
    /// The predefined `MPI_INFO_ENV` (slot 0, read-only).
    pub const ENV: InfoId = InfoId { index: 0, gen: 0 };
}

/// Who holds an info object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// Unused slot.
    Free,
    /// `MPI_INFO_ENV`.
    Env,
    /// An object the user created (and must free).
    User,
    /// The hints of a communicator (not reachable through a handle).
    Comm(u32),
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    owner: Owner,
    gen: u16,
}

/// One (key, value) pair: ranges of the byte store.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    info: u16,
    key_off: u32,
    key_len: u16,
    val_off: u32,
    val_len: u16,
}

/// A compacting store of byte strings.
pub struct Strings {
    bytes: &'static mut [u8],
    used: usize,
}

impl Strings {
    /// Arena bytes for a store of `capacity` bytes.
    pub fn size(sizer: &mut Sizer, capacity: usize) {
        sizer.slice::<u8>(capacity);
    }

    /// An empty store of `capacity` bytes.
    pub fn new(arena: &mut Arena, capacity: usize) -> Result<Strings> {
        Ok(Strings {
            bytes: arena.slice(capacity, |_| 0)?,
            used: 0,
        })
    }

    /// Size of the store in bytes.
    pub fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// Bytes still free.
    pub fn free(&self) -> usize {
        self.bytes.len() - self.used
    }

    /// Appends `s`; returns its offset, or `None` when it does not fit.
    pub fn push(&mut self, s: &[u8]) -> Option<u32> {
        if s.len() > self.free() {
            return None;
        }
        let off = self.used;
        self.bytes[off..off + s.len()].copy_from_slice(s);
        self.used += s.len();
        Some(off as u32)
    }

    /// Appends a copy of the `len` bytes at `off`; the caller has checked that they fit.
    fn push_copy(&mut self, off: u32, len: usize) -> u32 {
        let at = self.used;
        self.bytes.copy_within(off as usize..off as usize + len, at);
        self.used += len;
        at as u32
    }

    /// The `len` bytes at `off`.
    pub fn get(&self, off: u32, len: usize) -> &[u8] {
        &self.bytes[off as usize..off as usize + len]
    }

    /// Removes the `len` bytes at `off`, moving later bytes down: every offset above `off`
    /// must then be lowered by `len` (see [`Strings::moved`]).
    pub fn remove(&mut self, off: u32, len: usize) {
        let off = off as usize;
        self.bytes.copy_within(off + len..self.used, off);
        self.used -= len;
    }

    /// Where a string that was at `at` is after removing `len` bytes at `off`.
    pub fn moved(at: u32, off: u32, len: usize) -> u32 {
        if at > off {
            at - len as u32
        } else {
            at
        }
    }
}

/// Every info object of the process.
pub struct InfoTable {
    slots: &'static mut [Slot],
    entries: &'static mut [Entry],
    used: usize,
    strings: Strings,
}

fn no_info() -> Error {
    Error::new(
        ErrorClass::Info,
        Reason::BadArgument {
            what: "not a valid info object",
        },
    )
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(Error::new(
            ErrorClass::InfoKey,
            Reason::BadArgument {
                what: "info key is empty or longer than MPI_MAX_INFO_KEY",
            },
        ));
    }
    Ok(())
}

impl InfoTable {
    /// Arena bytes for the capacities in `params`.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        sizer
            .slice::<Slot>(params.u32(&INFO_MAX) as usize)
            .slice::<Entry>(params.u32(&INFO_MAX_ENTRIES) as usize);
        Strings::size(sizer, params.u32(&INFO_BYTES) as usize);
    }

    /// A table holding only an empty `MPI_INFO_ENV`.
    pub fn new(params: &Params, arena: &mut Arena) -> Result<InfoTable> {
        InfoTable::with_capacity(
            arena,
            params.u32(&INFO_MAX) as usize,
            params.u32(&INFO_MAX_ENTRIES) as usize,
            params.u32(&INFO_BYTES) as usize,
        )
    }

    /// A table of explicit capacities.
    pub fn with_capacity(
        arena: &mut Arena,
        objects: usize,
        entries: usize,
        bytes: usize,
    ) -> Result<InfoTable> {
        let slots = arena.slice(objects.clamp(1, 1 << 16), |i| Slot {
            owner: if i == 0 { Owner::Env } else { Owner::Free },
            gen: 0,
        })?;
        Ok(InfoTable {
            slots,
            entries: arena.slice(entries, |_| Entry::default())?,
            used: 0,
            strings: Strings::new(arena, bytes)?,
        })
    }

    fn slot(&self, id: InfoId) -> Result<&Slot> {
        self.slots
            .get(id.index as usize)
            .filter(|s| s.gen == id.gen && s.owner != Owner::Free)
            .ok_or_else(no_info)
    }

    /// Whether `id` names a live info object a handle may name (the user's or `MPI_INFO_ENV`).
    pub fn check(&self, id: InfoId) -> Result<()> {
        match self.slot(id)?.owner {
            Owner::User | Owner::Env => Ok(()),
            _ => Err(no_info()),
        }
    }

    fn check_writable(&self, id: InfoId) -> Result<()> {
        match self.slot(id)?.owner {
            Owner::User => Ok(()),
            Owner::Env => Err(Error::new(
                ErrorClass::Info,
                Reason::BadArgument {
                    what: "MPI_INFO_ENV is read-only",
                },
            )),
            _ => Err(no_info()),
        }
    }

    fn alloc(&mut self, owner: Owner) -> Result<InfoId> {
        let i = self
            .slots
            .iter()
            .position(|s| s.owner == Owner::Free)
            .ok_or(Error::exhausted(
                "info objects",
                self.slots.len() as u32,
                INFO_MAX.name,
            ))?;
        let s = &mut self.slots[i];
        s.owner = owner;
        Ok(InfoId {
            index: i as u16,
            gen: s.gen,
        })
    }

    /// A new empty info object (`MPI_Info_create`).
    pub fn create(&mut self) -> Result<InfoId> {
        self.alloc(Owner::User)
    }

    fn release(&mut self, index: u16) {
        while let Some(pos) = self.entries[..self.used]
            .iter()
            .position(|e| e.info == index)
        {
            self.remove_entry(pos);
        }
        let s = &mut self.slots[index as usize];
        s.owner = Owner::Free;
        s.gen = (s.gen + 1) % INFO_GENS;
    }

    /// Frees a user's info object (`MPI_Info_free`).
    pub fn free(&mut self, id: InfoId) -> Result<()> {
        self.check_writable(id)?;
        self.release(id.index);
        Ok(())
    }

    fn entries_of(&self, index: u16) -> impl Iterator<Item = (usize, &Entry)> + '_ {
        self.entries[..self.used]
            .iter()
            .enumerate()
            .filter(move |(_, e)| e.info == index)
    }

    fn find(&self, index: u16, key: &[u8]) -> Option<usize> {
        self.entries_of(index)
            .find(|(_, e)| self.strings.get(e.key_off, e.key_len as usize) == key)
            .map(|(i, _)| i)
    }

    fn remove_entry(&mut self, pos: usize) {
        let e = self.entries[pos];
        // Remove the later range first so the earlier offset stays valid.
        let mut ranges = [
            (e.key_off, e.key_len as usize),
            (e.val_off, e.val_len as usize),
        ];
        if ranges[0].0 < ranges[1].0 {
            ranges.swap(0, 1);
        }
        for (off, len) in ranges {
            self.cut(off, len);
        }
        self.entries.copy_within(pos + 1..self.used, pos);
        self.used -= 1;
    }

    /// Removes bytes from the store and fixes every entry's offsets.
    fn cut(&mut self, off: u32, len: usize) {
        if len == 0 {
            return;
        }
        self.strings.remove(off, len);
        for x in self.entries[..self.used].iter_mut() {
            x.key_off = Strings::moved(x.key_off, off, len);
            x.val_off = Strings::moved(x.val_off, off, len);
        }
    }

    fn bytes_exhausted(&self) -> Error {
        Error::exhausted(
            "info key/value bytes",
            self.strings.capacity() as u32,
            INFO_BYTES.name,
        )
    }

    fn put(&mut self, index: u16, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        if value.len() > MAX_VALUE {
            return Err(Error::new(
                ErrorClass::InfoValue,
                Reason::BadArgument {
                    what: "info value is longer than MPI_MAX_INFO_VAL",
                },
            ));
        }
        match self.find(index, key) {
            Some(pos) => {
                let old = self.entries[pos].val_len as usize;
                if value.len() > self.strings.free() + old {
                    return Err(self.bytes_exhausted());
                }
                let e = self.entries[pos];
                self.cut(e.val_off, old);
                let off = self
                    .strings
                    .push(value)
                    .ok_or_else(|| self.bytes_exhausted())?;
                let e = &mut self.entries[pos];
                e.val_off = off;
                e.val_len = value.len() as u16;
            }
            None => {
                if self.used == self.entries.len() {
                    return Err(Error::exhausted(
                        "info entries",
                        self.entries.len() as u32,
                        INFO_MAX_ENTRIES.name,
                    ));
                }
                if key.len() + value.len() > self.strings.free() {
                    return Err(self.bytes_exhausted());
                }
                let key_off = self
                    .strings
                    .push(key)
                    .ok_or_else(|| self.bytes_exhausted())?;
                let val_off = self
                    .strings
                    .push(value)
                    .ok_or_else(|| self.bytes_exhausted())?;
                self.entries[self.used] = Entry {
                    info: index,
                    key_off,
                    key_len: key.len() as u16,
                    val_off,
                    val_len: value.len() as u16,
                };
                self.used += 1;
            }
        }
        Ok(())
    }

    /// Sets `key` to `value` (`MPI_Info_set`), replacing an earlier value.
    pub fn set(&mut self, id: InfoId, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_writable(id)?;
        self.put(id.index, key, value)
    }

    /// Sets a key of `MPI_INFO_ENV` (while the library fills it at init).
    pub fn set_env(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put(InfoId::ENV.index, key, value)
    }

    /// The value of `key`, if set (`MPI_Info_get`).
    pub fn get(&self, id: InfoId, key: &[u8]) -> Result<Option<&[u8]>> {
        self.check(id)?;
        check_key(key)?;
        Ok(self.find(id.index, key).map(|pos| {
            let e = &self.entries[pos];
            self.strings.get(e.val_off, e.val_len as usize)
        }))
    }

    /// Removes `key` (`MPI_Info_delete`); `MPI_ERR_INFO_NOKEY` if it is not set.
    pub fn delete(&mut self, id: InfoId, key: &[u8]) -> Result<()> {
        self.check_writable(id)?;
        check_key(key)?;
        let pos = self.find(id.index, key).ok_or(Error::new(
            ErrorClass::InfoNokey,
            Reason::BadArgument {
                what: "the key is not set in this info object",
            },
        ))?;
        self.remove_entry(pos);
        Ok(())
    }

    /// Number of keys set (`MPI_Info_get_nkeys`).
    pub fn nkeys(&self, id: InfoId) -> Result<usize> {
        self.check(id)?;
        Ok(self.entries_of(id.index).count())
    }

    /// The `n`-th key, counting from 0 in the order keys were first set (`MPI_Info_get_nthkey`).
    pub fn nthkey(&self, id: InfoId, n: usize) -> Result<&[u8]> {
        self.check(id)?;
        let (_, e) = self.entries_of(id.index).nth(n).ok_or(Error::bad_arg(
            "n is not below the number of keys of the info object",
        ))?;
        Ok(self.strings.get(e.key_off, e.key_len as usize))
    }

    /// Copies the entries of slot `from` whose key passes `keep` into a new object of `owner`;
    /// all or nothing.
    fn copy(&mut self, from: u16, owner: Owner, keep: &dyn Fn(&[u8]) -> bool) -> Result<InfoId> {
        let (mut n, mut bytes) = (0, 0);
        for (_, e) in self.entries_of(from) {
            if keep(self.strings.get(e.key_off, e.key_len as usize)) {
                n += 1;
                bytes += e.key_len as usize + e.val_len as usize;
            }
        }
        if self.used + n > self.entries.len() {
            return Err(Error::exhausted(
                "info entries",
                self.entries.len() as u32,
                INFO_MAX_ENTRIES.name,
            ));
        }
        if bytes > self.strings.free() {
            return Err(self.bytes_exhausted());
        }
        let new = self.alloc(owner)?;
        let end = self.used;
        for i in 0..end {
            let e = self.entries[i];
            if e.info != from || !keep(self.strings.get(e.key_off, e.key_len as usize)) {
                continue;
            }
            // Room was checked above; the source ranges stay put while we append.
            let key_off = self.strings.push_copy(e.key_off, e.key_len as usize);
            let val_off = self.strings.push_copy(e.val_off, e.val_len as usize);
            self.entries[self.used] = Entry {
                info: new.index,
                key_off,
                key_len: e.key_len,
                val_off,
                val_len: e.val_len,
            };
            self.used += 1;
        }
        Ok(new)
    }

    /// A new user object with the same entries (`MPI_Info_dup`; `MPI_INFO_ENV` may be copied).
    pub fn dup(&mut self, id: InfoId) -> Result<InfoId> {
        self.check(id)?;
        self.copy(id.index, Owner::User, &|_| true)
    }

    /// Replaces the hints kept for communicator `comm` by a copy of `from` (none if `None`).
    /// Hints may be ignored, so when the table has no room the old hints are dropped and
    /// `Ok(false)` says the new ones were not kept; an invalid `from` is an error.
    pub fn set_comm_hints(&mut self, comm: u32, from: Option<InfoId>) -> Result<bool> {
        if let Some(f) = from {
            self.check(f)?;
        }
        self.drop_comm_hints(comm);
        match from {
            None => Ok(true),
            Some(f) if self.nkeys(f)? == 0 => Ok(true),
            Some(f) => Ok(self.copy(f.index, Owner::Comm(comm), &|_| true).is_ok()),
        }
    }

    /// Copies the hints of communicator `from` to communicator `to` (`MPI_Comm_dup`); `false`
    /// when there was no room to keep them.
    pub fn copy_comm_hints(&mut self, from: u32, to: u32) -> bool {
        self.drop_comm_hints(to);
        match self.comm_hints(from) {
            None => true,
            Some(h) => self.copy(h.index, Owner::Comm(to), &|_| true).is_ok(),
        }
    }

    /// The hints kept for communicator `comm`.
    pub fn comm_hints(&self, comm: u32) -> Option<InfoId> {
        self.slots
            .iter()
            .position(|s| s.owner == Owner::Comm(comm))
            .map(|i| InfoId {
                index: i as u16,
                gen: self.slots[i].gen,
            })
    }

    /// Forgets the hints of communicator `comm` (it was freed).
    pub fn drop_comm_hints(&mut self, comm: u32) {
        if let Some(h) = self.comm_hints(comm) {
            self.release(h.index);
        }
    }

    /// A new user object holding those of communicator `comm`'s hints whose key passes `keep`
    /// (`MPI_Comm_get_info`: the hints the library honours).
    pub fn comm_info(&mut self, comm: u32, keep: &dyn Fn(&[u8]) -> bool) -> Result<InfoId> {
        match self.comm_hints(comm) {
            Some(h) => self.copy(h.index, Owner::User, keep),
            None => self.create(),
        }
    }

    /// Info objects alive (`MPI_INFO_ENV` and communicator hints included).
    pub fn count(&self) -> usize {
        self.slots.iter().filter(|s| s.owner != Owner::Free).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::tests::leak;

    fn table(objects: usize, entries: usize, bytes: usize) -> InfoTable {
        InfoTable::with_capacity(&mut Arena::new(leak(1 << 20)), objects, entries, bytes).unwrap()
    }

    #[test]
    fn set_get_replace_delete() {
        let mut t = table(4, 16, 4096);
        let i = t.create().unwrap();
        t.set(i, b"alpha", b"1").unwrap();
        t.set(i, b"beta", b"two").unwrap();
        t.set(i, b"gamma", b"").unwrap();
        assert_eq!(t.get(i, b"beta").unwrap(), Some(&b"two"[..]));
        t.set(i, b"alpha", b"one hundred").unwrap();
        assert_eq!(t.get(i, b"alpha").unwrap(), Some(&b"one hundred"[..]));
        assert_eq!(t.get(i, b"beta").unwrap(), Some(&b"two"[..]));
        assert_eq!(t.nkeys(i).unwrap(), 3);
        // Replacing a value keeps the key's position.
        assert_eq!(t.nthkey(i, 0).unwrap(), b"alpha");
        assert_eq!(t.nthkey(i, 2).unwrap(), b"gamma");
        t.delete(i, b"beta").unwrap();
        assert_eq!(t.nthkey(i, 1).unwrap(), b"gamma");
        assert_eq!(t.get(i, b"beta").unwrap(), None);
        assert_eq!(t.get(i, b"alpha").unwrap(), Some(&b"one hundred"[..]));
        assert_eq!(
            t.delete(i, b"beta").unwrap_err().class,
            ErrorClass::InfoNokey
        );
        assert_eq!(t.nthkey(i, 2).unwrap_err().class, ErrorClass::Arg);
    }

    #[test]
    fn key_and_value_limits() {
        let mut t = table(4, 16, 8192);
        let i = t.create().unwrap();
        let long = [b'k'; MAX_KEY + 1];
        assert_eq!(
            t.set(i, &long, b"v").unwrap_err().class,
            ErrorClass::InfoKey
        );
        assert_eq!(t.set(i, b"", b"v").unwrap_err().class, ErrorClass::InfoKey);
        t.set(i, &long[..MAX_KEY], b"v").unwrap();
        let big = [b'v'; MAX_VALUE + 1];
        assert_eq!(
            t.set(i, b"k", &big).unwrap_err().class,
            ErrorClass::InfoValue
        );
        t.set(i, b"k", &big[..MAX_VALUE]).unwrap();
        assert_eq!(t.get(i, b"k").unwrap().unwrap().len(), MAX_VALUE);
    }

    #[test]
    fn objects_are_separate_and_freed_handles_are_stale() {
        let mut t = table(4, 16, 4096);
        let a = t.create().unwrap();
        let b = t.create().unwrap();
        t.set(a, b"k", b"a").unwrap();
        t.set(b, b"k", b"b").unwrap();
        let c = t.dup(a).unwrap();
        t.set(c, b"k", b"c").unwrap();
        assert_eq!(t.get(a, b"k").unwrap(), Some(&b"a"[..]));
        assert_eq!(t.get(c, b"k").unwrap(), Some(&b"c"[..]));
        t.free(a).unwrap();
        assert_eq!(t.get(a, b"k").unwrap_err().class, ErrorClass::Info);
        assert_eq!(t.get(b, b"k").unwrap(), Some(&b"b"[..]));
        let d = t.create().unwrap();
        assert_eq!(d.index, a.index);
        assert_ne!(d, a);
        assert_eq!(t.nkeys(d).unwrap(), 0);
        // The byte store was compacted: only b's and c's strings remain.
        assert_eq!(t.strings.used, 4);
    }

    #[test]
    fn env_is_read_only_but_can_be_copied() {
        let mut t = table(4, 16, 4096);
        t.set_env(b"maxprocs", b"4").unwrap();
        let e = InfoId::ENV;
        assert_eq!(t.set(e, b"x", b"y").unwrap_err().class, ErrorClass::Info);
        assert_eq!(
            t.delete(e, b"maxprocs").unwrap_err().class,
            ErrorClass::Info
        );
        assert_eq!(t.free(e).unwrap_err().class, ErrorClass::Info);
        let d = t.dup(e).unwrap();
        t.set(d, b"x", b"y").unwrap();
        assert_eq!(t.get(d, b"maxprocs").unwrap(), Some(&b"4"[..]));
        assert_eq!(t.nkeys(e).unwrap(), 1);
    }

    #[test]
    fn exhaustion_names_the_parameters_and_changes_nothing() {
        let mut t = table(3, 3, 4096);
        let a = t.create().unwrap();
        t.create().unwrap();
        let e = t.create().unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "info_max",
                ..
            }
        ));
        t.set(a, b"1", b"").unwrap();
        t.set(a, b"2", b"").unwrap();
        t.set(a, b"3", b"").unwrap();
        let e = t.set(a, b"4", b"").unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "info_max_entries",
                ..
            }
        ));
        let mut t = table(3, 8, 10);
        let a = t.create().unwrap();
        t.set(a, b"key", b"value").unwrap();
        let e = t.set(a, b"k2", b"vv").unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "info_bytes",
                ..
            }
        ));
        // Replacing within the freed room works; a dup that does not fit fails whole.
        t.set(a, b"key", b"1234567").unwrap();
        assert!(t.dup(a).is_err());
        assert_eq!(t.count(), 2);
    }

    #[test]
    fn communicator_hints() {
        let mut t = table(8, 16, 4096);
        let i = t.create().unwrap();
        t.set(i, b"mpi_assert_no_any_tag", b"true").unwrap();
        t.set(i, b"other", b"x").unwrap();
        assert!(t.set_comm_hints(5, Some(i)).unwrap());
        assert!(t.copy_comm_hints(5, 6));
        let h = t.comm_hints(6).unwrap();
        assert_eq!(t.get(h, b"other").unwrap_err().class, ErrorClass::Info);
        let got = t
            .comm_info(6, &|k: &[u8]| k.starts_with(b"mpi_assert"))
            .unwrap();
        assert_eq!(t.nkeys(got).unwrap(), 1);
        assert_eq!(
            t.get(got, b"mpi_assert_no_any_tag").unwrap(),
            Some(&b"true"[..])
        );
        let none = t.comm_info(7, &|_: &[u8]| true).unwrap();
        assert_eq!(t.nkeys(none).unwrap(), 0);
        t.drop_comm_hints(5);
        t.drop_comm_hints(6);
        assert!(t.comm_hints(5).is_none());
        assert_eq!(t.count(), 4); // ENV, i, got, none
        assert!(t.set_comm_hints(5, None).unwrap());
        assert!(t.comm_hints(5).is_none());
    }
}
