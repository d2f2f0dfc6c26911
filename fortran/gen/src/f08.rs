//! The `mpi_f08` module from the same description: `include/mpi_f08.f90` (derived types,
//! named constants of those types, `BIND(C)` interfaces) and `src/bindings_f08.rs` (the
//! procedures those interfaces name).
//!
//! Every specific procedure is `BIND(C)` under the name the standard gives it (`MPI_Send_f08ts`
//! for one with choice buffers, `MPI_Comm_rank_f08` otherwise, `MPI_Send_c_f08ts` for a
//! large-count form; the `PMPI_` twins beside them), so the compiler passes choice buffers and
//! strings as `CFI_cdesc_t` descriptors, leaves out an absent `ierror` as a null pointer, and
//! everything else by reference — no compiler's private array descriptor is involved.

use super::*;

/// Handle types: a derived type with one `INTEGER :: MPI_VAL` each, as MPICH has them.
pub const HANDLES: &[&str] = &[
    "MPI_Comm",
    "MPI_Datatype",
    "MPI_Errhandler",
    "MPI_File",
    "MPI_Group",
    "MPI_Info",
    "MPI_Message",
    "MPI_Op",
    "MPI_Request",
    "MPI_Session",
    "MPI_Win",
];

/// Hand-written procedures of the `mpi` binding whose arguments are all references (plus
/// `IERROR`), so the `mpi_f08` form can call them: the handle argument's type by name.
const F08_SPECIALS: &[&str] = &[
    "Init",
    "Init_thread",
    "Aint_add",
    "Aint_diff",
    "Pcontrol",
    "Comm_set_attr",
    "Type_set_attr",
    "Win_set_attr",
    "Comm_get_attr",
    "Type_get_attr",
    "Win_get_attr",
    "Info_create_env",
    "Comm_create_keyval",
    "Type_create_keyval",
    "Win_create_keyval",
    "Grequest_start",
    "Register_datarep",
    "Info_get_string",
    "Session_get_nth_pset",
    "Comm_spawn",
    "Comm_spawn_multiple",
];

/// MPI-1 procedures the standard gives no `mpi_f08` form (deprecated since MPI-2).
const NO_F08_FORM: &[&str] = &["Attr_get", "Attr_put", "Errhandler_create", "Keyval_create"];

/// How a choice buffer reaches C.
#[derive(Debug, Clone, PartialEq)]
enum Buf {
    /// With its own count (argument index) and datatype (index): sections become datatypes.
    Paired(usize, usize),
    /// One block of memory: a non-contiguous section is an error.
    Contiguous,
    /// Only the address matters (`MPI_GET_ADDRESS`, `MPI_FILE_READ_ALL_END`).
    Address,
}

/// One specific procedure of the module.
#[derive(Debug, Clone)]
pub struct Specific {
    /// The C function without `MPI_` (`Send_c`).
    c_name: String,
    /// The generic name without `MPI_` (`Send`).
    generic: String,
    func: FFunc,
}

impl Specific {
    /// Whether the procedure takes a procedure argument: such an interface cannot be
    /// `BIND(C)` (the user's procedure is not), so the compiler's own convention applies —
    /// no descriptors in these, everything by reference — under gfortran's link name.
    fn takes_procedure(&self) -> bool {
        self.func
            .args
            .iter()
            .any(|a| a.conv == Conv::Procedure || a.fty == FTy::External)
    }

    /// Whether the library may still use the procedure's buffers after it returns (nonblocking
    /// and persistent operations, one-sided access, split collectives, the attached buffer):
    /// the standard declares those buffers `ASYNCHRONOUS`, and `TARGET` keeps the compiler from
    /// assuming their addresses stay private to the call.
    fn asynchronous(&self) -> bool {
        let g = self.generic.as_str();
        let returns_request = self
            .func
            .args
            .iter()
            .any(|a| a.cbase == "MPI_Request" && a.name == "request");
        returns_request
            || g == "Buffer_attach"
            || matches!(
                g,
                "Put"
                    | "Get"
                    | "Accumulate"
                    | "Get_accumulate"
                    | "Fetch_and_op"
                    | "Compare_and_swap"
                    | "Win_create"
                    | "Win_attach"
                    | "Win_detach"
            )
            || g.starts_with("File_") && (g.ends_with("_begin") || g.ends_with("_end"))
    }

    /// The symbol the library defines: the `BIND(C)` name, or gfortran's for the rest.
    fn symbol(&self, pmpi: bool) -> String {
        if self.takes_procedure() {
            format!("{}_", self.link(pmpi).to_lowercase())
        } else {
            self.link(pmpi)
        }
    }

    fn link(&self, pmpi: bool) -> String {
        let p = if pmpi { "PMPI" } else { "MPI" };
        let ts = if self.func.args.iter().any(|a| a.fty == FTy::Choice) {
            "_f08ts"
        } else {
            "_f08"
        };
        format!("{p}_{}{ts}", self.c_name)
    }
}

/// The Fortran type of an argument, for the kinds that must differ between two specifics.
fn signature(f: &FFunc) -> Vec<String> {
    f.args
        .iter()
        .map(|a| {
            let kind = match a.fty {
                FTy::Aint | FTy::Offset | FTy::Count => "i8".to_string(),
                FTy::Integer if HANDLES.contains(&a.cbase.as_str()) => a.cbase.clone(),
                other => format!("{other:?}"),
            };
            format!("{kind}{:?}", a.dim)
        })
        .collect()
}

/// The module's procedures: the converted ones, the hand-written ones that fit, and the
/// large-count forms the C library implements today.
pub fn specifics(
    funcs: &[FFunc],
    protos: &[Proto],
    c_unsupported: &BTreeSet<String>,
) -> (Vec<Specific>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut left = Vec::new();
    for f in funcs {
        let ok = match &f.body {
            // MPI-1's MPI_ERRHANDLER_CREATE has no mpi_f08 form.
            Body::Generic => f.name != "Errhandler_create",
            Body::Special => F08_SPECIALS.contains(&f.name.as_str()),
            Body::Unsupported(_) => false,
        };
        // Fortran-only procedures have no mpi_f08 form; MPI_WTIME and MPI_WTICK are C's;
        // MPI_BUFFER_DETACH is written out whole (BUFFER_DETACH).
        if FORTRAN_ONLY.contains(&f.name.as_str())
            || f.name == "Wtime"
            || f.name == "Wtick"
            || f.name == "Buffer_detach"
        {
            continue;
        }
        if ok && !c_unsupported.contains(&format!("MPI_{}", f.name)) {
            let mut f = f.clone();
            if matches!(f.body, Body::Special) {
                special_handles(&mut f);
            }
            out.push(Specific {
                c_name: f.name.clone(),
                generic: f.name.clone(),
                func: f,
            });
        } else {
            let why = match &f.body {
                Body::Unsupported(w) => w.clone(),
                _ if c_unsupported.contains(&format!("MPI_{}", f.name)) => {
                    format!("MPI_{} (not in the C library yet)", f.name)
                }
                _ if NO_F08_FORM.contains(&f.name.as_str()) => {
                    "deprecated MPI-1 procedure: the standard gives it no mpi_f08 form".into()
                }
                _ => "written by hand in the mpi binding, not yet in mpi_f08".into(),
            };
            left.push((f.name.clone(), why));
        }
    }
    // MPI_Register_datarep_c: its own name, as the standard has it (a generic cannot tell
    // specifics apart by their procedure arguments' interfaces).
    if let Some(b) = out.iter().find(|s| s.c_name == "Register_datarep").cloned() {
        let mut func = b.func;
        func.name = "Register_datarep_c".into();
        for a in &mut func.args {
            if a.cbase == "MPI_Datarep_conversion_function" {
                a.cbase.push_str("_c");
            }
        }
        out.push(Specific {
            c_name: func.name.clone(),
            generic: func.name.clone(),
            func,
        });
    }
    // Large-count forms: bound when C implements them and their Fortran interface differs
    // from the default one's (else the generic could not tell them apart).
    for p in protos.iter().filter(|p| p.name.ends_with("_c")) {
        let base = &p.name[..p.name.len() - 2];
        let Some(b) = out.iter().find(|s| s.c_name == base).cloned() else {
            continue;
        };
        if c_unsupported.contains(&format!("MPI_{}", p.name)) || p.ret != "int" {
            continue;
        }
        let Ok(args) = p
            .params
            .iter()
            .map(|q| classify(&p.name, q))
            .collect::<Result<Vec<Arg>, String>>()
        else {
            continue;
        };
        let f = FFunc {
            name: p.name.clone(),
            args,
            ret: Ret::Ierror,
            body: Body::Generic,
        };
        if signature(&f) == signature(&b.func) {
            continue;
        }
        out.push(Specific {
            c_name: p.name.clone(),
            generic: base.to_string(),
            func: f,
        });
    }
    out.sort_by_key(|s| s.c_name.to_lowercase());
    (out, left)
}

/// Gives a hand-written procedure's handle arguments their C types, and its procedure
/// arguments their abstract interfaces (`MPI_Comm_copy_attr_function`, ...).
fn special_handles(f: &mut FFunc) {
    let (obj, prefix) = if f.name.starts_with("Comm") {
        ("MPI_Comm", "MPI_Comm")
    } else if f.name.starts_with("Type") {
        ("MPI_Datatype", "MPI_Type")
    } else {
        ("MPI_Win", "MPI_Win")
    };
    for a in &mut f.args {
        a.cbase = match a.name.as_str() {
            "obj" => obj.into(),
            "comm" | "intercomm" => "MPI_Comm".into(),
            "info" | "array_of_info" => "MPI_Info".into(),
            "request" => "MPI_Request".into(),
            "copy_fn" => format!("{prefix}_copy_attr_function"),
            "delete_fn" => format!("{prefix}_delete_attr_function"),
            "query_fn" => "MPI_Grequest_query_function".into(),
            "free_fn" => "MPI_Grequest_free_function".into(),
            "cancel_fn" => "MPI_Grequest_cancel_function".into(),
            "read_conversion_fn" | "write_conversion_fn" => {
                "MPI_Datarep_conversion_function".into()
            }
            "dtype_file_extent_fn" => "MPI_Datarep_extent_function".into(),
            _ => String::new(),
        };
    }
}

/// The buffers of a converted procedure and how each reaches C.
fn buffers(s: &Specific) -> Vec<(usize, Buf)> {
    let args = &s.func.args;
    let mut out: Vec<(usize, Buf)> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a.fty != FTy::Choice {
            continue;
        }
        // A split collective's end only names the buffer its begin was given.
        let split_end = s.generic.starts_with("File_") && s.generic.ends_with("_end");
        if s.generic == "Get_address" || split_end {
            out.push((i, Buf::Address));
            continue;
        }
        // Its datatype: the next scalar MPI_Datatype before another buffer; its count: the
        // scalar integer just before that.
        let mut kind = Buf::Contiguous;
        for (j, b) in args.iter().enumerate().skip(i + 1) {
            if b.fty == FTy::Choice {
                break;
            }
            if b.cbase == "MPI_Datatype" {
                if b.dim == Dim::Scalar && b.conv == Conv::Value && j > i + 1 {
                    let c = &args[j - 1];
                    if c.conv == Conv::Value && c.name.contains("count") {
                        kind = Buf::Paired(j - 1, j);
                    }
                }
                break;
            }
        }
        out.push((i, kind));
    }
    // A datatype shared by two buffers (reductions) cannot describe both sections.
    let shared: Vec<usize> = out
        .iter()
        .filter_map(|(_, b)| match b {
            Buf::Paired(_, t) => Some(*t),
            _ => None,
        })
        .collect();
    for (_, b) in &mut out {
        if let Buf::Paired(_, t) = b {
            if shared.iter().filter(|x| *x == t).count() > 1 {
                *b = Buf::Contiguous;
            }
        }
    }
    out
}

fn rust_ty08(a: &Arg) -> &'static str {
    match a.fty {
        FTy::Choice | FTy::Char => "*const f08::Cdesc",
        _ => rust_ty(a),
    }
}

/// `src/bindings_f08.rs`.
pub fn emit_rust(specs: &[Specific], protos: &[Proto]) -> String {
    let mut s = String::new();
    s.push_str(
        "// @generated by stormpi-fortran-gen from core/include/mpi.h: do not edit.\n\
         //! The `mpi_f08` procedures: for each, a body (`f08_<name>::<PMPI>`) and its two `BIND(C)`\n\
         //! names (`MPI_Send_f08ts`, `PMPI_Send_f08ts`).\n\
         #![allow(non_snake_case, unused_unsafe, unused_variables, unused_mut, clippy::missing_safety_doc, clippy::too_many_arguments)]\n\
         #![allow(clippy::not_unsafe_ptr_arg_deref, clippy::needless_return, clippy::unnecessary_cast, clippy::let_unit_value)]\n\n\
         use core::ffi::{c_int, c_void};\n\n\
         use crate::f08;\n\
         use crate::rt::{self, MpiAint};\n\
         use crate::special;\n\n",
    );
    s.push_str("/// The C functions the bodies call.\n#[allow(dead_code)]\nmod c {\n    use super::*;\n\n    extern \"C\" {\n");
    for spec in specs
        .iter()
        .filter(|x| matches!(x.func.body, Body::Generic))
    {
        let Some(p) = protos.iter().find(|p| p.name == spec.c_name) else {
            continue;
        };
        let params: Vec<String> = p
            .params
            .iter()
            .enumerate()
            .map(|(i, q)| format!("a{i}: {}", c_extern_ty(q)))
            .collect();
        for prefix in ["MPI_", "PMPI_"] {
            let _ = writeln!(
                s,
                "        pub fn {prefix}{}({}) -> c_int;",
                p.name,
                params.join(", ")
            );
        }
    }
    s.push_str("    }\n}\n\n");
    for spec in specs {
        let f = &spec.func;
        let lower = f.lower();
        // Without BIND(C), strings come as gfortran passes them: the bytes, lengths last.
        let by_ref = spec.takes_procedure();
        let mut decl: Vec<String> = f
            .args
            .iter()
            .map(|a| {
                if by_ref && a.fty == FTy::Char {
                    format!("{}: *mut core::ffi::c_char", a.name)
                } else {
                    format!("{}: {}", a.name, rust_ty08(a))
                }
            })
            .collect();
        let mut call: Vec<String> = f.args.iter().map(|a| a.name.clone()).collect();
        if f.ret == Ret::Ierror {
            decl.push("ierror: *mut c_int".into());
            call.push("ierror".into());
        }
        for a in f.args.iter().filter(|a| by_ref && a.fty == FTy::Char) {
            decl.push(format!("{}_len: usize", a.name));
            call.push(format!("{}_len", a.name));
        }
        let (decl, call) = (decl.join(", "), call.join(", "));
        let ret = rust_ret(f);
        let _ = writeln!(
            s,
            "/// `MPI_{}` of `mpi_f08` (`PMPI` chooses the profiling C function).",
            spec.c_name
        );
        let _ = writeln!(
            s,
            "#[inline(always)]\nunsafe fn f08_{lower}<const PMPI: bool>({decl}){ret} {{"
        );
        match f.body {
            Body::Special if f.ret == Ret::Ierror => {
                // Strings arrive as descriptors; the hand-written procedure takes the bytes,
                // and the lengths after IERROR (the mpi binding's convention).
                let mut args = Vec::new();
                let mut lens = String::new();
                for a in &f.args {
                    let n = &a.name;
                    if a.fty == FTy::Char && by_ref {
                        args.push(n.clone());
                        let _ = write!(lens, ", {n}_len");
                    } else if a.fty == FTy::Char {
                        let _ = writeln!(s, "    let ({n}_s, {n}_len) = f08::string({n});");
                        args.push(format!("{n}_s"));
                        let _ = write!(lens, ", {n}_len");
                    } else {
                        args.push(n.clone());
                    }
                }
                let _ = writeln!(s, "    let mut rc: c_int = rt::SUCCESS;");
                let _ = writeln!(
                    s,
                    "    special::{lower}::<PMPI>({}&mut rc{lens});",
                    args.iter().map(|a| format!("{a}, ")).collect::<String>()
                );
                let _ = writeln!(s, "    f08::set_ierror(ierror, rc);");
            }
            Body::Special => {
                let args: Vec<&str> = f.args.iter().map(|a| a.name.as_str()).collect();
                let _ = writeln!(s, "    special::{lower}::<PMPI>({})", args.join(", "));
            }
            _ => emit_body(&mut s, spec),
        }
        s.push_str("}\n");
        for pmpi in [false, true] {
            let _ = writeln!(
                s,
                "#[no_mangle]\npub unsafe extern \"C\" fn {}({decl}){ret} {{\n    f08_{lower}::<{pmpi}>({call})\n}}",
                spec.symbol(pmpi)
            );
        }
        s.push('\n');
    }
    // Comparisons of handles.
    for h in HANDLES {
        let l = h.to_lowercase();
        let _ = writeln!(
            s,
            "/// `{h} == {h}` of `mpi_f08`.\n#[no_mangle]\npub unsafe extern \"C\" fn stormpi_f08_{l}_eq(a: *const c_int, b: *const c_int) -> c_int {{\n    if *a == *b {{ rt::TRUE }} else {{ rt::FALSE }}\n}}"
        );
        let _ = writeln!(
            s,
            "/// `{h} /= {h}` of `mpi_f08`.\n#[no_mangle]\npub unsafe extern \"C\" fn stormpi_f08_{l}_ne(a: *const c_int, b: *const c_int) -> c_int {{\n    if *a != *b {{ rt::TRUE }} else {{ rt::FALSE }}\n}}"
        );
    }
    s
}

fn emit_body(s: &mut String, spec: &Specific) {
    let f = &spec.func;
    let what = format!("MPI_{}", spec.c_name);
    let mut pre = String::new();
    let mut post = String::new();
    let mut cargs: Vec<String> = Vec::new();
    let bufs = buffers(spec);
    let mut replaced: BTreeMap<usize, String> = BTreeMap::new();
    for (i, b) in &bufs {
        let n = &f.args[*i].name;
        match b {
            Buf::Paired(c, t) => {
                let (cn, tn) = (&f.args[*c].name, &f.args[*t].name);
                let _ = writeln!(pre, "    let mut {n}_s = f08::Section::new();");
                let _ = writeln!(
                    pre,
                    "    let ({n}_p, {n}_n, {n}_t) = match {n}_s.paired({n}, *{cn} as i64, *{tn}, {what:?}) {{ Ok(v) => v, Err(rc) => return f08::set_ierror(ierror, rc) }};"
                );
                replaced.insert(*i, format!("{n}_p"));
                replaced.insert(*c, format!("{n}_n as _"));
                replaced.insert(*t, format!("{n}_t"));
            }
            Buf::Contiguous => {
                let _ = writeln!(
                    pre,
                    "    let {n}_p = match f08::contiguous({n}, {what:?}) {{ Ok(p) => p, Err(rc) => return f08::set_ierror(ierror, rc) }};"
                );
                replaced.insert(*i, format!("{n}_p"));
            }
            Buf::Address => {
                replaced.insert(*i, format!("f08::address({n})"));
            }
        }
    }
    let flag = f
        .args
        .iter()
        .any(|a| a.conv == Conv::LogicalOut && a.name == "flag");
    for (i, a) in f.args.iter().enumerate() {
        let n = &a.name;
        if let Some(r) = replaced.get(&i) {
            cargs.push(r.clone());
            continue;
        }
        if let Some(c) = common_arg(f, a, &mut pre, &mut post) {
            cargs.push(c);
            continue;
        }
        match &a.conv {
            Conv::Buffer => cargs.push(format!("f08::address({n})")),
            Conv::StrIn => {
                let _ = writeln!(pre, "    let ({n}_s, {n}_len) = f08::string({n});");
                let _ = writeln!(pre, "    let mut {n}_c = [0u8; rt::STRING_IN_MAX];");
                let _ = writeln!(
                    pre,
                    "    if !rt::{}({n}_s, {n}_len, &mut {n}_c) {{ return f08::set_ierror(ierror, rt::string_too_long({what:?})); }}",
                    string_in_fn(&f.name)
                );
                cargs.push(format!("{n}_c.as_mut_ptr().cast()"));
            }
            Conv::StrOut(size) => {
                let _ = writeln!(pre, "    let ({n}_s, {n}_len) = f08::string({n});");
                let _ = writeln!(pre, "    let mut {n}_c = [0u8; {size}];");
                cargs.push(format!("{n}_c.as_mut_ptr().cast()"));
                let cond = if flag {
                    "rc == rt::SUCCESS && *flag != 0"
                } else {
                    "rc == rt::SUCCESS"
                };
                let _ = writeln!(
                    post,
                    "    if {cond} {{ rt::string_out({n}_s, {n}_len, &{n}_c); }}"
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
        spec.c_name
    );
    s.push_str(&post);
    s.push_str("    f08::set_ierror(ierror, rc);\n");
}

/// The handle type a `#define` casts to, following names (`MPI_LONG_LONG` is
/// `MPI_LONG_LONG_INT`).
fn handle_of(map: &BTreeMap<&str, &str>, name: &str, depth: u32) -> Option<&'static str> {
    if depth > 8 {
        return None;
    }
    let v = map.get(name)?.trim().trim_start_matches('(');
    if let Some(h) = HANDLES.iter().find(|h| v.starts_with(&format!("{h})"))) {
        return Some(h);
    }
    let v = v.trim_end_matches(')');
    if v.starts_with("MPI_") && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return handle_of(map, v, depth + 1);
    }
    None
}

fn f08_decl(a: &Arg) -> String {
    let handle = HANDLES.contains(&a.cbase.as_str());
    let ty = match a.fty {
        FTy::Integer if handle => format!("TYPE({})", a.cbase),
        FTy::Integer if matches!(a.dim, Dim::Status | Dim::Statuses) => "TYPE(MPI_Status)".into(),
        FTy::Integer => "INTEGER".into(),
        FTy::Logical => "LOGICAL".into(),
        FTy::Aint => "INTEGER(KIND=MPI_ADDRESS_KIND)".into(),
        FTy::Offset => "INTEGER(KIND=MPI_OFFSET_KIND)".into(),
        FTy::Count => "INTEGER(KIND=MPI_COUNT_KIND)".into(),
        FTy::Char => "CHARACTER(LEN=*)".into(),
        FTy::Choice => "TYPE(*), DIMENSION(..)".into(),
        FTy::External => format!("PROCEDURE({})", a.cbase),
    };
    let intent = match a.conv {
        Conv::Value | Conv::LogicalValue | Conv::StrIn | Conv::FileValue => ", INTENT(IN)",
        _ => "",
    };
    let dim = match (a.fty, a.dim) {
        (FTy::Choice, _) | (_, Dim::Scalar) | (_, Dim::Status) => "",
        (_, Dim::Star) | (_, Dim::Statuses) => "(*)",
        (_, Dim::Triples) => "(3,*)",
        (_, Dim::ByCount) => "(count,*)",
    };
    format!("      {ty}{intent} :: {}{dim}", a.name)
}

/// The intrinsic types and kinds of `MPI_SIZEOF` (gfortran's on x86_64): the letter of the
/// link name (`stormpi_sizeof_i4`), the Fortran type, the kinds.
const SIZEOF_KINDS: &[(&str, &str, &[u32])] = &[
    ("i", "integer", &[1, 2, 4, 8, 16]),
    ("r", "real", &[4, 8, 10, 16]),
    ("c", "complex", &[4, 8, 10, 16]),
    ("l", "logical", &[1, 2, 4, 8]),
];

/// The generic `MPI_SIZEOF` (and `PMPI_SIZEOF`) of both modules: one `BIND(C)` specific per
/// type and kind, each reading the element size from the descriptor (`src/f08.rs`).
pub fn sizeof_interface(optional_ierror: bool) -> String {
    let mut s = String::new();
    let opt = if optional_ierror { ", OPTIONAL" } else { "" };
    for p in ["MPI", "PMPI"] {
        let _ = writeln!(s, "  interface {p}_SIZEOF");
        for (letter, ty, kinds) in SIZEOF_KINDS {
            for k in *kinds {
                let _ = writeln!(
                    s,
                    "    subroutine {p}_Sizeof_{letter}{k}(x, size, ierror) bind(C, name='stormpi_sizeof_{letter}{k}')\n      {ty}(kind={k}), dimension(..) :: x\n      integer :: size\n      integer{opt}, intent(out) :: ierror\n    end subroutine {p}_Sizeof_{letter}{k}"
                );
            }
        }
        s.push_str("  end interface\n");
    }
    s
}

/// The procedures the library calls back: what C passes (pointers to the buffers, the count,
/// the handle, the error code) is what these take by reference.
const ABSTRACT_INTERFACES: &str = "\
  abstract interface
    subroutine MPI_User_function(invec, inoutvec, len, datatype)
      use, intrinsic :: iso_c_binding, only: c_ptr
      import
      type(c_ptr), value :: invec, inoutvec
      integer :: len
      type(MPI_Datatype) :: datatype
    end subroutine MPI_User_function
    subroutine MPI_Comm_errhandler_function(comm, error_code)
      import
      type(MPI_Comm) :: comm
      integer :: error_code
    end subroutine MPI_Comm_errhandler_function
    subroutine MPI_Win_errhandler_function(win, error_code)
      import
      type(MPI_Win) :: win
      integer :: error_code
    end subroutine MPI_Win_errhandler_function
    subroutine MPI_File_errhandler_function(file, error_code)
      import
      type(MPI_File) :: file
      integer :: error_code
    end subroutine MPI_File_errhandler_function
    subroutine MPI_Session_errhandler_function(session, error_code)
      import
      type(MPI_Session) :: session
      integer :: error_code
    end subroutine MPI_Session_errhandler_function
";

/// An attribute copy and delete callback's interface per object kind (the library calls them
/// through its Fortran keyval trampolines, every argument by reference).
fn attr_interfaces() -> String {
    let mut s = String::new();
    for (prefix, handle, obj) in [
        ("MPI_Comm", "MPI_Comm", "comm"),
        ("MPI_Type", "MPI_Datatype", "datatype"),
        ("MPI_Win", "MPI_Win", "win"),
    ] {
        let k = prefix[4..].to_lowercase();
        let _ = writeln!(
            s,
            "    subroutine {prefix}_copy_attr_function(old{k}, {k}_keyval, extra_state, &\n        attribute_val_in, attribute_val_out, flag, ierror)\n      import\n      type({handle}) :: old{k}\n      integer :: {k}_keyval, ierror\n      integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out\n      logical :: flag\n    end subroutine {prefix}_copy_attr_function"
        );
        let _ = writeln!(
            s,
            "    subroutine {prefix}_delete_attr_function({obj}, {k}_keyval, attribute_val, extra_state, &\n        ierror)\n      import\n      type({handle}) :: {obj}\n      integer :: {k}_keyval, ierror\n      integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state\n    end subroutine {prefix}_delete_attr_function"
        );
    }
    s.push_str(GREQUEST_INTERFACES);
    s.push_str(&datarep_interfaces());
    s
}

/// A user data representation's callbacks: the conversions (default and large count) and the
/// file extent; the library's trampolines pass the buffers' addresses and the rest by
/// reference.
fn datarep_interfaces() -> String {
    let mut s = String::new();
    for (suffix, count) in [("", "INTEGER"), ("_c", "INTEGER(KIND=MPI_COUNT_KIND)")] {
        let name = format!("MPI_Datarep_conversion_function{suffix}");
        let _ = writeln!(
            s,
            "    subroutine {name}(userbuf, datatype, count, filebuf, &\n        position, extra_state, ierror)\n      use, intrinsic :: iso_c_binding, only: c_ptr\n      import\n      type(c_ptr), value :: userbuf, filebuf\n      type(MPI_Datatype) :: datatype\n      {count} :: count\n      integer(kind=MPI_OFFSET_KIND) :: position\n      integer(kind=MPI_ADDRESS_KIND) :: extra_state\n      integer :: ierror\n    end subroutine {name}"
        );
    }
    s.push_str(
        "    subroutine MPI_Datarep_extent_function(datatype, extent, extra_state, ierror)\n      import\n      type(MPI_Datatype) :: datatype\n      integer(kind=MPI_ADDRESS_KIND) :: extent, extra_state\n      integer :: ierror\n    end subroutine MPI_Datarep_extent_function\n",
    );
    s
}

/// The generalized request's callbacks.
const GREQUEST_INTERFACES: &str = "\
    subroutine MPI_Grequest_query_function(extra_state, status, ierror)
      import
      integer(kind=MPI_ADDRESS_KIND) :: extra_state
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine MPI_Grequest_query_function
    subroutine MPI_Grequest_free_function(extra_state, ierror)
      import
      integer(kind=MPI_ADDRESS_KIND) :: extra_state
      integer :: ierror
    end subroutine MPI_Grequest_free_function
    subroutine MPI_Grequest_cancel_function(extra_state, complete, ierror)
      import
      integer(kind=MPI_ADDRESS_KIND) :: extra_state
      logical :: complete
      integer :: ierror
    end subroutine MPI_Grequest_cancel_function
";

/// `MPI_Buffer_detach` of `mpi_f08` hands out the buffer's address as a `TYPE(C_PTR)`, which C's
/// function writes where its `void *` argument points; the procedures are in `src/f08.rs`.
const BUFFER_DETACH: &[(&str, &str)] = &[
    ("MPI_Buffer_detach_f08", "INTEGER"),
    ("MPI_Buffer_detach_c_f08", "INTEGER(KIND=MPI_COUNT_KIND)"),
];

fn buffer_detach_interfaces() -> String {
    let mut s = String::new();
    for p in ["MPI", "PMPI"] {
        let _ = writeln!(s, "  interface {p}_Buffer_detach");
        for (name, size) in BUFFER_DETACH {
            let name = format!("{p}{}", &name[3..]);
            let _ = writeln!(
                s,
                "    subroutine {name}(buffer_addr, size, ierror) bind(C, name='{name}')\n      use, intrinsic :: iso_c_binding, only: c_ptr\n      import\n      implicit none\n      TYPE(c_ptr), INTENT(OUT) :: buffer_addr\n      {size}, INTENT(OUT) :: size\n      INTEGER, OPTIONAL, INTENT(OUT) :: ierror\n    end subroutine {name}"
            );
        }
        s.push_str("  end interface\n");
    }
    s
}

/// The predefined attribute callbacks and null conversions: the `mpi` binding's procedures
/// (`mpi_comm_dup_fn_`), whose arguments are the same references (`mpi_conversion_fn_null_c_`
/// is `mpi_f08`'s alone).
const PREDEFINED_CALLBACKS: &str = "\
  procedure(MPI_Comm_copy_attr_function) :: MPI_COMM_NULL_COPY_FN, MPI_COMM_DUP_FN
  procedure(MPI_Comm_delete_attr_function) :: MPI_COMM_NULL_DELETE_FN
  procedure(MPI_Type_copy_attr_function) :: MPI_TYPE_NULL_COPY_FN, MPI_TYPE_DUP_FN
  procedure(MPI_Type_delete_attr_function) :: MPI_TYPE_NULL_DELETE_FN
  procedure(MPI_Win_copy_attr_function) :: MPI_WIN_NULL_COPY_FN, MPI_WIN_DUP_FN
  procedure(MPI_Win_delete_attr_function) :: MPI_WIN_NULL_DELETE_FN
  procedure(MPI_Datarep_conversion_function) :: MPI_CONVERSION_FN_NULL
  procedure(MPI_Datarep_conversion_function_c) :: MPI_CONVERSION_FN_NULL_C
";

/// `include/mpi_f08.f90`.
pub fn emit_module(
    consts: &[(String, i64)],
    defines: &[(String, String)],
    specs: &[Specific],
) -> String {
    let map: BTreeMap<&str, &str> = defines
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let mut s = String::from(
        "! mpi_f08.f90 - the `mpi_f08` module of stormpi (compiled at install by the installed gfortran).\n",
    );
    s.push_str(HEADER_NOTE);
    s.push_str("module mpi_f08\n  use, intrinsic :: iso_c_binding, only: c_int, c_char, c_double\n  implicit none\n");
    s.push_str("  private :: c_int, c_char, c_double\n\n");
    for h in HANDLES {
        let _ = writeln!(
            s,
            "  type, bind(C) :: {h}\n    integer :: MPI_VAL\n  end type {h}"
        );
    }
    s.push_str(
        "  ! C's MPI_Status: the count and cancelled flag first (MPICH's hidden fields).\n  type, bind(C) :: MPI_Status\n    integer :: count_lo\n    integer :: count_hi_and_cancelled\n    integer :: MPI_SOURCE\n    integer :: MPI_TAG\n    integer :: MPI_ERROR\n  end type MPI_Status\n\n",
    );
    for (name, v) in consts {
        match handle_of(&map, name, 0) {
            Some(h) => {
                let _ = writeln!(s, "  type({h}), parameter :: {name} = {h}({v})");
            }
            None => {
                let _ = writeln!(s, "  integer, parameter :: {name} = {v}");
            }
        }
    }
    s.push_str(
        "  integer(kind=MPI_OFFSET_KIND), parameter :: MPI_DISPLACEMENT_CURRENT = -54278278\n",
    );
    s.push_str("  ! Non-contiguous sections work where a buffer has its own count and datatype\n");
    s.push_str("  ! (point-to-point, most collectives); elsewhere they are MPI_ERR_BUFFER.\n");
    s.push_str("  logical, parameter :: MPI_SUBARRAYS_SUPPORTED = .FALSE.\n");
    s.push_str("  logical, parameter :: MPI_ASYNC_PROTECTS_NONBLOCKING = .FALSE.\n\n");
    s.push_str(
        "  ! Sentinels: the library's variables (the `mpi` module's), recognized by address.\n\
         \x20 integer(c_int), bind(C, name='stormpi_f_bottom') :: MPI_BOTTOM\n\
         \x20 integer(c_int), bind(C, name='stormpi_f_in_place') :: MPI_IN_PLACE\n\
         \x20 type(MPI_Status), bind(C, name='stormpi_f_status_ignore') :: MPI_STATUS_IGNORE\n\
         \x20 type(MPI_Status), bind(C, name='stormpi_f_statuses_ignore') :: MPI_STATUSES_IGNORE(1)\n\
         \x20 integer(c_int), bind(C, name='stormpi_f_errcodes_ignore') :: MPI_ERRCODES_IGNORE(1)\n\
         \x20 integer(c_int), bind(C, name='stormpi_f_unweighted') :: MPI_UNWEIGHTED(1)\n\
         \x20 integer(c_int), bind(C, name='stormpi_f_weights_empty') :: MPI_WEIGHTS_EMPTY(1)\n\
         \x20 character(kind=c_char, len=1), bind(C, name='stormpi_f_argvs_null') :: MPI_ARGVS_NULL(1,1)\n\
         \x20 character(kind=c_char, len=1), bind(C, name='stormpi_f_argv_null') :: MPI_ARGV_NULL(1)\n\n",
    );
    // Comparisons.
    for (op, suffix) in [("==", "eq"), ("/=", "ne")] {
        let _ = writeln!(s, "  interface operator({op})");
        for h in HANDLES {
            let l = h.to_lowercase();
            let _ = writeln!(
                s,
                "    pure logical function stormpi_f08_{l}_{suffix}(a, b) bind(C, name='stormpi_f08_{l}_{suffix}')\n      import\n      type({h}), intent(in) :: a, b\n    end function stormpi_f08_{l}_{suffix}"
            );
        }
        s.push_str("  end interface\n");
    }
    s.push_str(ABSTRACT_INTERFACES);
    s.push_str(&attr_interfaces());
    s.push_str("  end interface\n");
    s.push_str(PREDEFINED_CALLBACKS);
    s.push_str(&sizeof_interface(true));
    // Wtime and Wtick are C's own functions.
    for p in ["MPI", "PMPI"] {
        for w in ["Wtime", "Wtick"] {
            let _ = writeln!(
                s,
                "  interface\n    function {p}_{w}() bind(C, name='{p}_{w}')\n      import\n      real(c_double) :: {p}_{w}\n    end function {p}_{w}\n  end interface"
            );
        }
    }
    let mut generics: BTreeMap<String, Vec<&Specific>> = BTreeMap::new();
    for spec in specs {
        generics.entry(spec.generic.clone()).or_default().push(spec);
    }
    for (generic, list) in &generics {
        for pmpi in [false, true] {
            let p = if pmpi { "PMPI" } else { "MPI" };
            let _ = writeln!(s, "  interface {p}_{generic}");
            for spec in list {
                let f = &spec.func;
                let link = spec.link(pmpi);
                let mut names: Vec<String> = f.args.iter().map(|a| a.name.clone()).collect();
                if f.ret == Ret::Ierror {
                    names.push("ierror".into());
                }
                let bind = if spec.takes_procedure() {
                    String::new()
                } else {
                    format!(" bind(C, name='{link}')")
                };
                let head = match f.ret {
                    Ret::Ierror | Ret::Nothing => {
                        format!("    subroutine {link}({}){bind}", names.join(", "))
                    }
                    Ret::Double => format!(
                        "    double precision function {link}({}) bind(C, name='{link}')",
                        names.join(", ")
                    ),
                    Ret::Aint => format!(
                        "    integer(kind=MPI_ADDRESS_KIND) function {link}({}) bind(C, name='{link}')",
                        names.join(", ")
                    ),
                };
                let _ = writeln!(s, "{}", wrap(&head));
                s.push_str("      import\n      implicit none\n");
                for a in &f.args {
                    let mut decl = f08_decl(a);
                    if a.fty == FTy::Choice && spec.asynchronous() {
                        // TARGET too: gfortran (12) otherwise tells the optimizer that the
                        // buffer's address does not outlive the call, and code after it may
                        // keep the buffer in registers across MPI_Wait or fold comparisons
                        // with the address MPI_Buffer_detach returns.
                        decl = decl.replacen(" ::", ", ASYNCHRONOUS, TARGET ::", 1);
                    }
                    let _ = writeln!(s, "{decl}");
                }
                if f.ret == Ret::Ierror {
                    s.push_str("      INTEGER, OPTIONAL, INTENT(OUT) :: ierror\n");
                }
                let end = if matches!(f.ret, Ret::Ierror | Ret::Nothing) {
                    "subroutine"
                } else {
                    "function"
                };
                let _ = writeln!(s, "    end {end} {link}");
            }
            s.push_str("  end interface\n");
        }
    }
    s.push_str(&buffer_detach_interfaces());
    s.push_str("end module mpi_f08\n");
    s
}

/// One line per `mpi_f08` procedure: bound, or not (and why).
pub fn coverage(specs: &[Specific], left: &[(String, String)]) -> String {
    let mut s = String::from(
        "# mpi_f08 procedures of stormpi's binding (generated by stormpi-fortran-gen)\n",
    );
    let mut lines: Vec<(String, String)> = specs
        .iter()
        .map(|x| {
            (
                x.c_name.to_lowercase(),
                format!("bound    {}", x.symbol(false)),
            )
        })
        .collect();
    for w in ["Wtick", "Wtime"] {
        lines.push((
            w.to_lowercase(),
            format!("bound    MPI_{w} (the C function itself)"),
        ));
    }
    for (name, _) in BUFFER_DETACH {
        lines.push((
            name[4..].to_lowercase(),
            format!("bound    {name} (by hand: TYPE(C_PTR))"),
        ));
    }
    for (n, why) in left {
        lines.push((n.to_lowercase(), format!("not-bound MPI_{n}: {why}")));
    }
    lines.sort();
    for (_, l) in &lines {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(
        s,
        "# {} specific procedures bound (each also as PMPI_), {} not in mpi_f08",
        specs.len() + BUFFER_DETACH.len(),
        left.len()
    );
    s
}
