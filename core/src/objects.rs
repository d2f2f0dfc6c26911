//! The MPI layer's bookkeeping objects that hold only user state: info objects ([`crate::info`]),
//! attributes, keyvals and names ([`crate::attr`]), user error handlers and error codes
//! ([`crate::errhandler`]). The engine carves them at init like every other table, so their
//! capacities are parameters.

use crate::arena::{Arena, Sizer};
use crate::attr::{self, AttrTable};
use crate::errhandler::{self, ErrhTable};
use crate::error::Result;
use crate::info::{self, InfoTable};
use crate::params::{ParamDef, Params};

/// Parameters of the three tables.
pub static PARAMS: [&ParamDef; 9] = [
    &info::INFO_MAX,
    &info::INFO_MAX_ENTRIES,
    &info::INFO_BYTES,
    &attr::ATTR_MAX_KEYVALS,
    &attr::ATTR_MAX,
    &attr::ATTR_MAX_NAMES,
    &errhandler::ERRHANDLER_MAX,
    &errhandler::ERR_MAX_USER_CODES,
    &errhandler::ERR_STRING_BYTES,
];

/// Info objects, attributes and names, user error handlers and codes.
pub struct Objects {
    /// Info objects.
    pub infos: InfoTable,
    /// Keyvals, attributes, names.
    pub attrs: AttrTable,
    /// User error handlers and error codes.
    pub errh: ErrhTable,
}

impl Objects {
    /// Arena bytes for the capacities in `params`.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        InfoTable::size(params, sizer);
        AttrTable::size(params, sizer);
        ErrhTable::size(params, sizer);
    }

    /// Empty tables (`MPI_INFO_ENV` is filled by the C layer at init).
    pub fn new(params: &Params, arena: &mut Arena) -> Result<Objects> {
        Ok(Objects {
            infos: InfoTable::new(params, arena)?,
            attrs: AttrTable::new(params, arena)?,
            errh: ErrhTable::new(params, arena)?,
        })
    }
}
