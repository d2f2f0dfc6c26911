//! Attribute caching: keyvals, the attribute values set on communicators, datatypes and
//! windows, and object names.
//!
//! One bounded [`AttrTable`] per process, carved at init: keyvals (`attr_max_keyvals`), attribute
//! values (`attr_max`) and names (`attr_max_names`). An attribute is a pointer-sized value the
//! user caches on an object under a keyval; the keyval carries the copy and delete callbacks that
//! `MPI_Comm_dup`/`MPI_Type_dup` and freeing or deleting run. The table only stores: the C layer
//! calls the callbacks, with no lock held, since they may call MPI themselves. Attributes
//! remember the order in which they were set (a sequence number), so they can be copied in that
//! order and deleted in reverse (as `MPI_Finalize` must for `MPI_COMM_SELF`).
//!
//! A freed keyval stays until the last attribute using it is deleted, so those attributes' delete
//! callbacks still run; its slot is then reused with a new generation, and its old handle is
//! recognised as stale.

use core::ffi::{c_int, c_void};

use crate::arena::{Arena, Sizer};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef, Params};

/// `attr_max_keyvals`.
pub static ATTR_MAX_KEYVALS: ParamDef = ParamDef {
    name: "attr_max_keyvals",
    kind: Kind::Int {
        min: 1,
        max: 1 << 16,
    },
    default: Default::Int(64),
    description: "Most attribute keyvals (communicator, datatype and window) alive at once (fixed at init: this table does not grow yet)",
};

/// `attr_max`.
pub static ATTR_MAX: ParamDef = ParamDef {
    name: "attr_max",
    kind: Kind::Int {
        min: 1,
        max: 1 << 20,
    },
    default: Default::Int(256),
    description: "Most attribute values cached on all objects together (fixed at init: this table does not grow yet)",
};

/// `attr_max_names`.
pub static ATTR_MAX_NAMES: ParamDef = ParamDef {
    name: "attr_max_names",
    kind: Kind::Int {
        min: 1,
        max: 1 << 16,
    },
    default: Default::Int(64),
    description: "Most objects (communicators, datatypes) given a name with MPI_*_set_name (fixed at init: this table does not grow yet)",
};

/// Parameters of this module.
pub static PARAMS: [&ParamDef; 3] = [&ATTR_MAX_KEYVALS, &ATTR_MAX, &ATTR_MAX_NAMES];

/// Longest object name, without its NUL (`MPI_MAX_OBJECT_NAME` - 1); longer names are cut.
pub const MAX_NAME: usize = 127;

/// Generations of a keyval slot (its handle has room for 6 bits).
pub const KEYVAL_GENS: u8 = 64;

/// The kinds of object that carry attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjKind {
    /// Communicators.
    Comm,
    /// Datatypes.
    Type,
    /// Windows.
    Win,
}

/// An object attributes are cached on: its kind and its id in the table of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Object {
    /// Kind.
    pub kind: ObjKind,
    /// Communicator slot, datatype index, window id.
    pub id: u32,
}

impl Object {
    /// Communicator `id`.
    pub const fn comm(id: u32) -> Object {
        Object {
            kind: ObjKind::Comm,
            id,
        }
    }

    /// Window `id` (its handle's index: slot and generation bits).
    pub const fn win(id: u32) -> Object {
        Object {
            kind: ObjKind::Win,
            id,
        }
    }

    /// Datatype `index`.
    pub const fn datatype(index: u32) -> Object {
        Object {
            kind: ObjKind::Type,
            id: index,
        }
    }
}

/// An attribute-copy callback (C's `MPI_Comm_copy_attr_function`; datatype and window handles
/// are `int`s too): `(old object, keyval, extra_state, value in, &value out, &flag) -> code`.
pub type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;

/// An attribute-delete callback (C's `MPI_Comm_delete_attr_function`):
/// `(object, keyval, value, extra_state) -> code`.
pub type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;

/// What a keyval does when its attributes are copied or deleted.
#[derive(Clone, Copy, Debug)]
pub struct Callbacks {
    /// Run on duplication; `None` (`MPI_*_NULL_COPY_FN`) does not copy.
    pub copy: Option<CopyFn>,
    /// Run on delete, replacement and free; `None` does nothing.
    pub delete: Option<DeleteFn>,
    /// The user's `extra_state` pointer, passed to both.
    pub extra: usize,
}

/// A keyval: its slot and generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyvalId {
    /// Slot.
    pub index: u16,
    /// Generation, below [`KEYVAL_GENS`].
    pub gen: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KvState {
    Free,
    Live,
    /// Freed by the user, still used by attributes.
    Freed,
}

#[derive(Clone, Copy, Debug)]
struct Keyval {
    state: KvState,
    kind: ObjKind,
    gen: u8,
    cb: Callbacks,
}

#[derive(Clone, Copy, Debug)]
struct Attr {
    obj: Object,
    keyval: u16,
    value: usize,
    seq: u64,
}

/// An attribute as the copy and delete paths see it.
#[derive(Clone, Copy, Debug)]
pub struct AttrRef {
    /// Its keyval (possibly freed by the user).
    pub keyval: KeyvalId,
    /// The keyval's callbacks.
    pub cb: Callbacks,
    /// The value.
    pub value: usize,
    /// When it was set (larger is later).
    pub seq: u64,
}

/// A name given to an object.
#[derive(Clone, Copy, Debug)]
struct Name {
    obj: Object,
    len: u8,
    bytes: [u8; MAX_NAME],
}

/// Keyvals, attribute values and names of the process.
pub struct AttrTable {
    keyvals: &'static mut [Keyval],
    attrs: &'static mut [Option<Attr>],
    names: &'static mut [Option<Name>],
    seq: u64,
}

fn bad_keyval(what: &'static str) -> Error {
    Error::new(ErrorClass::Keyval, Reason::BadArgument { what })
}

const NO_CALLBACKS: Callbacks = Callbacks {
    copy: None,
    delete: None,
    extra: 0,
};

impl AttrTable {
    /// Arena bytes for the capacities in `params`.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        sizer
            .slice::<Keyval>(params.u32(&ATTR_MAX_KEYVALS) as usize)
            .slice::<Option<Attr>>(params.u32(&ATTR_MAX) as usize)
            .slice::<Option<Name>>(params.u32(&ATTR_MAX_NAMES) as usize);
    }

    /// An empty table.
    pub fn new(params: &Params, arena: &mut Arena) -> Result<AttrTable> {
        AttrTable::with_capacity(
            arena,
            params.u32(&ATTR_MAX_KEYVALS) as usize,
            params.u32(&ATTR_MAX) as usize,
            params.u32(&ATTR_MAX_NAMES) as usize,
        )
    }

    /// An empty table of explicit capacities.
    pub fn with_capacity(
        arena: &mut Arena,
        keyvals: usize,
        attrs: usize,
        names: usize,
    ) -> Result<AttrTable> {
        Ok(AttrTable {
            keyvals: arena.slice(keyvals.min(1 << 16), |_| Keyval {
                state: KvState::Free,
                kind: ObjKind::Comm,
                gen: 0,
                cb: NO_CALLBACKS,
            })?,
            attrs: arena.slice(attrs, |_| None)?,
            names: arena.slice(names, |_| None)?,
            seq: 0,
        })
    }

    // ---- keyvals ------------------------------------------------------------------------------

    /// A new keyval for objects of `kind` (`MPI_Comm_create_keyval` and its twins).
    pub fn create_keyval(&mut self, kind: ObjKind, cb: Callbacks) -> Result<KeyvalId> {
        let i = self
            .keyvals
            .iter()
            .position(|k| k.state == KvState::Free)
            .ok_or(Error::exhausted(
                "attribute keyvals",
                self.keyvals.len() as u32,
                ATTR_MAX_KEYVALS.name,
            ))?;
        let k = &mut self.keyvals[i];
        k.state = KvState::Live;
        k.kind = kind;
        k.cb = cb;
        Ok(KeyvalId {
            index: i as u16,
            gen: k.gen,
        })
    }

    /// Checks that `kv` is a live keyval for objects of `kind`.
    pub fn check_keyval(&self, kv: KeyvalId, kind: ObjKind) -> Result<()> {
        match self.keyvals.get(kv.index as usize) {
            Some(k) if k.gen == kv.gen && k.state == KvState::Live => {
                if k.kind == kind {
                    Ok(())
                } else {
                    Err(bad_keyval("the keyval belongs to another kind of object"))
                }
            }
            _ => Err(bad_keyval("not a valid attribute keyval (freed?)")),
        }
    }

    /// The callbacks of live keyval `kv` for objects of `kind`.
    pub fn callbacks(&self, kv: KeyvalId, kind: ObjKind) -> Result<Callbacks> {
        self.check_keyval(kv, kind)?;
        Ok(self.keyvals[kv.index as usize].cb)
    }

    /// Frees a keyval (`MPI_Comm_free_keyval`): it can no longer be used to set or get, but
    /// attributes already set with it stay until they are deleted.
    pub fn free_keyval(&mut self, kv: KeyvalId, kind: ObjKind) -> Result<()> {
        self.check_keyval(kv, kind)?;
        self.keyvals[kv.index as usize].state = KvState::Freed;
        self.reclaim_keyval(kv.index);
        Ok(())
    }

    /// Releases keyval slot `index` if the user freed it and no attribute uses it.
    fn reclaim_keyval(&mut self, index: u16) {
        let k = &self.keyvals[index as usize];
        if k.state != KvState::Freed || self.attrs.iter().flatten().any(|a| a.keyval == index) {
            return;
        }
        let k = &mut self.keyvals[index as usize];
        k.state = KvState::Free;
        k.cb = NO_CALLBACKS;
        k.gen = (k.gen + 1) % KEYVAL_GENS;
    }

    /// Keyvals in use (live, or freed but still used).
    pub fn keyvals_in_use(&self) -> usize {
        self.keyvals
            .iter()
            .filter(|k| k.state != KvState::Free)
            .count()
    }

    // ---- attributes ---------------------------------------------------------------------------

    fn position(&self, obj: Object, index: u16) -> Option<usize> {
        self.attrs
            .iter()
            .position(|a| matches!(a, Some(a) if a.obj == obj && a.keyval == index))
    }

    fn attr_ref(&self, a: &Attr) -> AttrRef {
        let k = &self.keyvals[a.keyval as usize];
        AttrRef {
            keyval: KeyvalId {
                index: a.keyval,
                gen: k.gen,
            },
            cb: k.cb,
            value: a.value,
            seq: a.seq,
        }
    }

    /// The attribute set on `obj` under live keyval `kv` (`MPI_Comm_get_attr`).
    pub fn get(&self, obj: Object, kv: KeyvalId) -> Result<Option<usize>> {
        self.check_keyval(kv, obj.kind)?;
        Ok(self
            .position(obj, kv.index)
            .and_then(|i| self.attrs[i])
            .map(|a| a.value))
    }

    /// Whether [`AttrTable::set`] of `kv` on `obj` would find room (the error it would give).
    pub fn check_room(&self, obj: Object, kv: KeyvalId) -> Result<()> {
        if self.position(obj, kv.index).is_some() || self.attrs.iter().any(Option::is_none) {
            Ok(())
        } else {
            Err(self.full())
        }
    }

    fn full(&self) -> Error {
        Error::exhausted("attribute values", self.attrs.len() as u32, ATTR_MAX.name)
    }

    /// Sets (or replaces) the attribute of `kv` on `obj`. The caller has run the delete
    /// callback of a value it replaces.
    pub fn set(&mut self, obj: Object, kv: KeyvalId, value: usize) -> Result<()> {
        self.check_keyval(kv, obj.kind)?;
        self.store(obj, kv.index, value)
    }

    fn store(&mut self, obj: Object, index: u16, value: usize) -> Result<()> {
        self.seq += 1;
        let attr = Attr {
            obj,
            keyval: index,
            value,
            seq: self.seq,
        };
        let slot = match self.position(obj, index) {
            Some(i) => i,
            None => self
                .attrs
                .iter()
                .position(Option::is_none)
                .ok_or_else(|| self.full())?,
        };
        self.attrs[slot] = Some(attr);
        Ok(())
    }

    /// Caches a copy made by a copy callback: like [`AttrTable::set`], but the keyval may have
    /// been freed by the user meanwhile (its attributes are still copied).
    pub fn set_copy(&mut self, obj: Object, kv: KeyvalId, value: usize) -> Result<()> {
        match self.keyvals.get(kv.index as usize) {
            Some(k) if k.gen == kv.gen && k.state != KvState::Free && k.kind == obj.kind => {
                self.store(obj, kv.index, value)
            }
            _ => Err(bad_keyval("not a valid attribute keyval")),
        }
    }

    /// The attribute of `kv` on `obj` for deletion, if set (the keyval may be freed).
    pub fn find(&self, obj: Object, kv: KeyvalId) -> Option<AttrRef> {
        let a = self.attrs[self.position(obj, kv.index)?]?;
        let r = self.attr_ref(&a);
        (r.keyval == kv).then_some(r)
    }

    /// Removes the attribute of `kv` on `obj` (its delete callback has run); returns its value.
    pub fn remove(&mut self, obj: Object, kv: KeyvalId) -> Option<usize> {
        let i = self.position(obj, kv.index)?;
        let a = self.attrs[i].take()?;
        self.reclaim_keyval(kv.index);
        Some(a.value)
    }

    /// The earliest-set attribute of `obj` set after `after` (pass 0 to start), for copying.
    pub fn next_after(&self, obj: Object, after: u64) -> Option<AttrRef> {
        self.attrs
            .iter()
            .flatten()
            .filter(|a| a.obj == obj && a.seq > after)
            .min_by_key(|a| a.seq)
            .map(|a| self.attr_ref(a))
    }

    /// The latest-set attribute of `obj` set before `before` (pass `u64::MAX` to start), for
    /// deleting in reverse order.
    pub fn last_before(&self, obj: Object, before: u64) -> Option<AttrRef> {
        self.attrs
            .iter()
            .flatten()
            .filter(|a| a.obj == obj && a.seq < before)
            .max_by_key(|a| a.seq)
            .map(|a| self.attr_ref(a))
    }

    /// Attributes cached on `obj`.
    pub fn count(&self, obj: Object) -> usize {
        self.attrs.iter().flatten().filter(|a| a.obj == obj).count()
    }

    /// Forgets everything about `obj` (it was freed, or is new): attributes, without running
    /// callbacks, and its name.
    pub fn purge(&mut self, obj: Object) {
        for i in 0..self.attrs.len() {
            if let Some(a) = self.attrs[i] {
                if a.obj == obj {
                    self.attrs[i] = None;
                    self.reclaim_keyval(a.keyval);
                }
            }
        }
        for n in self.names.iter_mut() {
            if matches!(n, Some(n) if n.obj == obj) {
                *n = None;
            }
        }
    }

    // ---- names --------------------------------------------------------------------------------

    /// Names `obj` (`MPI_Comm_set_name`); a name longer than [`MAX_NAME`] bytes is cut.
    pub fn set_name(&mut self, obj: Object, name: &[u8]) -> Result<()> {
        let slot = match self
            .names
            .iter()
            .position(|n| matches!(n, Some(n) if n.obj == obj))
        {
            Some(i) => i,
            None => self
                .names
                .iter()
                .position(Option::is_none)
                .ok_or(Error::exhausted(
                    "object names",
                    self.names.len() as u32,
                    ATTR_MAX_NAMES.name,
                ))?,
        };
        let len = name.len().min(MAX_NAME);
        let mut bytes = [0u8; MAX_NAME];
        bytes[..len].copy_from_slice(&name[..len]);
        self.names[slot] = Some(Name {
            obj,
            len: len as u8,
            bytes,
        });
        Ok(())
    }

    /// The name given to `obj`, if any.
    pub fn name(&self, obj: Object) -> Option<&[u8]> {
        self.names
            .iter()
            .flatten()
            .find(|n| n.obj == obj)
            .map(|n| &n.bytes[..n.len as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::tests::leak;

    fn table(keyvals: usize, attrs: usize, names: usize) -> AttrTable {
        AttrTable::with_capacity(&mut Arena::new(leak(1 << 16)), keyvals, attrs, names).unwrap()
    }

    unsafe extern "C" fn del(_: c_int, _: c_int, _: *mut c_void, _: *mut c_void) -> c_int {
        0
    }

    const C1: Object = Object::comm(1);
    const C2: Object = Object::comm(2);

    #[test]
    fn set_get_replace_remove() {
        let mut t = table(4, 8, 2);
        let k = t.create_keyval(ObjKind::Comm, NO_CALLBACKS).unwrap();
        assert_eq!(t.get(C1, k).unwrap(), None);
        t.set(C1, k, 10).unwrap();
        t.set(C2, k, 20).unwrap();
        assert_eq!(t.get(C1, k).unwrap(), Some(10));
        t.set(C1, k, 11).unwrap();
        assert_eq!(t.get(C1, k).unwrap(), Some(11));
        assert_eq!(t.count(C1), 1);
        assert_eq!(t.remove(C1, k), Some(11));
        assert_eq!(t.get(C1, k).unwrap(), None);
        assert_eq!(t.get(C2, k).unwrap(), Some(20));
        // Wrong kind of object.
        let e = t.get(Object::datatype(1), k).unwrap_err();
        assert_eq!(e.class, ErrorClass::Keyval);
    }

    #[test]
    fn freed_keyvals_live_while_used_then_go_stale() {
        let mut t = table(1, 8, 2);
        let cb = Callbacks {
            copy: None,
            delete: Some(del),
            extra: 7,
        };
        let k = t.create_keyval(ObjKind::Type, cb).unwrap();
        let obj = Object::datatype(70);
        t.set(obj, k, 5).unwrap();
        t.free_keyval(k, ObjKind::Type).unwrap();
        assert_eq!(t.get(obj, k).unwrap_err().class, ErrorClass::Keyval);
        assert!(
            t.create_keyval(ObjKind::Type, cb).is_err(),
            "slot still used"
        );
        let r = t.find(obj, k).unwrap();
        assert_eq!((r.value, r.cb.extra), (5, 7));
        assert!(r.cb.delete.is_some());
        t.remove(obj, k);
        assert_eq!(t.keyvals_in_use(), 0);
        let k2 = t.create_keyval(ObjKind::Type, cb).unwrap();
        assert_eq!(k2.index, k.index);
        assert_ne!(k2.gen, k.gen);
        assert!(t.check_keyval(k, ObjKind::Type).is_err());
        assert!(t.free_keyval(k, ObjKind::Type).is_err());
    }

    #[test]
    fn order_of_setting_is_kept() {
        let mut t = table(4, 8, 2);
        let ks: [KeyvalId; 3] =
            core::array::from_fn(|_| t.create_keyval(ObjKind::Comm, NO_CALLBACKS).unwrap());
        t.set(C1, ks[2], 1).unwrap();
        t.set(C2, ks[0], 9).unwrap();
        t.set(C1, ks[0], 2).unwrap();
        t.set(C1, ks[1], 3).unwrap();
        let mut seen = [0usize; 3];
        let mut at = 0;
        for s in seen.iter_mut() {
            let r = t.next_after(C1, at).unwrap();
            *s = r.value;
            at = r.seq;
        }
        assert_eq!(seen, [1, 2, 3]);
        assert!(t.next_after(C1, at).is_none());
        let mut at = u64::MAX;
        for want in [3, 2, 1] {
            let r = t.last_before(C1, at).unwrap();
            assert_eq!(r.value, want);
            at = r.seq;
        }
        // Re-setting makes an attribute the latest.
        t.set(C1, ks[2], 4).unwrap();
        assert_eq!(t.last_before(C1, u64::MAX).unwrap().value, 4);
    }

    #[test]
    fn exhaustion_names_the_parameters() {
        let mut t = table(1, 1, 1);
        let k = t.create_keyval(ObjKind::Comm, NO_CALLBACKS).unwrap();
        let e = t.create_keyval(ObjKind::Comm, NO_CALLBACKS).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "attr_max_keyvals",
                ..
            }
        ));
        t.set(C1, k, 1).unwrap();
        t.check_room(C1, k).unwrap();
        assert!(t.check_room(C2, k).is_err());
        let e = t.set(C2, k, 1).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "attr_max",
                ..
            }
        ));
        t.set_name(C1, b"one").unwrap();
        let e = t.set_name(C2, b"two").unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "attr_max_names",
                ..
            }
        ));
    }

    #[test]
    fn names_and_purge() {
        let mut t = table(2, 4, 4);
        assert_eq!(t.name(C1), None);
        t.set_name(C1, b"row").unwrap();
        t.set_name(C1, b"column").unwrap();
        assert_eq!(t.name(C1), Some(&b"column"[..]));
        t.set_name(C2, &[b'x'; 200]).unwrap();
        assert_eq!(t.name(C2).unwrap().len(), MAX_NAME);
        let k = t.create_keyval(ObjKind::Comm, NO_CALLBACKS).unwrap();
        t.set(C1, k, 1).unwrap();
        t.free_keyval(k, ObjKind::Comm).unwrap();
        t.purge(C1);
        assert_eq!(t.name(C1), None);
        assert_eq!(t.count(C1), 0);
        assert_eq!(
            t.keyvals_in_use(),
            0,
            "the freed keyval went with its last attribute"
        );
        assert_eq!(t.name(C2).unwrap().len(), MAX_NAME);
    }
}
