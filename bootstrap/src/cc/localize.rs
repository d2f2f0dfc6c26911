//! Keeping a static MPI library to MPI's own symbols.
//!
//! A Rust static library is the whole Rust program as objects: besides MPI's
//! functions, `libmpi.a` as cargo writes it defines the Rust runtime (mangled
//! names, `rust_eh_personality`, the allocator shims), compiler-rt helpers
//! (`__mulvdi3`, ...) and, as weak symbols, compiler_builtins' libm (`cbrt`,
//! `fmod`, `floor`, `fma`, ...). A static link that pulls such a member in
//! binds the program's own calls to it — a definition in an object beats the
//! one in `libm.so`, weak or not — and the program's math changes: `g++`
//! moves a user's `-lm` behind everything else, so in a C++ link `libmpi.a`
//! is searched first and Rust's `cbrt` (last bit off from glibc's) wins.
//!
//! [`localize`] rewrites such an archive into one relocatable object whose
//! only global symbols are MPI's ([`is_exported`]):
//!
//! 1. a partial link (`ld -r`) rooted at the exported symbols pulls in the
//!    members they need and binds their references to each other;
//!    `--gc-sections` drops what no exported symbol reaches (a final link
//!    would have left those members out); references to the C library stay
//!    undefined; `--force-group-allocation` dissolves COMDAT groups, whose
//!    signatures are about to become local names;
//! 2. `objcopy --keep-global-symbols` makes every other defined symbol local
//!    (and drops the embedded LLVM bitcode, see [`localize`]);
//! 3. `ar` packs the object into a new archive, renamed over the old one.
//!
//! The binutils are the C compiler's (`cc -print-prog-name=ld`), so a cross
//! compiler's tools handle a foreign archive. [`is_localized`] reads only the
//! archive's symbol index, cheap enough for `stormcc` to ask before each link.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Prefixes of the symbols a static MPI library may define globally: the C
/// bindings and their profiling twins, the Fortran names (`mpi_send_`), and
/// stormpi's own internal names — what `ci/check-symbols.sh` allows — and
/// defmt's link-time interface (`_defmt_acquire`, `__defmt_default_timestamp`),
/// which only the node library built with defmt defines and defmt's linker
/// script names.
pub const EXPORTED_PREFIXES: &[&str] = &[
    "MPI_", "PMPI_", "mpi_", "pmpi_", "stormpi_", "_defmt_", "__defmt_",
];

/// Exported names outside those prefixes: MPICH's `MPIR_Dup_fn`
/// (`MPICH_COMPAT_FUNCTIONS` in `core/src/capi/names.rs`; the symbol check
/// fails if a name there is missing here, as the library would lack it), and
/// the Fortran binding's common blocks (`fortran/src/rt.rs`: `MPI_BOTTOM`,
/// `MPI_IN_PLACE`, `MPI_STATUS_IGNORE`, ... live in them; a local copy would
/// give the program common blocks of its own, at addresses the library does
/// not recognize).
pub const EXPORTED_NAMES: &[&str] = &[
    "MPIR_Dup_fn",
    "mpifcmb5_",
    "mpifcmb9_",
    "mpipriv1_",
    "mpipriv2_",
    "mpiprivc_",
];

/// Whether the static library keeps `name` global. Only C identifiers: defmt
/// also names data `_defmt_version_ = 4`, which its decoder finds as well
/// when local, and which the tools' symbol lists could not hold.
pub fn is_exported(name: &[u8]) -> bool {
    let identifier = name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_');
    identifier
        && (EXPORTED_PREFIXES
            .iter()
            .any(|p| name.starts_with(p.as_bytes()))
            || EXPORTED_NAMES.iter().any(|n| name == n.as_bytes()))
}

/// The names in the symbol index of the System V/GNU archive `path` (the
/// global and weak symbols its members define), read without the members.
pub fn archive_symbols(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let what = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut file = File::open(path).map_err(what)?;
    let mut head = [0u8; 8 + 60];
    file.read_exact(&mut head).map_err(what)?;
    let (wide, size) = index_header(&head).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut body = vec![0u8; size];
    file.read_exact(&mut body).map_err(what)?;
    parse_index(&body, wide).map_err(|e| format!("{}: {e}", path.display()))
}

/// From the archive magic and the first member header: whether the first
/// member is the 64-bit index (`/SYM64/`) or the 32-bit one (`/`), and its
/// size.
fn index_header(head: &[u8; 68]) -> Result<(bool, usize), String> {
    if &head[..8] != b"!<arch>\n" {
        return Err("not an ar archive".into());
    }
    let member = &head[8..];
    let wide = match trim(&member[..16]) {
        b"/" => false,
        b"/SYM64/" => true,
        _ => return Err("the archive has no symbol index (ranlib makes one)".into()),
    };
    let size = std::str::from_utf8(trim(&member[48..58]))
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("malformed archive member header")?;
    Ok((wide, size))
}

fn trim(field: &[u8]) -> &[u8] {
    let end = field.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    &field[..end]
}

/// The names of a symbol index: a big-endian count (4 or 8 bytes), that many
/// member offsets of the same width, then the names, each ended by a NUL.
fn parse_index(body: &[u8], wide: bool) -> Result<Vec<Vec<u8>>, String> {
    let width = if wide { 8 } else { 4 };
    let word = |i: usize| -> Option<usize> {
        let bytes = body.get(i * width..(i + 1) * width)?;
        let value = bytes.iter().fold(0u64, |v, &b| (v << 8) | u64::from(b));
        usize::try_from(value).ok()
    };
    let bad = || "truncated archive symbol index".to_string();
    let count = word(0).ok_or_else(bad)?;
    let start = count
        .checked_add(1)
        .and_then(|n| n.checked_mul(width))
        .ok_or_else(bad)?;
    let mut rest = body.get(start..).ok_or_else(bad)?;
    let mut names = Vec::with_capacity(count.min(rest.len()));
    for _ in 0..count {
        let end = rest.iter().position(|&b| b == 0).ok_or_else(bad)?;
        names.push(rest[..end].to_vec());
        rest = &rest[end + 1..];
    }
    Ok(names)
}

/// Whether every symbol the archive `path` defines globally is exported.
pub fn is_localized(path: &Path) -> Result<bool, String> {
    Ok(archive_symbols(path)?.iter().all(|s| is_exported(s)))
}

/// Rewrites the archive `path` as described in the module documentation,
/// unless it is localized already; `compiler` (its command words) names the
/// binutils to use. Returns whether it rewrote the archive. Concurrent calls
/// (parallel `make` running several links) wait for each other, and the
/// archive is replaced by a rename, so a linker reading it never sees half.
pub fn localize(path: &Path, compiler: &[OsString]) -> Result<bool, String> {
    if is_localized(path)? {
        return Ok(false);
    }
    // The lock is on the archive cargo (or the last localize) wrote; whoever
    // waited for it finds the path renamed to a localized one.
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    crate::sys::lock_exclusive(&file).map_err(|e| format!("{}: {e}", path.display()))?;
    if is_localized(path)? {
        return Ok(false);
    }
    let exported: Vec<String> = archive_symbols(path)?
        .into_iter()
        .filter(|s| is_exported(s))
        .map(|s| String::from_utf8_lossy(&s).into_owned())
        .collect();
    if exported.is_empty() {
        return Err(format!("{}: defines no MPI symbol to keep", path.display()));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?
        .to_string_lossy()
        .into_owned();
    let work = WorkDir::create(dir.join(format!(".{file_name}.localize-{}", std::process::id())))?;
    let stem = file_name.strip_suffix(".a").unwrap_or(&file_name);
    let object = work.0.join(format!("{stem}.o"));
    let roots = work.0.join("roots");
    let keep = work.0.join("keep");
    let new = work.0.join(&file_name);
    let roots_text: String = exported.iter().map(|s| format!("-u {s}\n")).collect();
    let keep_text: String = exported.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(&roots, roots_text).map_err(|e| format!("{}: {e}", roots.display()))?;
    std::fs::write(&keep, keep_text).map_err(|e| format!("{}: {e}", keep.display()))?;

    let mut ld = Command::new(tool(compiler, "ld")?);
    ld.args(["-r", "--gc-sections", "--force-group-allocation", "-o"])
        .arg(&object)
        .arg(concat("@", &roots))
        .arg(path);
    run(&mut ld)?;
    let mut objcopy = Command::new(tool(compiler, "objcopy")?);
    // Rust's std objects embed their LLVM bitcode (`.llvmbc`, excluded from
    // links); merged into one section it is no valid module any more, and
    // the LLVM linker plugin GNU ar and ld load crash on it.
    objcopy
        .arg(concat("--keep-global-symbols=", &keep))
        .args(["--remove-section=.llvmbc", "--remove-section=.llvmcmd"])
        .arg(&object);
    run(&mut objcopy)?;
    let mut ar = Command::new(tool(compiler, "ar")?);
    ar.arg("rcsD").arg(&new).arg(&object);
    run(&mut ar)?;
    if !is_localized(&new)? {
        return Err(format!(
            "{}: still defines global symbols other than MPI's after objcopy",
            new.display()
        ));
    }
    std::fs::rename(&new, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

/// A scratch directory beside the archive (so the new archive can be renamed
/// over the old one), removed when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create(path: PathBuf) -> Result<WorkDir, String> {
        // A leftover of a killed run with the same pid is ours to replace.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(WorkDir(path))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn concat(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(path);
    s
}

/// The compiler's own `ld`, `objcopy` or `ar` (a cross compiler names its
/// target's; a native one answers the bare name, found through `PATH`).
fn tool(compiler: &[OsString], name: &str) -> Result<OsString, String> {
    let (first, rest) = compiler
        .split_first()
        .ok_or("no C compiler to ask for binutils")?;
    let mut cmd = Command::new(first);
    cmd.args(rest).arg(format!("-print-prog-name={name}"));
    let out = run(&mut cmd)?;
    let path = String::from_utf8_lossy(&out).trim().to_string();
    Ok(if path.is_empty() {
        name.into()
    } else {
        path.into()
    })
}

/// Runs `cmd`, returning its standard output, or an error naming the command
/// and quoting what it said.
fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let line = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {line}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{line} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_names_are_exported_and_runtime_names_are_not() {
        for name in [
            "MPI_Send",
            "PMPI_Send",
            "MPI_COMM_DUP_FN",
            "MPI_F_STATUS_IGNORE",
            "MPIR_Dup_fn",
            "mpi_send_",
            "stormpi_anything",
            "_defmt_acquire",
            "__defmt_default_timestamp",
        ] {
            assert!(is_exported(name.as_bytes()), "{name}");
        }
        for name in [
            "cbrt",
            "fmod",
            "memcpy",
            "__mulvdi3",
            "rust_eh_personality",
            "DW.ref.rust_eh_personality",
            "_ZN4core3fmt5write17h0123456789abcdefE",
            "_RNvCsfLfy6EI15iL_7___rustc12___rust_alloc",
            "MPIR_Err_create_code",
            "MPI",
            "_defmt_version_ = 4",
            "MPI_Send x",
        ] {
            assert!(!is_exported(name.as_bytes()), "{name}");
        }
    }

    fn index(wide: bool, names: &[&str]) -> Vec<u8> {
        let width = if wide { 8 } else { 4 };
        let mut body = Vec::new();
        let word = |v: u64| v.to_be_bytes()[8 - width..].to_vec();
        body.extend(word(names.len() as u64));
        for i in 0..names.len() {
            body.extend(word(1000 + i as u64));
        }
        for n in names {
            body.extend(n.as_bytes());
            body.push(0);
        }
        body
    }

    #[test]
    fn index_names_are_read_in_both_widths() {
        for wide in [false, true] {
            let body = index(wide, &["MPI_Init", "cbrt", "x"]);
            let names = parse_index(&body, wide).unwrap();
            assert_eq!(names, [&b"MPI_Init"[..], b"cbrt", b"x"]);
        }
        assert_eq!(parse_index(&index(false, &[]), false).unwrap().len(), 0);
    }

    #[test]
    fn truncated_or_absurd_indexes_are_errors_not_panics() {
        let body = index(false, &["MPI_Init", "cbrt"]);
        for cut in 0..body.len() - 1 {
            assert!(parse_index(&body[..cut], false).is_err(), "cut at {cut}");
        }
        let absurd = [0xffu8; 16];
        assert!(parse_index(&absurd, true).is_err());
        assert!(parse_index(&absurd, false).is_err());
    }

    fn header(name: &str, size: &str) -> [u8; 68] {
        let mut head = [b' '; 68];
        head[..8].copy_from_slice(b"!<arch>\n");
        head[8..8 + name.len()].copy_from_slice(name.as_bytes());
        head[56..56 + size.len()].copy_from_slice(size.as_bytes());
        head
    }

    fn cc(dir: &Path, args: &[&str]) {
        let out = Command::new("cc").current_dir(dir).args(args).output();
        let out = out.expect("running cc");
        assert!(out.status.success(), "cc {args:?}: {out:?}");
    }

    /// The whole rewrite on a small archive built by the system's compiler: a library whose
    /// `MPI_Foo` uses its own `helper` and a weak `cbrt` links into a program that defines
    /// both names itself — each side keeps its own — and a member nothing exported reaches
    /// is gone.
    #[test]
    fn localized_archive_links_beside_the_programs_own_names() {
        let dir = std::env::temp_dir().join(format!("stormpi-localize-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let files = [
            (
                "a.c",
                "__attribute__((weak)) double cbrt(double x) { return x + 0.5; }\n\
                 int helper(int x) { return x + 1; }\n\
                 int MPI_Foo(int x) { return helper(x) + (int)cbrt(10.0); }\n",
            ),
            ("b.c", "int unreached(void) { return 3; }\n"),
            (
                "main.c",
                "#include <math.h>\n#include <stdio.h>\nint MPI_Foo(int);\n\
                 int helper(int x) { return 100 + x; }\n\
                 int main(void) { volatile double e = 8.0;\n\
                 printf(\"%d %d %g\\n\", MPI_Foo(1), helper(0), cbrt(e)); return 0; }\n",
            ),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        cc(
            &dir,
            &["-c", "-fno-builtin", "-ffunction-sections", "a.c", "b.c"],
        );
        let ar = Command::new("ar")
            .current_dir(&dir)
            .args(["rcs", "libmpi.a", "a.o", "b.o"])
            .status();
        assert!(ar.unwrap().success());
        let lib = dir.join("libmpi.a");
        assert!(!is_localized(&lib).unwrap());

        assert_eq!(localize(&lib, &["cc".into()]), Ok(true));
        assert_eq!(archive_symbols(&lib).unwrap(), [b"MPI_Foo".to_vec()]);
        assert_eq!(localize(&lib, &["cc".into()]), Ok(false), "done once");
        let symbols = Command::new("readelf").arg("-sW").arg(&lib).output();
        let symbols = String::from_utf8(symbols.unwrap().stdout).unwrap();
        assert!(!symbols.contains("unreached"), "{symbols}");

        // MPI_Foo uses the library's helper and cbrt (2 + 10); main the program's helper and libm's
        // cbrt (2, not the library's 8.5).
        cc(&dir, &["-o", "prog", "main.c", "libmpi.a", "-lm"]);
        let out = Command::new(dir.join("prog")).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "12 100 2\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_first_member_must_be_an_index() {
        assert_eq!(index_header(&header("/", "1234")), Ok((false, 1234)));
        assert_eq!(index_header(&header("/SYM64/", "8")), Ok((true, 8)));
        assert!(index_header(&header("//", "8")).is_err());
        assert!(index_header(&header("libmpi.o/", "8")).is_err());
        assert!(index_header(&header("/", "12x")).is_err());
        let mut not_ar = header("/", "8");
        not_ar[0] = b'?';
        assert!(index_header(&not_ar).is_err());
    }
}
