//! stormpi-fortran-gen: writes the Fortran binding from the C header.
//!
//! One description of the API, `core/include/mpi.h` (MPICH's prototypes and constants), gives:
//!
//! * `fortran/src/bindings.rs`: for every MPI function of MPICH's Fortran binding, the link names
//!   `libmpichfort.so.12` exports (`mpi_send_`, `mpi_send__`, `mpi_send`, `MPI_SEND` and the
//!   `pmpi_` forms), each converting the Fortran call (every argument by reference, hidden
//!   string lengths last) into a call of the C function;
//! * `fortran/include/mpif.h`: the constants (MPICH's values), the sentinels' common blocks and the
//!   functions' types, in source that reads as fixed and as free form;
//! * `fortran/include/mpi.f90`: the `mpi` module, the same constants and explicit interfaces
//!   (choice buffers with gfortran's `NO_ARG_CHECK`).
//!
//! How each C parameter is handed over is decided from its C type and name ([`classify`]); the
//! few functions whose Fortran form differs from the C one otherwise (`MPI_INIT`, `MPI_WTIME`,
//! attributes by value) are listed in [`SPECIALS`] and written by hand in `src/special.rs`;
//! those this binding leaves out are listed in [`LEFT_OUT`] or fall out of [`classify`], and
//! report `MPI_ERR_UNSUPPORTED_OPERATION` naming themselves.
//!
//! `stormpi-fortran-gen` writes the three files; `stormpi-fortran-gen --check` fails when they
//! differ from what it would write (the crate's tests run it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod f08;

/// One C prototype of `mpi.h` (the `MPI_` one; `PMPI_` twins have the same parameters).
#[derive(Debug, Clone)]
struct Proto {
    /// Return type: `int`, `double` or `MPI_Aint`.
    ret: String,
    /// Name without its `MPI_` prefix: `Comm_split`.
    name: String,
    params: Vec<Param>,
}

#[derive(Debug, Clone)]
struct Param {
    /// The type without `const` and `*`: `int`, `MPI_Comm`, `void`, `char`.
    base: String,
    /// Pointer depth, `[]` counted as one.
    ptr: usize,
    /// Whether declared as an array (`x[]`).
    array: bool,
    /// `x[][3]`.
    triples: bool,
    is_const: bool,
    name: String,
}

/// The Fortran type of an argument, for interfaces.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FTy {
    Integer,
    Logical,
    Aint,
    Offset,
    Count,
    Char,
    Choice,
    External,
}

/// The Fortran shape of an argument.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Dim {
    Scalar,
    /// `x(*)`
    Star,
    /// `x(3,*)`
    Triples,
    /// `x(MPI_STATUS_SIZE)`
    Status,
    /// `x(MPI_STATUS_SIZE,*)`
    Statuses,
    /// `x(count,*)` (`MPI_COMM_SPAWN_MULTIPLE`'s arguments of each command)
    ByCount,
}

/// How one argument is handed from Fortran to C.
#[derive(Debug, Clone, PartialEq)]
enum Conv {
    /// A C value parameter: the Fortran reference is read.
    Value,
    /// A C logical value parameter: read as `LOGICAL`.
    LogicalValue,
    /// A pointer the C function takes as it is (handles, integers and addresses have the same
    /// representation in both languages).
    Pass,
    /// An output `LOGICAL` (C writes an int).
    LogicalOut,
    /// A choice buffer: `MPI_BOTTOM` and `MPI_IN_PLACE` are addresses of common-block variables.
    Buffer,
    /// `MPI_STATUS_IGNORE`.
    Status,
    /// `MPI_STATUSES_IGNORE`.
    Statuses,
    /// `MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY`.
    Weights,
    /// `MPI_ERRCODES_IGNORE`.
    Errcodes,
    /// An index C counts from 0 and Fortran from 1 (`MPI_WAITANY`).
    Index,
    /// Indices C counts from 0 and Fortran from 1, as many as the `outcount` argument says.
    Indices,
    /// A blank-padded string in, copied to a NUL-terminated one.
    StrIn,
    /// A string out: C writes a NUL-terminated one of at most this many bytes, copied back
    /// blank-padded.
    StrOut(usize),
    /// A procedure the C library calls with the same arguments Fortran would pass.
    Procedure,
    /// An `MPI_File` in: Fortran's `INTEGER` turned into C's pointer (`MPI_File_f2c`).
    FileValue,
    /// An `MPI_File` C reads and writes (`MPI_FILE_OPEN`, `MPI_FILE_CLOSE`): converted in, and
    /// the C handle converted back out (`MPI_File_c2f`).
    FileRef,
}

#[derive(Debug, Clone)]
struct Arg {
    name: String,
    fty: FTy,
    dim: Dim,
    conv: Conv,
    /// The C parameter's type without `const` and `*` (empty for hand-written procedures).
    cbase: String,
}

/// What a Fortran procedure returns.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ret {
    /// A subroutine with `IERROR` last.
    Ierror,
    /// A subroutine without `IERROR` (`MPI_PCONTROL`).
    Nothing,
    /// A `DOUBLE PRECISION` function.
    Double,
    /// An `INTEGER(KIND=MPI_ADDRESS_KIND)` function.
    Aint,
}

#[derive(Debug, Clone)]
enum Body {
    /// Converted from the arguments' classification.
    Generic,
    /// Written by hand: `special::<name>`.
    Special,
    /// Reports `MPI_ERR_UNSUPPORTED_OPERATION` naming this.
    Unsupported(String),
}

#[derive(Debug, Clone)]
struct FFunc {
    /// C name without prefix (`Comm_split`), or the Fortran-only name (`DUP_FN`).
    name: String,
    args: Vec<Arg>,
    ret: Ret,
    body: Body,
}

impl FFunc {
    fn lower(&self) -> String {
        self.name.to_lowercase()
    }
}

/// A Fortran argument of a hand-written procedure: name, type, shape.
type FArg = (&'static str, FTy, Dim);

/// Functions whose Fortran form is written by hand (`src/special.rs`): name, arguments
/// (`IERROR` and hidden lengths not listed), what they return.
const SPECIALS: &[(&str, &[FArg], Ret)] = &[
    ("Init", &[], Ret::Ierror),
    (
        "Init_thread",
        &[
            ("required", FTy::Integer, Dim::Scalar),
            ("provided", FTy::Integer, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    ("Wtime", &[], Ret::Double),
    ("Wtick", &[], Ret::Double),
    (
        "Aint_add",
        &[
            ("base", FTy::Aint, Dim::Scalar),
            ("disp", FTy::Aint, Dim::Scalar),
        ],
        Ret::Aint,
    ),
    (
        "Aint_diff",
        &[
            ("addr1", FTy::Aint, Dim::Scalar),
            ("addr2", FTy::Aint, Dim::Scalar),
        ],
        Ret::Aint,
    ),
    (
        "Pcontrol",
        &[("level", FTy::Integer, Dim::Scalar)],
        Ret::Nothing,
    ),
    ("Comm_set_attr", SET_ATTR, Ret::Ierror),
    ("Type_set_attr", SET_ATTR, Ret::Ierror),
    ("Win_set_attr", SET_ATTR, Ret::Ierror),
    ("Comm_get_attr", GET_ATTR, Ret::Ierror),
    ("Type_get_attr", GET_ATTR, Ret::Ierror),
    ("Win_get_attr", GET_ATTR, Ret::Ierror),
    (
        "Attr_put",
        &[
            ("comm", FTy::Integer, Dim::Scalar),
            ("keyval", FTy::Integer, Dim::Scalar),
            ("attribute_val", FTy::Integer, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    (
        "Attr_get",
        &[
            ("comm", FTy::Integer, Dim::Scalar),
            ("keyval", FTy::Integer, Dim::Scalar),
            ("attribute_val", FTy::Integer, Dim::Scalar),
            ("flag", FTy::Logical, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    ("Comm_create_keyval", CREATE_KEYVAL, Ret::Ierror),
    ("Type_create_keyval", CREATE_KEYVAL, Ret::Ierror),
    ("Win_create_keyval", CREATE_KEYVAL, Ret::Ierror),
    (
        "Keyval_create",
        &[
            ("copy_fn", FTy::External, Dim::Scalar),
            ("delete_fn", FTy::External, Dim::Scalar),
            ("keyval", FTy::Integer, Dim::Scalar),
            ("extra_state", FTy::Integer, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    (
        "Info_create_env",
        &[("info", FTy::Integer, Dim::Scalar)],
        Ret::Ierror,
    ),
    (
        "Grequest_start",
        &[
            ("query_fn", FTy::External, Dim::Scalar),
            ("free_fn", FTy::External, Dim::Scalar),
            ("cancel_fn", FTy::External, Dim::Scalar),
            ("extra_state", FTy::Aint, Dim::Scalar),
            ("request", FTy::Integer, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    (
        "Register_datarep",
        &[
            ("datarep", FTy::Char, Dim::Scalar),
            ("read_conversion_fn", FTy::External, Dim::Scalar),
            ("write_conversion_fn", FTy::External, Dim::Scalar),
            ("dtype_file_extent_fn", FTy::External, Dim::Scalar),
            ("extra_state", FTy::Aint, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    (
        "Buffer_detach",
        &[
            ("buffer_addr", FTy::Choice, Dim::Star),
            ("size", FTy::Integer, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    (
        "Info_get_string",
        &[
            ("info", FTy::Integer, Dim::Scalar),
            ("key", FTy::Char, Dim::Scalar),
            ("buflen", FTy::Integer, Dim::Scalar),
            ("value", FTy::Char, Dim::Scalar),
            ("flag", FTy::Logical, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    (
        "Session_get_nth_pset",
        &[
            ("session", FTy::Integer, Dim::Scalar),
            ("info", FTy::Integer, Dim::Scalar),
            ("n", FTy::Integer, Dim::Scalar),
            ("pset_len", FTy::Integer, Dim::Scalar),
            ("pset_name", FTy::Char, Dim::Scalar),
        ],
        Ret::Ierror,
    ),
    (
        "Comm_spawn",
        &[
            ("command", FTy::Char, Dim::Scalar),
            ("argv", FTy::Char, Dim::Star),
            ("maxprocs", FTy::Integer, Dim::Scalar),
            ("info", FTy::Integer, Dim::Scalar),
            ("root", FTy::Integer, Dim::Scalar),
            ("comm", FTy::Integer, Dim::Scalar),
            ("intercomm", FTy::Integer, Dim::Scalar),
            ("array_of_errcodes", FTy::Integer, Dim::Star),
        ],
        Ret::Ierror,
    ),
    (
        "Comm_spawn_multiple",
        &[
            ("count", FTy::Integer, Dim::Scalar),
            ("array_of_commands", FTy::Char, Dim::Star),
            ("array_of_argv", FTy::Char, Dim::ByCount),
            ("array_of_maxprocs", FTy::Integer, Dim::Star),
            ("array_of_info", FTy::Integer, Dim::Star),
            ("root", FTy::Integer, Dim::Scalar),
            ("comm", FTy::Integer, Dim::Scalar),
            ("intercomm", FTy::Integer, Dim::Scalar),
            ("array_of_errcodes", FTy::Integer, Dim::Star),
        ],
        Ret::Ierror,
    ),
];

const SET_ATTR: &[FArg] = &[
    ("obj", FTy::Integer, Dim::Scalar),
    ("keyval", FTy::Integer, Dim::Scalar),
    ("attribute_val", FTy::Aint, Dim::Scalar),
];
const GET_ATTR: &[FArg] = &[
    ("obj", FTy::Integer, Dim::Scalar),
    ("keyval", FTy::Integer, Dim::Scalar),
    ("attribute_val", FTy::Aint, Dim::Scalar),
    ("flag", FTy::Logical, Dim::Scalar),
];
const CREATE_KEYVAL: &[FArg] = &[
    ("copy_fn", FTy::External, Dim::Scalar),
    ("delete_fn", FTy::External, Dim::Scalar),
    ("keyval", FTy::Integer, Dim::Scalar),
    ("extra_state", FTy::Aint, Dim::Scalar),
];

/// Functions of MPICH's Fortran binding this one leaves out, and why (README lists them).
const LEFT_OUT: &[(&str, &str)] = &[
    // MPI-1 forms removed in MPI-3: their Fortran addresses are default INTEGERs.
    ("Address", "removed in MPI-3; use MPI_GET_ADDRESS"),
    ("Type_extent", "removed in MPI-3; use MPI_TYPE_GET_EXTENT"),
    ("Type_lb", "removed in MPI-3; use MPI_TYPE_GET_EXTENT"),
    ("Type_ub", "removed in MPI-3; use MPI_TYPE_GET_EXTENT"),
    (
        "Type_hvector",
        "removed in MPI-3; use MPI_TYPE_CREATE_HVECTOR",
    ),
    (
        "Type_hindexed",
        "removed in MPI-3; use MPI_TYPE_CREATE_HINDEXED",
    ),
    (
        "Type_struct",
        "removed in MPI-3; use MPI_TYPE_CREATE_STRUCT",
    ),
];

/// C functions with no Fortran twin: handle and status conversions, large-count `_c` forms
/// (only `mpi_f08` has them), the tools interface.
fn c_only(name: &str) -> bool {
    // MPI_DUP_FN and its kin: C callbacks declared as functions.
    name == name.to_uppercase()
        || name.ends_with("_c")
        || name.ends_with("_c2f")
        || name.ends_with("_f2c")
        || name.starts_with("T_")
        || name.starts_with("Status_c2f")
        || name.starts_with("Status_f2")
        || name.starts_with("Status_f08")
}

/// Fortran-only procedures of MPICH's binding: the predefined attribute callbacks,
/// `MPI_CONVERSION_FN_NULL` and `MPI_F_SYNC_REG` (see `src/special.rs`).
const FORTRAN_ONLY: &[&str] = &[
    "COMM_DUP_FN",
    "COMM_NULL_COPY_FN",
    "COMM_NULL_DELETE_FN",
    "CONVERSION_FN_NULL",
    "DUP_FN",
    "F_SYNC_REG",
    "NULL_COPY_FN",
    "NULL_DELETE_FN",
    "TYPE_DUP_FN",
    "TYPE_NULL_COPY_FN",
    "TYPE_NULL_DELETE_FN",
    "WIN_DUP_FN",
    "WIN_NULL_COPY_FN",
    "WIN_NULL_DELETE_FN",
];

/// Names whose C `int` is a Fortran `LOGICAL`.
const LOGICAL_NAMES: &[&str] = &[
    "flag",
    "reorder",
    "periods",
    "remain_dims",
    "commute",
    "high",
    "weighted",
];

/// Handle and integer types: an `INTEGER` in Fortran, an `int` in C.
const INT_TYPES: &[&str] = &[
    "int",
    "MPI_Comm",
    "MPI_Datatype",
    "MPI_Group",
    "MPI_Op",
    "MPI_Errhandler",
    "MPI_Info",
    "MPI_Request",
    "MPI_Message",
    "MPI_Win",
    "MPI_Session",
    "MPI_Fint",
];

/// Procedure types the C library calls with exactly the arguments a Fortran procedure of the
/// binding takes (every one a pointer): user reductions and error handlers.
const PROCEDURE_TYPES: &[&str] = &[
    "MPI_User_function",
    "MPI_Comm_errhandler_function",
    "MPI_Win_errhandler_function",
    "MPI_File_errhandler_function",
    "MPI_Session_errhandler_function",
    "MPI_Handler_function",
];

fn parse_param(text: &str) -> Param {
    let mut t = text.trim().to_string();
    let mut array = false;
    let mut triples = false;
    let mut ptr = 0;
    while t.ends_with(']') {
        let open = t.rfind('[').unwrap_or(0);
        if t[open..].contains('3') {
            triples = true;
        } else {
            array = true;
            ptr += 1;
        }
        t.truncate(open);
        t = t.trim_end().to_string();
    }
    let name_start = t
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let name = t[name_start..].to_string();
    let ty = &t[..name_start];
    ptr += ty.matches('*').count();
    let words: Vec<&str> = ty
        .split(|c: char| c == '*' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let is_const = words.contains(&"const");
    let base = words
        .iter()
        .filter(|w| **w != "const")
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    Param {
        base,
        ptr,
        array,
        triples,
        is_const,
        name,
    }
}

/// The prototypes and the `#define NAME value` lines of `mpi.h`.
fn parse_header(text: &str) -> (Vec<Proto>, Vec<(String, String)>) {
    let mut protos = Vec::new();
    let mut defines = Vec::new();
    let mut lines = text.lines();
    // Conditional sections: (a branch was taken, this branch is active), innermost last.
    let mut conds: Vec<(bool, bool)> = Vec::new();
    while let Some(line) = lines.next() {
        let l = line.trim_start();
        if let Some(rest) = l.strip_prefix("#") {
            let rest = rest.trim_start();
            let word = rest.split_whitespace().next().unwrap_or("");
            match word {
                "if" | "ifdef" | "ifndef" => {
                    let c = condition(rest);
                    conds.push((c, c));
                    continue;
                }
                "elif" => {
                    if let Some(top) = conds.last_mut() {
                        let c = !top.0 && condition(rest);
                        *top = (top.0 || c, c);
                    }
                    continue;
                }
                "else" => {
                    if let Some(top) = conds.last_mut() {
                        *top = (true, !top.0);
                    }
                    continue;
                }
                "endif" => {
                    conds.pop();
                    continue;
                }
                _ => {}
            }
            if !conds.iter().all(|c| c.1) {
                continue;
            }
            if let Some(def) = rest.strip_prefix("define ") {
                let def = strip_comment(def).trim();
                let end = def.find(|c: char| c.is_whitespace()).unwrap_or(def.len());
                let (name, value) = def.split_at(end);
                if !name.contains('(') {
                    defines.push((name.to_string(), value.trim().to_string()));
                }
            }
            continue;
        }
        let Some((ret, rest)) = ["int MPI_", "double MPI_", "MPI_Aint MPI_"]
            .iter()
            .find_map(|p| {
                line.strip_prefix(p)
                    .map(|r| (p.split(' ').next().unwrap_or(""), r))
            })
        else {
            continue;
        };
        let mut decl = rest.to_string();
        while !decl.contains(");") {
            match lines.next() {
                Some(more) => {
                    decl.push(' ');
                    decl.push_str(more.trim());
                }
                None => break,
            }
        }
        let Some(open) = decl.find('(') else { continue };
        let Some(close) = decl.rfind(')') else {
            continue;
        };
        let name = decl[..open].to_string();
        let inner = decl[open + 1..close].trim();
        let params = if inner == "void" || inner.is_empty() {
            Vec::new()
        } else {
            inner.split(',').map(parse_param).collect()
        };
        protos.push(Proto {
            ret: ret.to_string(),
            name,
            params,
        });
    }
    (protos, defines)
}

/// Whether a preprocessor condition of `mpi.h` holds for the target the Fortran headers are
/// written for: x86_64 Linux with gfortran (LP64, 16-byte `long double`, 4-byte `wchar_t`).
fn condition(directive: &str) -> bool {
    let d = strip_comment(directive);
    if d.starts_with("ifndef") {
        return true; // the include guard
    }
    if d.contains("__cplusplus")
        || d.contains("__SIZEOF_WCHAR_T__")
        || d.contains("ILP32")
        || d.contains("__i386__")
    {
        return false;
    }
    if d.contains("STORMPI_SIZEOF_LONG_DOUBLE") {
        return d.contains("== 16");
    }
    d.contains("LP64") || d.contains("__SIZEOF_LONG_DOUBLE__")
}

fn strip_comment(s: &str) -> &str {
    let s = s.split("/*").next().unwrap_or(s);
    s.split("//").next().unwrap_or(s)
}

fn wide(base: &str) -> Option<FTy> {
    match base {
        "MPI_Aint" => Some(FTy::Aint),
        "MPI_Offset" => Some(FTy::Offset),
        "MPI_Count" => Some(FTy::Count),
        _ => None,
    }
}

/// The Fortran argument for C parameter `p` of function `f`, or why there is none.
fn classify(f: &str, p: &Param) -> Result<Arg, String> {
    let name = p.name.clone();
    let logical = LOGICAL_NAMES.contains(&p.name.as_str());
    let arg = |fty, dim, conv| {
        Ok(Arg {
            name: name.clone(),
            fty,
            dim,
            conv,
            cbase: p.base.clone(),
        })
    };
    let dim = if p.triples {
        Dim::Triples
    } else if p.array {
        Dim::Star
    } else {
        Dim::Scalar
    };
    if p.base == "..." {
        return Err("variadic".into());
    }
    if INT_TYPES.contains(&p.base.as_str()) {
        let fty = if logical { FTy::Logical } else { FTy::Integer };
        return match p.ptr {
            0 if !p.triples => arg(
                fty,
                Dim::Scalar,
                if logical {
                    Conv::LogicalValue
                } else {
                    Conv::Value
                },
            ),
            0 => arg(fty, dim, Conv::Pass),
            1 => {
                let conv = if logical && !p.is_const && !p.array {
                    Conv::LogicalOut
                } else if p.name.contains("weights") {
                    Conv::Weights
                } else if p.name == "array_of_errcodes" {
                    Conv::Errcodes
                } else if (p.name == "index" || p.name == "indx")
                    && (f == "Waitany" || f == "Testany")
                {
                    Conv::Index
                } else if p.name == "array_of_indices" && (f == "Waitsome" || f == "Testsome") {
                    Conv::Indices
                } else {
                    Conv::Pass
                };
                arg(fty, dim, conv)
            }
            _ => Err(format!("{} with {} levels of pointers", p.base, p.ptr)),
        };
    }
    // A file is a pointer in C and an INTEGER in Fortran (MPICH's ABI).
    if p.base == "MPI_File" && !p.array {
        return match p.ptr {
            0 => arg(FTy::Integer, Dim::Scalar, Conv::FileValue),
            1 => arg(FTy::Integer, Dim::Scalar, Conv::FileRef),
            _ => Err(format!("MPI_File with {} levels of pointers", p.ptr)),
        };
    }
    if let Some(fty) = wide(&p.base) {
        return match p.ptr {
            0 => arg(fty, Dim::Scalar, Conv::Value),
            1 => arg(fty, dim, Conv::Pass),
            _ => Err(format!("{} with {} levels of pointers", p.base, p.ptr)),
        };
    }
    match (p.base.as_str(), p.ptr) {
        ("void", 1) => match p.name.as_str() {
            "extra_state" | "attribute_val" | "attribute_val_in" | "attribute_val_out" => {
                Err(format!("attribute value {}", p.name))
            }
            _ => arg(FTy::Choice, Dim::Star, Conv::Buffer),
        },
        ("MPI_Status", 1) if p.is_const => arg(FTy::Integer, Dim::Status, Conv::Pass),
        ("MPI_Status", 1) if p.array => arg(FTy::Integer, Dim::Statuses, Conv::Statuses),
        ("MPI_Status", 1) => arg(FTy::Integer, Dim::Status, Conv::Status),
        ("char", 1) if p.is_const => arg(FTy::Char, Dim::Scalar, Conv::StrIn),
        ("char", 1) => {
            let size = if f == "Get_library_version" {
                8192
            } else {
                1025
            };
            arg(FTy::Char, Dim::Scalar, Conv::StrOut(size))
        }
        (b, 1) if PROCEDURE_TYPES.contains(&b) => arg(FTy::External, Dim::Scalar, Conv::Procedure),
        (b, _) => Err(format!("a parameter of type {b}{}", "*".repeat(p.ptr))),
    }
}

fn build(protos: &[Proto], c_unsupported: &BTreeSet<String>) -> Vec<FFunc> {
    let mut out = Vec::new();
    for proto in protos {
        if c_only(&proto.name) {
            continue;
        }
        let fortran_upper = format!("MPI_{}", proto.name.to_uppercase());
        if let Some((_, args, ret)) = SPECIALS.iter().find(|s| s.0 == proto.name) {
            out.push(FFunc {
                name: proto.name.clone(),
                args: args
                    .iter()
                    .map(|(n, fty, dim)| Arg {
                        name: n.to_string(),
                        fty: *fty,
                        dim: *dim,
                        conv: Conv::Pass,
                        cbase: String::new(),
                    })
                    .collect(),
                ret: *ret,
                body: Body::Special,
            });
            continue;
        }
        // Placeholders with the C function's arity: Fortran passes the same arguments plus IERROR.
        let placeholders = || {
            proto
                .params
                .iter()
                .enumerate()
                .map(|(i, _)| Arg {
                    name: format!("a{i}"),
                    fty: FTy::Integer,
                    dim: Dim::Scalar,
                    conv: Conv::Pass,
                    cbase: String::new(),
                })
                .collect::<Vec<_>>()
        };
        if LEFT_OUT.iter().any(|l| l.0 == proto.name) {
            out.push(FFunc {
                name: proto.name.clone(),
                args: placeholders(),
                ret: Ret::Ierror,
                body: Body::Unsupported(format!("{fortran_upper} (Fortran binding)")),
            });
            continue;
        }
        let args: Result<Vec<Arg>, String> = proto
            .params
            .iter()
            .map(|p| classify(&proto.name, p))
            .collect();
        match args {
            Ok(args) if proto.ret == "int" => out.push(FFunc {
                name: proto.name.clone(),
                args,
                ret: Ret::Ierror,
                body: Body::Generic,
            }),
            other => {
                // The C function's own message when C lacks it too, else the Fortran name's.
                let c_name = format!("MPI_{}", proto.name);
                let what = if c_unsupported.contains(&c_name) {
                    c_name
                } else {
                    format!(
                        "{fortran_upper} (Fortran binding: {})",
                        other.err().unwrap_or_else(|| "return type".into())
                    )
                };
                out.push(FFunc {
                    name: proto.name.clone(),
                    args: placeholders(),
                    ret: Ret::Ierror,
                    body: Body::Unsupported(what),
                });
            }
        }
    }
    out
}

fn rust_ty(a: &Arg) -> &'static str {
    match a.fty {
        FTy::Integer | FTy::Logical => "*mut c_int",
        FTy::Aint => "*mut MpiAint",
        FTy::Offset | FTy::Count => "*mut i64",
        FTy::Char => "*mut c_char",
        FTy::Choice => "*mut c_void",
        FTy::External => "*const c_void",
    }
}

/// The Fortran procedure's parameters in Rust: the arguments, `ierror`, the hidden lengths.
fn rust_params(f: &FFunc) -> (String, String) {
    let mut decl = Vec::new();
    let mut call = Vec::new();
    for a in &f.args {
        decl.push(format!("{}: {}", a.name, rust_ty(a)));
        call.push(a.name.clone());
    }
    if f.ret == Ret::Ierror {
        decl.push("ierror: *mut c_int".into());
        call.push("ierror".into());
    }
    for a in f.args.iter().filter(|a| a.fty == FTy::Char) {
        decl.push(format!("{}_len: usize", a.name));
        call.push(format!("{}_len", a.name));
    }
    (decl.join(", "), call.join(", "))
}

fn rust_ret(f: &FFunc) -> &'static str {
    match f.ret {
        Ret::Ierror | Ret::Nothing => "",
        Ret::Double => " -> f64",
        Ret::Aint => " -> MpiAint",
    }
}

fn c_extern_ty(p: &Param) -> &'static str {
    if p.ptr > 0
        || p.base.ends_with("_function")
        || p.base == "MPI_File"
        || p.base.starts_with("MPI_T_")
    {
        "*mut c_void"
    } else if wide(&p.base) == Some(FTy::Aint) {
        "MpiAint"
    } else if wide(&p.base).is_some() {
        "i64"
    } else {
        "c_int"
    }
}

fn emit_rust(funcs: &[FFunc], protos: &[Proto]) -> String {
    let mut s = String::new();
    s.push_str(
        "// @generated by stormpi-fortran-gen from core/include/mpi.h: do not edit.\n\
         //! The Fortran procedures of the binding: for each, a body (`f_<name>::<PMPI>`) and the\n\
         //! link names MPICH's `libmpichfort.so.12` exports.\n\
         #![allow(non_snake_case, unused_unsafe, unused_variables, clippy::missing_safety_doc, clippy::too_many_arguments)]\n\
         #![allow(clippy::not_unsafe_ptr_arg_deref, clippy::needless_return, clippy::unnecessary_cast)]\n\n\
         use core::ffi::{c_char, c_int, c_void};\n\n\
         use crate::rt::{self, MpiAint};\n\
         use crate::special;\n\n",
    );
    // The C functions called.
    s.push_str(
        "/// The C functions the bodies call (`MPI_X` for `mpi_x_`, `PMPI_X` for `pmpi_x_`).\n",
    );
    s.push_str(
        "#[allow(dead_code)]\npub(crate) mod c {\n    use super::*;\n\n    extern \"C\" {\n",
    );
    for p in protos {
        if c_only(&p.name) {
            continue;
        }
        let params: Vec<String> = p
            .params
            .iter()
            .enumerate()
            .map(|(i, q)| {
                if q.base == "..." {
                    "...".to_string()
                } else {
                    format!("a{i}: {}", c_extern_ty(q))
                }
            })
            .collect();
        let ret = match p.ret.as_str() {
            "double" => "f64",
            "MPI_Aint" => "MpiAint",
            _ => "c_int",
        };
        for prefix in ["MPI_", "PMPI_"] {
            let _ = writeln!(
                s,
                "        pub fn {prefix}{}({}) -> {ret};",
                p.name,
                params.join(", ")
            );
        }
    }
    s.push_str("    }\n}\n\n");

    for f in funcs {
        let lower = f.lower();
        let (decl, call) = rust_params(f);
        let ret = rust_ret(f);
        let _ = writeln!(
            s,
            "/// `MPI_{}` (`PMPI` chooses the profiling C function).",
            f.name.to_uppercase()
        );
        let _ = writeln!(
            s,
            "#[inline(always)]\nunsafe fn f_{lower}<const PMPI: bool>({decl}){ret} {{"
        );
        match &f.body {
            Body::Special => {
                let _ = writeln!(s, "    special::{lower}::<PMPI>({call})");
            }
            Body::Unsupported(what) => {
                let _ = writeln!(s, "    *ierror = rt::unsupported({what:?});");
            }
            Body::Generic => emit_generic_body(&mut s, f),
        }
        s.push_str("}\n");
        let names = link_names(&f.name);
        for (i, (link, pmpi)) in names.iter().enumerate() {
            let _ = writeln!(
                s,
                "#[no_mangle]\npub unsafe extern \"C\" fn {link}({decl}){ret} {{"
            );
            if i < 2 {
                let _ = writeln!(s, "    f_{lower}::<{pmpi}>({call})");
            } else {
                let base = if *pmpi { &names[1].0 } else { &names[0].0 };
                let _ = writeln!(s, "    {base}({call})");
            }
            s.push_str("}\n");
        }
        s.push('\n');
    }
    s
}

/// The link names of one Fortran procedure: `(name, is_pmpi)`, the two bodies first.
fn link_names(name: &str) -> Vec<(String, bool)> {
    let lower = name.to_lowercase();
    let upper = name.to_uppercase();
    let mut v = vec![
        (format!("mpi_{lower}_"), false),
        (format!("pmpi_{lower}_"), true),
    ];
    for pmpi in [false, true] {
        let (l, u) = if pmpi {
            ("pmpi", "PMPI")
        } else {
            ("mpi", "MPI")
        };
        v.push((format!("{l}_{lower}__"), pmpi));
        v.push((format!("{l}_{lower}"), pmpi));
        // The C library defines MPI_DUP_FN and its kin as C functions already.
        if pmpi || !upper.ends_with("DUP_FN") {
            v.push((format!("{u}_{upper}"), pmpi));
        }
    }
    v
}

/// How a string argument of `func` is read: info keys and values lose leading blanks too (MPI
/// 4.1), other strings only trailing ones.
fn string_in_fn(func: &str) -> &'static str {
    if func.starts_with("Info_") {
        "info_string_in"
    } else {
        "string_in"
    }
}

/// The C argument for `a` under the conversions both bindings spell alike (values, logicals,
/// statuses, indices, files, ...), with what must precede the call appended to `pre` and what
/// must follow it to `post`; `None` for the ones each binding spells its own way (buffers,
/// strings).
fn common_arg(f: &FFunc, a: &Arg, pre: &mut String, post: &mut String) -> Option<String> {
    let n = &a.name;
    Some(match &a.conv {
        Conv::Value if f.name == "Info_get" && n == "valuelen" => {
            format!("(*{n}).min(rt::INFO_VALUE_MAX)")
        }
        Conv::Value => format!("*{n}"),
        Conv::LogicalValue => format!("rt::logical_in(*{n})"),
        Conv::Pass => format!("{n}.cast()"),
        Conv::LogicalOut => {
            let _ = writeln!(post, "    if rc == rt::SUCCESS {{ rt::logical_out({n}); }}");
            format!("{n}.cast()")
        }
        Conv::Status => format!("rt::status({n})"),
        Conv::Statuses => format!("rt::statuses({n})"),
        Conv::Weights => format!("rt::weights({n})"),
        Conv::Errcodes => format!("rt::errcodes({n})"),
        Conv::Index => {
            let _ = writeln!(post, "    if rc == rt::SUCCESS {{ rt::index_out({n}); }}");
            format!("{n}.cast()")
        }
        Conv::Indices => {
            let _ = writeln!(
                post,
                "    if rc == rt::SUCCESS {{ rt::indices_out({n}, outcount); }}"
            );
            format!("{n}.cast()")
        }
        Conv::Procedure => format!("{n} as *mut c_void"),
        Conv::FileValue => format!("rt::file_in(*{n})"),
        Conv::FileRef => {
            let _ = writeln!(pre, "    let mut {n}_h = rt::file_in(*{n});");
            let _ = writeln!(post, "    *{n} = rt::file_out({n}_h);");
            format!("(&mut {n}_h as *mut *mut c_void).cast()")
        }
        Conv::Buffer | Conv::StrIn | Conv::StrOut(_) => return None,
    })
}

fn emit_generic_body(s: &mut String, f: &FFunc) {
    let upper = format!("MPI_{}", f.name.to_uppercase());
    let mut pre = String::new();
    let mut post = String::new();
    let mut cargs = Vec::new();
    let flag = f
        .args
        .iter()
        .any(|a| a.conv == Conv::LogicalOut && a.name == "flag");
    for a in &f.args {
        let n = &a.name;
        if let Some(c) = common_arg(f, a, &mut pre, &mut post) {
            cargs.push(c);
            continue;
        }
        match &a.conv {
            Conv::Buffer => cargs.push(format!("rt::buffer({n})")),
            Conv::StrIn => {
                let _ = writeln!(pre, "    let mut {n}_c = [0u8; rt::STRING_IN_MAX];");
                let _ = writeln!(
                    pre,
                    "    if !rt::{}({n}, {n}_len, &mut {n}_c) {{ *ierror = rt::string_too_long({upper:?}); return; }}",
                    string_in_fn(&f.name)
                );
                cargs.push(format!("{n}_c.as_mut_ptr().cast()"));
            }
            Conv::StrOut(size) => {
                let _ = writeln!(pre, "    let mut {n}_c = [0u8; {size}];");
                cargs.push(format!("{n}_c.as_mut_ptr().cast()"));
                let cond = if flag {
                    "rc == rt::SUCCESS && *flag != 0"
                } else {
                    "rc == rt::SUCCESS"
                };
                let _ = writeln!(
                    post,
                    "    if {cond} {{ rt::string_out({n}, {n}_len, &{n}_c); }}"
                );
            }
            _ => {}
        }
    }
    s.push_str(&pre);
    let call = cargs.join(", ");
    let _ = writeln!(
        s,
        "    let rc = if PMPI {{ c::PMPI_{0}({call}) }} else {{ c::MPI_{0}({call}) }};",
        f.name
    );
    s.push_str(&post);
    s.push_str("    *ierror = rc;\n");
}

// ---------------------------------------------------------------------------------------------
// Fortran
// ---------------------------------------------------------------------------------------------

/// Fortran's own constants (no C twin, or a different value), then `mpi.h`'s.
fn constants(defines: &[(String, String)]) -> Vec<(String, i64)> {
    let map: BTreeMap<&str, &str> = defines
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    // Status: INTEGER(MPI_STATUS_SIZE) in C's layout, fields counted from 1.
    let f_index = |n: &str| eval(&map, n, 0).map(|v| v + 1);
    let mut out: Vec<(String, i64)> = vec![
        (
            "MPI_STATUS_SIZE".into(),
            eval(&map, "MPI_F_STATUS_SIZE", 0).unwrap_or(5),
        ),
        ("MPI_SOURCE".into(), f_index("MPI_F_SOURCE").unwrap_or(3)),
        ("MPI_TAG".into(), f_index("MPI_F_TAG").unwrap_or(4)),
        ("MPI_ERROR".into(), f_index("MPI_F_ERROR").unwrap_or(5)),
        ("MPI_ADDRESS_KIND".into(), 8),
        ("MPI_OFFSET_KIND".into(), 8),
        ("MPI_COUNT_KIND".into(), 8),
        ("MPI_INTEGER_KIND".into(), 4),
    ];
    let skip = |n: &str| {
        n.starts_with("MPI_F_")
            || n.starts_with("MPI_T_")
            || n.starts_with("MPI_F08")
            || n.starts_with("MPIX_")
            || n.ends_with("_FN")
            || n.ends_with("_FUNCTION")
            || out_has(n)
    };
    for (name, _) in defines {
        if !name.starts_with("MPI_") || skip(name) || out.iter().any(|(n, _)| n == name) {
            continue;
        }
        if let Some(v) = eval(&map, name, 0) {
            out.push((name.clone(), v));
        }
    }
    for (name, v) in out.iter_mut() {
        // Predefined attribute keyvals: the Fortran twin of each odd C keyval is the next value.
        if is_predefined_keyval(name) {
            *v += 1;
        }
        // String lengths: C's count the NUL, Fortran's do not.
        if name.starts_with("MPI_MAX_") && !name.ends_with("_LEN") {
            *v -= 1;
        }
    }
    out
}

fn out_has(n: &str) -> bool {
    matches!(
        n,
        "MPI_BOTTOM"
            | "MPI_IN_PLACE"
            | "MPI_STATUS_IGNORE"
            | "MPI_STATUSES_IGNORE"
            | "MPI_ERRCODES_IGNORE"
            | "MPI_ARGV_NULL"
            | "MPI_ARGVS_NULL"
            | "MPI_UNWEIGHTED"
            | "MPI_WEIGHTS_EMPTY"
            | "MPI_VERSION_STRING"
            | "MPI_DISPLACEMENT_CURRENT"
    )
}

fn is_predefined_keyval(name: &str) -> bool {
    matches!(
        name,
        "MPI_TAG_UB"
            | "MPI_HOST"
            | "MPI_IO"
            | "MPI_WTIME_IS_GLOBAL"
            | "MPI_UNIVERSE_SIZE"
            | "MPI_LASTUSEDCODE"
            | "MPI_APPNUM"
            | "MPI_WIN_BASE"
            | "MPI_WIN_SIZE"
            | "MPI_WIN_DISP_UNIT"
            | "MPI_WIN_CREATE_FLAVOR"
            | "MPI_WIN_MODEL"
    )
}

/// The integer value of a `#define`: literals, casts, parentheses, unary minus, other names.
fn eval(map: &BTreeMap<&str, &str>, name: &str, depth: u32) -> Option<i64> {
    if depth > 8 {
        return None;
    }
    let mut v = map.get(name)?.trim().to_string();
    loop {
        let t = v.trim().to_string();
        let next = if t.starts_with('(') && t.ends_with(')') && balanced(&t[1..t.len() - 1]) {
            // (expr)
            t[1..t.len() - 1].to_string()
        } else if let Some(close) = t.strip_prefix('(').and_then(|r| r.find(')')) {
            // (MPI_Datatype)0x4c00041b: a cast to a named type.
            let ty = &t[1..close + 1];
            if ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                t[close + 2..].to_string()
            } else {
                t
            }
        } else {
            t
        };
        if next == v {
            break;
        }
        v = next;
    }
    let v = v.trim();
    let (neg, digits) = match v.strip_prefix('-') {
        Some(d) => (true, d.trim()),
        None => (false, v),
    };
    let n = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let n = i64::from_str_radix(h.trim_end_matches(['u', 'U', 'l', 'L']), 16).ok()?;
        // Handles are 32-bit: MPI_FLOAT_INT is 0x8c000000, negative as an INTEGER.
        if (1 << 31..1 << 32).contains(&n) {
            n - (1 << 32)
        } else {
            n
        }
    } else if digits.chars().all(|c| c.is_ascii_digit()) && !digits.is_empty() {
        digits.parse().ok()?
    } else if digits.starts_with("MPI_")
        && digits
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        eval(map, digits, depth + 1)?
    } else {
        return None;
    };
    Some(if neg { -n } else { n })
}

fn balanced(s: &str) -> bool {
    let mut d = 0i32;
    for c in s.chars() {
        match c {
            '(' => d += 1,
            ')' => {
                d -= 1;
                if d < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    d == 0
}

/// Fixed-form lines (column 7, at most 72 columns) that also read as free form.
fn emit_constants_f77(consts: &[(String, i64)], out: &mut String) {
    for (name, v) in consts {
        let _ = writeln!(out, "       INTEGER {name}");
        let _ = writeln!(out, "       PARAMETER ({name}={v})");
    }
    out.push_str("       INTEGER*8 MPI_DISPLACEMENT_CURRENT\n");
    out.push_str("       PARAMETER (MPI_DISPLACEMENT_CURRENT=-54278278)\n");
    out.push_str("       LOGICAL MPI_SUBARRAYS_SUPPORTED\n");
    out.push_str("       PARAMETER (MPI_SUBARRAYS_SUPPORTED=.FALSE.)\n");
    out.push_str("       LOGICAL MPI_ASYNC_PROTECTS_NONBLOCKING\n");
    out.push_str("       PARAMETER (MPI_ASYNC_PROTECTS_NONBLOCKING=.FALSE.)\n");
}

/// The sentinels: variables of MPICH's common blocks, whose addresses the library recognizes.
const SENTINELS: &str = "\
       INTEGER MPI_BOTTOM, MPI_IN_PLACE
       INTEGER MPI_STATUS_IGNORE(MPI_STATUS_SIZE)
       INTEGER MPI_STATUSES_IGNORE(MPI_STATUS_SIZE,1)
       INTEGER MPI_ERRCODES_IGNORE(1)
       INTEGER MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY
       CHARACTER*1 MPI_ARGVS_NULL(1,1)
       CHARACTER*1 MPI_ARGV_NULL(1)
! MPICH's common blocks, padded as the library defines them (to 16 or 32
! bytes: the alignment gfortran gives them)
       INTEGER MPI_PAD_PRIV1(1), MPI_PAD_PRIV2(2)
       INTEGER MPI_PAD_FCMB5(3), MPI_PAD_FCMB9(3)
       CHARACTER*14 MPI_PAD_PRIVC
       COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE
       COMMON /MPIPRIV1/ MPI_STATUS_IGNORE, MPI_PAD_PRIV1
       COMMON /MPIPRIV2/ MPI_STATUSES_IGNORE, MPI_ERRCODES_IGNORE
       COMMON /MPIPRIV2/ MPI_PAD_PRIV2
       COMMON /MPIPRIVC/ MPI_ARGVS_NULL, MPI_ARGV_NULL
       COMMON /MPIPRIVC/ MPI_PAD_PRIVC
       COMMON /MPIFCMB5/ MPI_UNWEIGHTED, MPI_PAD_FCMB5
       COMMON /MPIFCMB9/ MPI_WEIGHTS_EMPTY, MPI_PAD_FCMB9
       SAVE /MPIPRIV1/, /MPIPRIV2/, /MPIPRIVC/
       SAVE /MPIFCMB5/, /MPIFCMB9/
";

/// The sentinels of the module: variables the library defines under its own names (`BIND(C)`),
/// at addresses it recognizes as it does the common blocks of `mpif.h`. Not common blocks,
/// because gfortran leaves the padding out of a module's common blocks where they are used, and
/// a static link would then find the library's (padded) definitions larger.
const MODULE_SENTINELS: &str = "\
  integer(c_int), bind(C, name='stormpi_f_bottom') :: MPI_BOTTOM
  integer(c_int), bind(C, name='stormpi_f_in_place') :: MPI_IN_PLACE
  integer(c_int), bind(C, name='stormpi_f_status_ignore') :: MPI_STATUS_IGNORE(MPI_STATUS_SIZE)
  integer(c_int), bind(C, name='stormpi_f_statuses_ignore') :: MPI_STATUSES_IGNORE(MPI_STATUS_SIZE,1)
  integer(c_int), bind(C, name='stormpi_f_errcodes_ignore') :: MPI_ERRCODES_IGNORE(1)
  integer(c_int), bind(C, name='stormpi_f_unweighted') :: MPI_UNWEIGHTED
  integer(c_int), bind(C, name='stormpi_f_weights_empty') :: MPI_WEIGHTS_EMPTY
  character(kind=c_char, len=1), bind(C, name='stormpi_f_argvs_null') :: MPI_ARGVS_NULL(1,1)
  character(kind=c_char, len=1), bind(C, name='stormpi_f_argv_null') :: MPI_ARGV_NULL(1)
";

const HEADER_NOTE: &str = "\
! stormpi: generated by stormpi-fortran-gen from core/include/mpi.h;
! do not edit. Values are MPICH's (its Fortran ABI).
";

fn emit_mpif(consts: &[(String, i64)], funcs: &[FFunc]) -> String {
    let mut s = String::from("! mpif.h - the MPI Fortran header (mpif.h binding) of stormpi.\n");
    s.push_str(HEADER_NOTE);
    emit_constants_f77(consts, &mut s);
    s.push_str(SENTINELS);
    // Procedures used as values or returning values.
    let mut ext: Vec<String> = FORTRAN_ONLY
        .iter()
        .filter(|n| **n != "F_SYNC_REG")
        .map(|n| format!("MPI_{n}"))
        .collect();
    // MPI_WTIME and MPI_WTICK (MPICH's mpif.h declares no other function).
    for f in funcs.iter().filter(|f| f.ret == Ret::Double) {
        let _ = writeln!(
            s,
            "       DOUBLE PRECISION MPI_{0}, PMPI_{0}",
            f.name.to_uppercase()
        );
        ext.push(format!("MPI_{}", f.name.to_uppercase()));
        ext.push(format!("PMPI_{}", f.name.to_uppercase()));
    }
    for e in ext {
        let _ = writeln!(s, "       EXTERNAL {e}");
    }
    s
}

fn f_decl(a: &Arg) -> String {
    let ty = match a.fty {
        FTy::Integer => "INTEGER",
        FTy::Logical => "LOGICAL",
        FTy::Aint => "INTEGER(KIND=MPI_ADDRESS_KIND)",
        FTy::Offset => "INTEGER(KIND=MPI_OFFSET_KIND)",
        FTy::Count => "INTEGER(KIND=MPI_COUNT_KIND)",
        FTy::Char => "CHARACTER(LEN=*)",
        FTy::Choice => "TYPE(*), DIMENSION(*)",
        FTy::External => "EXTERNAL",
    };
    let dim = match (a.fty, a.dim) {
        (FTy::Choice | FTy::External, _) | (_, Dim::Scalar) => "",
        (_, Dim::Star) => "(*)",
        (_, Dim::Triples) => "(3,*)",
        (_, Dim::Status) => "(MPI_STATUS_SIZE)",
        (_, Dim::Statuses) => "(MPI_STATUS_SIZE,*)",
        (_, Dim::ByCount) => "(count,*)",
    };
    let mut s = String::new();
    // Choice buffers take anything; weights take arrays and the scalar MPI_UNWEIGHTED and
    // MPI_WEIGHTS_EMPTY.
    if a.fty == FTy::Choice || a.conv == Conv::Weights {
        let _ = writeln!(s, "      !GCC$ ATTRIBUTES NO_ARG_CHECK :: {}", a.name);
    }
    let _ = write!(s, "      {ty} :: {}{dim}", a.name);
    s
}

/// Free-form line continuation for long argument lists.
fn wrap(line: &str) -> String {
    let mut out = String::new();
    let mut cur = String::new();
    for (i, part) in line.split(", ").enumerate() {
        if i > 0 {
            cur.push_str(", ");
        }
        if cur.len() + part.len() > 90 {
            out.push_str(&cur);
            out.push_str("&\n        ");
            cur.clear();
        }
        cur.push_str(part);
    }
    out.push_str(&cur);
    out
}

fn emit_module(consts: &[(String, i64)], funcs: &[FFunc]) -> String {
    let mut s = String::from("! mpi.f90 - the `mpi` module of stormpi (compiled at install by the installed gfortran).\n");
    s.push_str(HEADER_NOTE);
    s.push_str(
        "module mpi\n  use, intrinsic :: iso_c_binding, only: c_int, c_char\n  implicit none\n",
    );
    s.push_str("  private :: c_int, c_char\n");
    emit_constants_f77(consts, &mut s);
    s.push_str(MODULE_SENTINELS);
    for n in FORTRAN_ONLY.iter().filter(|n| **n != "F_SYNC_REG") {
        let _ = writeln!(s, "  EXTERNAL :: MPI_{n}");
    }
    s.push_str(&f08::sizeof_interface(false));
    s.push_str("\n  interface\n");
    let passed_as_values =
        |f: &FFunc| FORTRAN_ONLY.contains(&f.name.as_str()) && f.name != "F_SYNC_REG";
    for f in funcs
        .iter()
        .filter(|f| !matches!(f.body, Body::Unsupported(_)) && !passed_as_values(f))
    {
        let upper = format!("MPI_{}", f.name.to_uppercase());
        let mut names: Vec<String> = f.args.iter().map(|a| a.name.clone()).collect();
        if f.ret == Ret::Ierror {
            names.push("ierror".into());
        }
        let head = match f.ret {
            Ret::Ierror | Ret::Nothing => format!("    subroutine {upper}({})", names.join(", ")),
            Ret::Double => format!(
                "    double precision function {upper}({})",
                names.join(", ")
            ),
            Ret::Aint => format!(
                "    integer(kind=MPI_ADDRESS_KIND) function {upper}({})",
                names.join(", ")
            ),
        };
        let _ = writeln!(s, "{}", wrap(&head));
        s.push_str("      import\n      implicit none\n");
        for a in &f.args {
            let _ = writeln!(s, "{}", f_decl(a));
        }
        if f.ret == Ret::Ierror {
            s.push_str("      INTEGER :: ierror\n");
        }
        let end = if matches!(f.ret, Ret::Ierror | Ret::Nothing) {
            "subroutine"
        } else {
            "function"
        };
        let _ = writeln!(s, "    end {end} {upper}");
    }
    s.push_str("  end interface\nend module mpi\n");
    s
}

// ---------------------------------------------------------------------------------------------

fn root() -> PathBuf {
    // fortran/gen -> fortran
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The C functions stormpi's library does not implement (`core/src/capi/unsupported.rs`).
fn c_unsupported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (name, rest) = l.split_once(" / ")?;
            rest.starts_with("PMPI_").then(|| name.to_string())
        })
        .collect()
}

/// The generated files: path relative to `fortran/`, contents.
fn generate() -> Result<Vec<(&'static str, String)>, String> {
    let header_path = root().join("../core/include/mpi.h");
    let header = std::fs::read_to_string(&header_path)
        .map_err(|e| format!("{}: {e}", header_path.display()))?;
    let unsup_path = root().join("../core/src/capi/unsupported.rs");
    let unsup = std::fs::read_to_string(&unsup_path)
        .map_err(|e| format!("{}: {e}", unsup_path.display()))?;
    let (protos, defines) = parse_header(&header);
    if protos.len() < 600 {
        return Err(format!(
            "found only {} prototypes in {}",
            protos.len(),
            header_path.display()
        ));
    }
    let unsupported = c_unsupported(&unsup);
    let mut funcs = build(&protos, &unsupported);
    for n in FORTRAN_ONLY {
        funcs.push(fortran_only(n));
    }
    funcs.sort_by_key(FFunc::lower);
    let consts = constants(&defines);
    let (specs, left) = f08::specifics(&funcs, &protos, &unsupported);
    Ok(vec![
        ("src/bindings_f08.rs", f08::emit_rust(&specs, &protos)),
        (
            "include/mpi_f08.f90",
            f08::emit_module(&consts, &defines, &specs),
        ),
        ("include/coverage_f08.txt", f08::coverage(&specs, &left)),
        ("src/bindings.rs", emit_rust(&funcs, &protos)),
        ("include/mpif.h", emit_mpif(&consts, &funcs)),
        ("include/mpi.f90", emit_module(&consts, &funcs)),
        ("include/coverage.txt", coverage(&funcs)),
    ])
}

/// The predefined callbacks and the other Fortran-only procedures, all written by hand.
fn fortran_only(name: &str) -> FFunc {
    let int = |n: &str| Arg {
        name: n.into(),
        fty: FTy::Integer,
        dim: Dim::Scalar,
        conv: Conv::Pass,
        cbase: String::new(),
    };
    let aint = |n: &str| Arg {
        name: n.into(),
        fty: FTy::Aint,
        dim: Dim::Scalar,
        conv: Conv::Pass,
        cbase: String::new(),
    };
    let logical = |n: &str| Arg {
        name: n.into(),
        fty: FTy::Logical,
        dim: Dim::Scalar,
        conv: Conv::Pass,
        cbase: String::new(),
    };
    // MPI-1's callbacks (MPI_DUP_FN, MPI_NULL_COPY_FN, ...) take INTEGER values, the others
    // INTEGER(KIND=MPI_ADDRESS_KIND).
    let mpi1 = matches!(name, "DUP_FN" | "NULL_COPY_FN" | "NULL_DELETE_FN");
    let val = |n: &str| if mpi1 { int(n) } else { aint(n) };
    let args = if name.ends_with("COPY_FN") || name.ends_with("DUP_FN") {
        vec![
            int("oldobj"),
            int("keyval"),
            val("extra_state"),
            val("attribute_val_in"),
            val("attribute_val_out"),
            logical("flag"),
        ]
    } else if name.ends_with("DELETE_FN") {
        vec![
            int("obj"),
            int("keyval"),
            val("attribute_val"),
            val("extra_state"),
        ]
    } else if name == "F_SYNC_REG" {
        vec![Arg {
            name: "buf".into(),
            fty: FTy::Choice,
            dim: Dim::Star,
            conv: Conv::Pass,
            cbase: String::new(),
        }]
    } else {
        // MPI_CONVERSION_FN_NULL(userbuf, datatype, count, filebuf, position, extra_state, ierror)
        vec![
            Arg {
                name: "userbuf".into(),
                fty: FTy::Choice,
                dim: Dim::Star,
                conv: Conv::Pass,
                cbase: String::new(),
            },
            int("datatype"),
            int("count"),
            Arg {
                name: "filebuf".into(),
                fty: FTy::Choice,
                dim: Dim::Star,
                conv: Conv::Pass,
                cbase: String::new(),
            },
            Arg {
                name: "position".into(),
                fty: FTy::Offset,
                dim: Dim::Scalar,
                conv: Conv::Pass,
                cbase: String::new(),
            },
            aint("extra_state"),
        ]
    };
    let ret = if name == "F_SYNC_REG" {
        Ret::Nothing
    } else {
        Ret::Ierror
    };
    FFunc {
        name: name.to_string(),
        args,
        ret,
        body: Body::Special,
    }
}

/// One line per procedure: bound (converted or by hand) or left out, and why.
fn coverage(funcs: &[FFunc]) -> String {
    let mut s = String::from(
        "# Fortran procedures of stormpi's binding (generated by stormpi-fortran-gen)\n",
    );
    let (mut bound, mut left) = (0, 0);
    for f in funcs {
        let upper = format!("MPI_{}", f.name.to_uppercase());
        match &f.body {
            Body::Unsupported(what) => {
                left += 1;
                let why = LEFT_OUT
                    .iter()
                    .find(|l| l.0 == f.name)
                    .map(|l| l.1.to_string())
                    .unwrap_or_else(|| what.clone());
                let _ = writeln!(s, "left-out {upper}: {why}");
            }
            Body::Special => {
                bound += 1;
                let _ = writeln!(s, "by-hand  {upper}");
            }
            Body::Generic => {
                bound += 1;
                let _ = writeln!(s, "bound    {upper}");
            }
        }
    }
    let _ = writeln!(
        s,
        "# {bound} bound, {left} left out (MPI_ERR_UNSUPPORTED_OPERATION)"
    );
    s
}

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let files = match generate() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("stormpi-fortran-gen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stale = Vec::new();
    for (rel, text) in files {
        let path = root().join(rel);
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if old == text {
            continue;
        }
        if check {
            stale.push(rel);
        } else if let Err(e) = std::fs::write(&path, text) {
            eprintln!("stormpi-fortran-gen: {}: {e}", path.display());
            return ExitCode::FAILURE;
        } else {
            println!("wrote {}", path.display());
        }
    }
    if !stale.is_empty() {
        eprintln!(
            "stormpi-fortran-gen: {} out of date (run cargo run -p stormpi-fortran-gen)",
            stale.join(", ")
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in files are what the generator writes from today's mpi.h.
    #[test]
    fn generated_files_are_current() {
        for (rel, text) in generate().unwrap() {
            let old = std::fs::read_to_string(root().join(rel)).unwrap_or_default();
            assert!(
                old == text,
                "fortran/{rel} is out of date: run cargo run -p stormpi-fortran-gen"
            );
        }
    }

    /// Once the C library implements everything `mpi.h` declares (the `_c` forms another branch
    /// adds, one-sided, ...), regenerating gives an `mpi_f08` module gfortran still compiles:
    /// the large-count forms join their generics without making them ambiguous.
    #[test]
    fn mpi_f08_with_every_c_function_compiles() {
        if std::process::Command::new("gfortran")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("\n*** SKIPPED: gfortran is not installed ***\n");
            return;
        }
        let header = std::fs::read_to_string(root().join("../core/include/mpi.h")).unwrap();
        let (protos, defines) = parse_header(&header);
        let none = BTreeSet::new();
        let mut funcs = build(&protos, &none);
        for n in FORTRAN_ONLY {
            funcs.push(fortran_only(n));
        }
        funcs.sort_by_key(FFunc::lower);
        let (specs, _) = f08::specifics(&funcs, &protos, &none);
        let module = f08::emit_module(&constants(&defines), &defines, &specs);
        assert!(
            module.contains("MPI_Send_c_f08ts"),
            "the large-count forms are bound"
        );
        assert!(module.contains("MPI_Win_create_f08ts"));
        assert!(
            module.contains("MPI_File_read_at_all_c_f08ts"),
            "MPI-IO's large-count forms join by rule once C has them"
        );
        let dir = std::env::temp_dir().join(format!("stormpi-f08-all-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mpi_f08.f90"), module).unwrap();
        let out = std::process::Command::new("gfortran")
            .current_dir(&dir)
            .args(["-fsyntax-only", "mpi_f08.f90"])
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The `PARAMETER`s of a Fortran header, by name (upper case), values evaluated where they
    /// are integers or other names.
    fn parameters(text: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let l = line.trim();
            let Some(rest) = l
                .strip_prefix("PARAMETER")
                .or_else(|| l.strip_prefix("parameter"))
            else {
                continue;
            };
            let inner = rest.trim().trim_start_matches('(').trim_end_matches(')');
            for assign in inner.split(',') {
                if let Some((n, v)) = assign.split_once('=') {
                    out.insert(n.trim().to_uppercase(), v.trim().to_string());
                }
            }
        }
        out
    }

    fn value(params: &BTreeMap<String, String>, v: &str) -> Option<i64> {
        let v = v.trim().trim_start_matches('(').trim_end_matches(')');
        if let Some((a, b)) = v.split_once('-').filter(|(a, _)| !a.is_empty()) {
            // MPICH writes some string lengths as 512-1.
            return Some(value(params, a)? - value(params, b)?);
        }
        v.parse()
            .ok()
            .or_else(|| value(params, params.get(&v.to_uppercase())?))
    }

    /// Every constant of MPICH's mpif.h is in ours with the same value (the MPICH Fortran ABI).
    #[test]
    fn constants_are_mpichs() {
        let mpich = Path::new("/usr/include/x86_64-linux-gnu/mpich/mpif.h");
        let Ok(theirs) = std::fs::read_to_string(mpich) else {
            eprintln!(
                "\n*** SKIPPED: {} is not installed (apt-get install libmpich-dev) ***\n",
                mpich.display()
            );
            return;
        };
        let files = generate().unwrap();
        let ours = &files.iter().find(|f| f.0 == "include/mpif.h").unwrap().1;
        let (theirs, ours) = (parameters(&theirs), parameters(ours));
        assert!(
            theirs.len() > 250,
            "{} constants in {}",
            theirs.len(),
            mpich.display()
        );
        let mut wrong = Vec::new();
        for (name, v) in &theirs {
            let want = value(&theirs, v);
            let have = ours.get(name).and_then(|o| value(&ours, o));
            if want.is_some() && want != have || want.is_none() && ours.get(name) != Some(v) {
                wrong.push(format!("{name}: MPICH {v}, ours {:?}", ours.get(name)));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// The header reads as fixed form: nothing past column 72.
    #[test]
    fn mpif_h_fits_fixed_form() {
        let files = generate().unwrap();
        let mpif = &files.iter().find(|f| f.0 == "include/mpif.h").unwrap().1;
        for line in mpif.lines() {
            assert!(line.len() <= 72, "{line}");
        }
    }
}
