//! User error handlers and user error classes, codes and strings.
//!
//! [`ErrhTable`] holds the error handlers the user creates (`MPI_Comm_create_errhandler`), with a
//! count of the user's handles to each (`MPI_Comm_get_errhandler` hands out one more,
//! `MPI_Errhandler_free` returns one). A communicator using a handler names its slot
//! ([`crate::comm::ErrHandler::User`]); a slot whose handles are all freed stays while any
//! communicator still uses it — the C layer asks the communicator table before letting it go — so
//! a freed handler keeps working where it is installed, as the standard requires.
//!
//! It also holds the error classes and codes added with `MPI_Add_error_class`/`_code` (numbered
//! from [`FIRST_USER_CODE`], above every predefined code) and their strings.
//!
//! Sizes: `errhandler_max` handlers, `err_max_user_codes` classes and codes, `err_string_bytes`
//! bytes of strings.

use core::ffi::c_int;

use crate::arena::{Arena, Sizer};
use crate::error::{Error, Result};
use crate::info::Strings;
use crate::params::{Default, Kind, ParamDef, Params};

/// `errhandler_max`.
pub static ERRHANDLER_MAX: ParamDef = ParamDef {
    name: "errhandler_max",
    kind: Kind::Int {
        min: 1,
        max: 1 << 16,
    },
    default: Default::Int(32),
    description: "Most user-defined error handlers alive at once (fixed at init: this table does not grow yet)",
};

/// `err_max_user_codes`.
pub static ERR_MAX_USER_CODES: ParamDef = ParamDef {
    name: "err_max_user_codes",
    kind: Kind::Int {
        min: 1,
        max: 1 << 20,
    },
    default: Default::Int(64),
    description: "Most error classes and codes added with MPI_Add_error_class/MPI_Add_error_code (fixed at init: this table does not grow yet)",
};

/// `err_string_bytes`.
pub static ERR_STRING_BYTES: ParamDef = ParamDef {
    name: "err_string_bytes",
    kind: Kind::Int {
        min: 512,
        max: 1 << 24,
    },
    default: Default::Int(8192),
    description: "Bytes for the strings given to added error codes (MPI_Add_error_string) (fixed at init: this store does not grow yet)",
};

/// Parameters of this module.
pub static PARAMS: [&ParamDef; 3] = [&ERRHANDLER_MAX, &ERR_MAX_USER_CODES, &ERR_STRING_BYTES];

/// The first error class or code a program adds (`MPI_ERR_LASTCODE + 1`).
pub const FIRST_USER_CODE: i32 = 0x4000_0000;

/// Longest error string, without its NUL (`MPI_MAX_ERROR_STRING` - 1); longer ones are cut.
pub const MAX_ERROR_STRING: usize = 511;

/// A communicator error handler: C's `void fn(MPI_Comm *comm, int *error_code, ...)`.
pub type CommErrhandlerFn = unsafe extern "C" fn(*mut c_int, *mut c_int, ...);

/// The objects an error handler is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerKind {
    /// `MPI_Comm_create_errhandler` (and the deprecated `MPI_Errhandler_create`).
    Comm,
    /// `MPI_Win_create_errhandler`.
    Win,
    /// `MPI_File_create_errhandler`.
    File,
    /// `MPI_Session_create_errhandler`.
    Session,
}

/// Generations of a handler slot (a handle has room for 10 bits).
pub const HANDLER_GENS: u16 = 1024;

/// A user error handler: its slot and the slot's generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrhId {
    /// Slot (what a communicator using it stores).
    pub index: u16,
    /// Generation, so a freed handle is recognised.
    pub gen: u16,
}

#[derive(Clone, Copy)]
struct Slot {
    func: Option<CommErrhandlerFn>,
    kind: HandlerKind,
    /// The user's handles to it.
    refs: u32,
    gen: u16,
}

#[derive(Clone, Copy, Default)]
struct UserCode {
    class: i32,
    text_off: u32,
    text_len: u16,
}

/// User error handlers and error codes.
pub struct ErrhTable {
    slots: &'static mut [Slot],
    codes: &'static mut [UserCode],
    ncodes: usize,
    strings: Strings,
}

fn bad_handler() -> Error {
    Error::bad_arg("not a valid error handler (freed?)")
}

impl ErrhTable {
    /// Arena bytes for the capacities in `params`.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        sizer
            .slice::<Slot>(params.u32(&ERRHANDLER_MAX) as usize)
            .slice::<UserCode>(params.u32(&ERR_MAX_USER_CODES) as usize);
        Strings::size(sizer, params.u32(&ERR_STRING_BYTES) as usize);
    }

    /// An empty table.
    pub fn new(params: &Params, arena: &mut Arena) -> Result<ErrhTable> {
        ErrhTable::with_capacity(
            arena,
            params.u32(&ERRHANDLER_MAX) as usize,
            params.u32(&ERR_MAX_USER_CODES) as usize,
            params.u32(&ERR_STRING_BYTES) as usize,
        )
    }

    /// An empty table of explicit capacities.
    pub fn with_capacity(
        arena: &mut Arena,
        handlers: usize,
        codes: usize,
        bytes: usize,
    ) -> Result<ErrhTable> {
        Ok(ErrhTable {
            slots: arena.slice(handlers.min(1 << 16), |_| Slot {
                func: None,
                kind: HandlerKind::Comm,
                refs: 0,
                gen: 0,
            })?,
            codes: arena.slice(codes, |_| UserCode::default())?,
            ncodes: 0,
            strings: Strings::new(arena, bytes)?,
        })
    }

    // ---- handlers -----------------------------------------------------------------------------

    /// A new handler calling `func`, with one user handle. When the table is full, slots whose
    /// handles are all freed and that `in_use` says no communicator uses are reclaimed first.
    pub fn create(
        &mut self,
        kind: HandlerKind,
        func: CommErrhandlerFn,
        in_use: impl Fn(u16) -> bool,
    ) -> Result<ErrhId> {
        let free = |s: &Slot| s.func.is_none();
        if !self.slots.iter().any(free) {
            self.sweep(in_use);
        }
        let i = self.slots.iter().position(free).ok_or(Error::exhausted(
            "user error handlers",
            self.slots.len() as u32,
            ERRHANDLER_MAX.name,
        ))?;
        let s = &mut self.slots[i];
        s.func = Some(func);
        s.kind = kind;
        s.refs = 1;
        Ok(ErrhId {
            index: i as u16,
            gen: s.gen,
        })
    }

    /// Reclaims every slot with no user handle that no communicator uses.
    pub fn sweep(&mut self, in_use: impl Fn(u16) -> bool) {
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if s.func.is_some() && s.refs == 0 && !in_use(i as u16) {
                self.clear(i);
            }
        }
    }

    fn clear(&mut self, i: usize) {
        let s = &mut self.slots[i];
        s.func = None;
        s.gen = (s.gen + 1) % HANDLER_GENS;
    }

    /// Checks that `id` is a handle the user still holds, of `kind`.
    pub fn check(&self, id: ErrhId, kind: HandlerKind) -> Result<()> {
        match self.slots.get(id.index as usize) {
            Some(s) if s.gen == id.gen && s.func.is_some() && s.refs > 0 && s.kind == kind => {
                Ok(())
            }
            _ => Err(bad_handler()),
        }
    }

    /// The kind of objects the live handler in slot `index` was made for.
    pub fn kind_of(&self, index: u16) -> Option<HandlerKind> {
        self.slots
            .get(index as usize)
            .filter(|s| s.func.is_some())
            .map(|s| s.kind)
    }

    /// The function of slot `index` (a communicator's handler, even if the user freed its handle).
    pub fn func(&self, index: u16) -> Option<CommErrhandlerFn> {
        self.slots.get(index as usize).and_then(|s| s.func)
    }

    /// The handle of slot `index`, counting one more user handle (`MPI_Comm_get_errhandler`).
    pub fn retain(&mut self, index: u16) -> Result<ErrhId> {
        let s = self
            .slots
            .get_mut(index as usize)
            .filter(|s| s.func.is_some())
            .ok_or_else(bad_handler)?;
        s.refs += 1;
        Ok(ErrhId { index, gen: s.gen })
    }

    /// Returns one user handle (`MPI_Errhandler_free`); the slot goes when no handle is left and
    /// `in_use` says no communicator uses it.
    pub fn release(
        &mut self,
        id: ErrhId,
        kind: HandlerKind,
        in_use: impl Fn(u16) -> bool,
    ) -> Result<()> {
        self.check(id, kind)?;
        let s = &mut self.slots[id.index as usize];
        s.refs -= 1;
        if s.refs == 0 && !in_use(id.index) {
            self.clear(id.index as usize);
        }
        Ok(())
    }

    /// Handlers alive (held by the user or installed).
    pub fn handlers(&self) -> usize {
        self.slots.iter().filter(|s| s.func.is_some()).count()
    }

    // ---- error classes and codes --------------------------------------------------------------

    fn add(&mut self, class: Option<i32>) -> Result<i32> {
        if self.ncodes == self.codes.len() {
            return Err(Error::exhausted(
                "added error classes and codes",
                self.codes.len() as u32,
                ERR_MAX_USER_CODES.name,
            ));
        }
        let code = FIRST_USER_CODE + self.ncodes as i32;
        self.codes[self.ncodes] = UserCode {
            class: class.unwrap_or(code),
            text_off: 0,
            text_len: 0,
        };
        self.ncodes += 1;
        Ok(code)
    }

    fn user(&self, code: i32) -> Option<&UserCode> {
        let i = usize::try_from(code.checked_sub(FIRST_USER_CODE)?).ok()?;
        self.codes[..self.ncodes].get(i)
    }

    /// A new error class (`MPI_Add_error_class`).
    pub fn add_class(&mut self) -> Result<i32> {
        self.add(None)
    }

    /// A new error code of `class` (`MPI_Add_error_code`): an added class, or a predefined one
    /// (below [`FIRST_USER_CODE`]; the caller checks it is a class).
    pub fn add_code(&mut self, class: i32) -> Result<i32> {
        if class >= FIRST_USER_CODE && !self.is_class(class) {
            return Err(Error::bad_arg("not an error class"));
        }
        self.add(Some(class))
    }

    /// Whether `code` is an added error class.
    pub fn is_class(&self, code: i32) -> bool {
        self.user(code).is_some_and(|u| u.class == code)
    }

    /// The class of an added code or class.
    pub fn class_of(&self, code: i32) -> Option<i32> {
        self.user(code).map(|u| u.class)
    }

    /// The largest code in use (`MPI_LASTUSEDCODE`), given the largest predefined one.
    pub fn last_used(&self, last_predefined: i32) -> i32 {
        match self.ncodes {
            0 => last_predefined,
            n => FIRST_USER_CODE + n as i32 - 1,
        }
    }

    /// Sets the string of an added code or class (`MPI_Add_error_string`), replacing an earlier
    /// one; cut at [`MAX_ERROR_STRING`] bytes.
    pub fn set_string(&mut self, code: i32, text: &[u8]) -> Result<()> {
        if self.user(code).is_none() {
            return Err(Error::bad_arg(
                "not an error code or class added with MPI_Add_error_class/_code",
            ));
        }
        let i = (code - FIRST_USER_CODE) as usize;
        let text = &text[..text.len().min(MAX_ERROR_STRING)];
        let old = self.codes[i];
        if text.len() > self.strings.free() + old.text_len as usize {
            return Err(Error::exhausted(
                "error string bytes",
                self.strings.capacity() as u32,
                ERR_STRING_BYTES.name,
            ));
        }
        if old.text_len > 0 {
            self.strings.remove(old.text_off, old.text_len as usize);
            for u in self.codes[..self.ncodes].iter_mut() {
                u.text_off = Strings::moved(u.text_off, old.text_off, old.text_len as usize);
            }
        }
        let Some(off) = self.strings.push(text) else {
            return Err(Error::internal(
                "error string bytes ran out after their room was checked",
            ));
        };
        let u = &mut self.codes[i];
        u.text_off = off;
        u.text_len = text.len() as u16;
        Ok(())
    }

    /// The string of an added code or class (empty if none was set).
    pub fn string(&self, code: i32) -> Option<&[u8]> {
        self.user(code)
            .map(|u| self.strings.get(u.text_off, u.text_len as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::tests::leak;
    use crate::error::Reason;

    unsafe extern "C" fn plain(_: *mut c_int, _: *mut c_int) {}

    // Rust cannot define a C-variadic function; the table never calls it here.
    // SAFETY: only stored and compared, never called.
    const HANDLER: CommErrhandlerFn = unsafe {
        core::mem::transmute::<unsafe extern "C" fn(*mut c_int, *mut c_int), CommErrhandlerFn>(
            plain,
        )
    };

    fn table(handlers: usize, codes: usize, bytes: usize) -> ErrhTable {
        ErrhTable::with_capacity(&mut Arena::new(leak(1 << 16)), handlers, codes, bytes).unwrap()
    }

    #[test]
    fn handles_are_counted_and_installed_handlers_outlive_them() {
        let mut t = table(2, 1, 512);
        let h = t.create(HandlerKind::Comm, HANDLER, |_| false).unwrap();
        let h2 = t.retain(h.index).unwrap();
        assert_eq!(h, h2);
        t.release(h, HandlerKind::Comm, |_| true).unwrap();
        t.check(h, HandlerKind::Comm).unwrap();
        // The last handle goes while a communicator uses it: the function stays.
        t.release(h, HandlerKind::Comm, |_| true).unwrap();
        assert!(t.check(h, HandlerKind::Comm).is_err());
        assert!(t.func(h.index).is_some());
        assert!(t.release(h, HandlerKind::Comm, |_| false).is_err());
        let b = t.create(HandlerKind::Comm, HANDLER, |_| true).unwrap();
        // Full: nothing can be reclaimed while the communicator uses slot `h`.
        assert!(t.create(HandlerKind::Comm, HANDLER, |_| true).is_err());
        // Once it does not, the slot is swept and reused under a new generation.
        let c = t.create(HandlerKind::Comm, HANDLER, |_| false).unwrap();
        assert_eq!(c.index, h.index);
        assert_ne!(c.gen, h.gen);
        t.release(b, HandlerKind::Comm, |_| false).unwrap();
        assert_eq!(t.handlers(), 1);
        let e = t.create(HandlerKind::Comm, HANDLER, |_| true);
        assert!(e.is_ok());
        let e = t.create(HandlerKind::Comm, HANDLER, |_| true).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "errhandler_max",
                ..
            }
        ));
    }

    #[test]
    fn classes_codes_and_strings() {
        let mut t = table(1, 4, 1024);
        assert_eq!(t.last_used(0x3fff_ffff), 0x3fff_ffff);
        let c = t.add_class().unwrap();
        assert_eq!(c, FIRST_USER_CODE);
        let k = t.add_code(c).unwrap();
        let o = t.add_code(15).unwrap();
        assert_eq!(
            (t.class_of(k), t.class_of(o), t.class_of(c)),
            (Some(c), Some(15), Some(c))
        );
        assert!(t.is_class(c) && !t.is_class(k));
        assert!(t.add_code(k).is_err(), "a code is not a class");
        assert_eq!(t.last_used(0x3fff_ffff), o);
        assert_eq!(t.string(k), Some(&b""[..]));
        t.set_string(c, b"class").unwrap();
        t.set_string(k, b"code text").unwrap();
        t.set_string(c, b"the class").unwrap();
        assert_eq!(t.string(c), Some(&b"the class"[..]));
        assert_eq!(t.string(k), Some(&b"code text"[..]));
        assert!(t.set_string(15, b"x").is_err());
        assert_eq!(t.string(15), None);
        t.set_string(o, &[b'x'; 600]).unwrap();
        assert_eq!(t.string(o).unwrap().len(), MAX_ERROR_STRING);
        t.add_code(c).unwrap();
        let e = t.add_class().unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "err_max_user_codes",
                ..
            }
        ));
    }
}
