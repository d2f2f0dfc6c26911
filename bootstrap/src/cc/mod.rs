//! The compiler wrapper behind `stormcc` (installed also as `mpicc`),
//! `stormcxx` (`mpicxx`, `mpic++`) and `stormfort` (`mpifort`, `mpif90`,
//! `mpif77`): it runs the system C, C++ or Fortran compiler with what an MPI
//! program needs added.
//!
//! ```text
//! stormcc [--dynamic] [-show | -compile_info | -link_info | -showme:compile | -showme:link]
//!         COMPILER-ARGS...
//! ```
//!
//! - The compiler is `$STORMPI_CC` (C++: `$STORMPI_CXX`, Fortran:
//!   `$STORMPI_FC`), else `cc` (`c++`, `gfortran`). The variable may hold
//!   several words (`ccache gcc`).
//! - Fortran: `-I` names the directories of `mpif.h` and of the `mpi`
//!   module's `mpi.mod`. An installed tree has both in `PREFIX/include` (the
//!   module compiled by `ci/install.sh` with the installed gfortran); run from
//!   a cargo build directory, the wrapper compiles `fortran/include/mpi.f90`
//!   into `target/<profile>/fortran/` when `mpi.mod` there is missing or
//!   older than its source. The procedures themselves are in `libmpi.a` and
//!   `libmpi.so`, linked as for C.
//! - `-I<includedir>` is always added. When the command links (none of `-c`,
//!   `-E`, `-S`, `-M`, `-MM` is given), `<libdir>/libmpi.a` and the native
//!   libraries a Rust static library needs ([`NATIVE_STATIC_LIBS`]) follow
//!   the user's arguments. With `--dynamic` (or `-dynamic-mpi`) the program
//!   links the shared library instead: `-L<libdir> -l<name> -Wl,-rpath,<libdir>`,
//!   `<name>` being `stormpi` where `libstormpi.so` is installed (a name no other
//!   MPI's library has, so the program cannot load another MPI's `libmpi.so`),
//!   else `mpi`. A `-shared` link (a Python extension such as mpi4py's, a
//!   plugin) is dynamic unless `--static-mpi` says otherwise: two shared
//!   objects in one process must not each carry their own MPI.
//! - `-show` (also `-showme`, `--showme`, MPICH's `-link_info`) prints the
//!   command instead of running it; `-compile_info` the command without
//!   libraries; Open MPI's `-showme:compile` and `-showme:link` only the flags
//!   the wrapper adds. Without input files they describe how a program is
//!   built (build systems and rsmpi run `mpicc -show` alone and read `-I`,
//!   `-L` and `-l` from it): the header directory and the shared library.
//! - Before a static link, a `libmpi.a` that still defines more than MPI's
//!   symbols (cargo's output) is rewritten to define only those
//!   ([`localize`]), so the program's own `cbrt` stays libm's.
//!   `stormcc --localize-library ARCHIVE...` does that to the archives given
//!   (`ci/install.sh` and `ci/lwk-build.sh` use it) and links nothing.
//!
//! Where the header and libraries are is found by [`Layout::locate`].

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub mod localize;

/// The native libraries a program linking `libmpi.a` (a Rust static
/// library) needs, in order: what `rustc --print native-static-libs` reports
/// for the `stormpi-linux` staticlib on x86_64 Linux with glibc. The tests
/// crate checks this list against rustc.
pub const NATIVE_STATIC_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// The linker options a static link against the shared C library gets when `libmpi.a` holds
/// the memory hooks: the C names defined as the hooks' exported twins, which are named
/// undefined first so that the archive's members defining them are linked even into a program
/// that calls nothing of MPI (a configure script's test of a constant: `--defsym` alone does not
/// pull an archive member, and such a link failed).
pub const MEMHOOK_DEFSYMS: &str = "-Wl,--undefined=stormpi_memhook_free,\
--undefined=stormpi_memhook_realloc,--undefined=stormpi_memhook_munmap,\
--undefined=stormpi_memhook_mremap,--undefined=stormpi_memhook_madvise,\
--defsym=free=stormpi_memhook_free,\
--defsym=realloc=stormpi_memhook_realloc,--defsym=munmap=stormpi_memhook_munmap,\
--defsym=mremap=stormpi_memhook_mremap,--defsym=madvise=stormpi_memhook_madvise";

/// Whether the static library `path` defines the memory hooks (the Linux library does, the
/// node library does not; a missing or unreadable archive does not).
fn defines_memhooks(path: &std::path::Path) -> bool {
    localize::archive_symbols(path)
        .is_ok_and(|names| names.iter().any(|n| n == b"stormpi_memhook_free"))
}

/// For a fully static Fortran program: the POSIX thread functions libgfortran
/// refers to weakly, made part of the link. Its locks are on once a program
/// has `pthread_key_create` — which libmpi.a brings (the Rust runtime) — and
/// weak references pull nothing out of glibc's libc.a, so without these the
/// program calls address 0 when its units are closed at exit.
pub const GFORTRAN_STATIC_PTHREAD: &str = "-Wl,-u,pthread_mutex_lock,-u,pthread_mutex_unlock,\
     -u,pthread_mutex_trylock,-u,pthread_mutex_init,-u,pthread_mutex_destroy,\
     -u,pthread_cond_broadcast,-u,pthread_cond_wait,-u,pthread_cond_init,\
     -u,pthread_cond_destroy,-u,pthread_create,-u,pthread_join,-u,pthread_self,\
     -u,pthread_key_create,-u,pthread_key_delete,-u,pthread_getspecific,\
     -u,pthread_setspecific";

/// The header directory of the source tree, for a wrapper run from
/// `target/<profile>/`.
const SOURCE_INCLUDEDIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../core/include");

/// The directory of `mpif.h` and `mpi.f90` in the source tree.
const SOURCE_FORTRAN_INCLUDEDIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fortran/include");

/// Which compiler the wrapper stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// `stormcc`, `mpicc`.
    C,
    /// `stormcxx`, `mpicxx`, `mpic++`.
    Cxx,
    /// `stormfort`, `mpifort`, `mpif90`, `mpif77`.
    Fortran,
}

impl Language {
    /// The language a wrapper invoked under this name stands for: a name
    /// ending in `cxx` or `++` is the C++ wrapper, one ending in `fort`, `f90`,
    /// `f95` or `f77` the Fortran one, anything else the C one.
    pub fn from_program_name(argv0: &OsStr) -> Language {
        let name = Path::new(argv0).file_name().unwrap_or(argv0).as_bytes();
        if name.ends_with(b"cxx") || name.ends_with(b"++") {
            Language::Cxx
        } else if [&b"fort"[..], b"f90", b"f95", b"f77"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            Language::Fortran
        } else {
            Language::C
        }
    }

    /// The environment variable that names the compiler.
    pub fn compiler_variable(self) -> &'static str {
        match self {
            Language::C => "STORMPI_CC",
            Language::Cxx => "STORMPI_CXX",
            Language::Fortran => "STORMPI_FC",
        }
    }

    /// The compiler used when that variable is unset.
    pub fn default_compiler(self) -> &'static str {
        match self {
            Language::C => "cc",
            Language::Cxx => "c++",
            Language::Fortran => "gfortran",
        }
    }

    fn wrapper_name(self) -> &'static str {
        match self {
            Language::C => "stormcc",
            Language::Cxx => "stormcxx",
            Language::Fortran => "stormfort",
        }
    }
}

/// Where `mpi.h` and the libraries are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The directory holding `mpi.h`.
    pub includedir: PathBuf,
    /// The directory holding `mpif.h`.
    pub fortran_includedir: PathBuf,
    /// The directory holding the `mpi` module (`mpi.mod`).
    pub moddir: PathBuf,
    /// The directory holding `libmpi.a` and `libmpi.so`.
    pub libdir: PathBuf,
    /// Whether this is an installed tree (`PREFIX/bin`, `PREFIX/include`,
    /// `PREFIX/lib`) rather than a cargo build directory.
    pub installed: bool,
    /// Whether `libdir` came from `STORMPI_LIBDIR`.
    pub libdir_from_env: bool,
}

impl Layout {
    /// Finds the header and libraries for a wrapper whose executable lives
    /// in `exe_dir`:
    ///
    /// - installed (`exe_dir/../include/mpi.h` exists): `PREFIX/include`
    ///   and `PREFIX/lib`;
    /// - otherwise a cargo build directory `target/<profile>/`: the source
    ///   tree's `core/include` (its path is fixed when the wrapper is built)
    ///   and `exe_dir` itself, where cargo puts `libmpi.a`.
    ///
    /// `STORMPI_INCLUDEDIR` and `STORMPI_LIBDIR` (looked up through `env`)
    /// override either.
    pub fn locate(exe_dir: &Path, env: impl Fn(&str) -> Option<OsString>) -> Layout {
        let prefix = exe_dir.parent().unwrap_or(exe_dir);
        let installed = prefix.join("include/mpi.h").is_file();
        // The baked paths hold a `..`; show users the plain one.
        let plain = |p: &str| {
            let p = Path::new(p);
            p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
        };
        let (includedir, fortran_includedir, moddir, libdir) = if installed {
            let inc = prefix.join("include");
            (inc.clone(), inc.clone(), inc, prefix.join("lib"))
        } else {
            (
                plain(SOURCE_INCLUDEDIR),
                plain(SOURCE_FORTRAN_INCLUDEDIR),
                exe_dir.join("fortran"),
                exe_dir.to_path_buf(),
            )
        };
        let nonempty = |var| env(var).filter(|v| !v.is_empty()).map(PathBuf::from);
        let libdir_env = nonempty("STORMPI_LIBDIR");
        let inc_env = nonempty("STORMPI_INCLUDEDIR");
        Layout {
            fortran_includedir: inc_env.clone().unwrap_or(fortran_includedir),
            moddir: inc_env.clone().unwrap_or(moddir),
            includedir: inc_env.unwrap_or(includedir),
            libdir_from_env: libdir_env.is_some(),
            libdir: libdir_env.unwrap_or(libdir),
            installed,
        }
    }

    /// Checks that the files a command needs are there, with a message that
    /// says how to get them.
    fn check(&self, lang: Language, linking: Option<Linking>) -> Result<(), String> {
        let header = match lang {
            Language::Fortran => self.fortran_includedir.join("mpif.h"),
            _ => self.includedir.join("mpi.h"),
        };
        if !header.is_file() {
            return Err(format!(
                "{} not found (set STORMPI_INCLUDEDIR to the directory holding {})",
                header.display(),
                header.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
        let lib = match linking {
            None => return Ok(()),
            Some(Linking::Static) => self.libdir.join("libmpi.a"),
            Some(Linking::Dynamic) => self.libdir.join("libmpi.so"),
        };
        if lib.is_file() {
            return Ok(());
        }
        let how = if self.libdir_from_env {
            "STORMPI_LIBDIR names that directory".to_string()
        } else if self.installed {
            "reinstall stormpi with ci/install.sh".to_string()
        } else if self.libdir.file_name() == Some(OsStr::new("debug")) {
            "build it with cargo build -p stormpi-linux, or set STORMPI_LIBDIR".to_string()
        } else {
            "build it with cargo build --release -p stormpi-linux, or set STORMPI_LIBDIR"
                .to_string()
        };
        Err(format!("{} not found; {how}", lib.display()))
    }
}

/// How the program is linked to stormpi.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linking {
    /// `libmpi.a` (the default: simulation codes are linked statically).
    Static,
    /// `-lmpi` from `libmpi.so`, found again at run time through an rpath.
    Dynamic,
}

/// What the compiler is asked to do, as far as the wrapper cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Compile and link: libraries are added.
    Link,
    /// Stop before linking (`-c`, `-E`, `-S`, `-M`, `-MM`).
    CompileOnly,
    /// Only a question to the compiler (`--version`, `-dumpmachine`, ...):
    /// adding libraries would make it link an `a.out` out of `libmpi.a`.
    Query,
}

impl Mode {
    /// Classifies a compiler command line.
    pub fn of(args: &[OsString]) -> Mode {
        let compile_only = args.iter().any(|a| {
            // -MD, -MMD, -MF, -MT, -MQ, -MP and -MG only add dependency
            // output to a normal compile; -M and -MM replace it (they imply
            // -E).
            matches!(a.as_bytes(), b"-c" | b"-E" | b"-S" | b"-M" | b"-MM")
        });
        if compile_only {
            return Mode::CompileOnly;
        }
        let is_query = |a: &OsString| {
            let a = a.as_bytes();
            matches!(
                a,
                b"-v"
                    | b"--version"
                    | b"-dumpversion"
                    | b"-dumpfullversion"
                    | b"-dumpmachine"
                    | b"-dumpspecs"
                    | b"--help"
                    | b"-###"
            ) || a.starts_with(b"-print-")
                || a.starts_with(b"--print-")
        };
        if args.iter().all(is_query) {
            Mode::Query
        } else {
            Mode::Link
        }
    }
}

/// What a show flag asks the wrapper to print instead of running the compiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// The whole command (`-show`, `-showme`, `-link_info`).
    Command,
    /// The command without the libraries (`-compile_info`).
    Compile,
    /// Only the compile flags the wrapper adds (`-showme:compile`).
    CompileFlags,
    /// Only the link flags the wrapper adds (`-showme:link`).
    LinkFlags,
}

/// A parsed wrapper command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Print (part of) the command instead of running it.
    pub show: Option<Show>,
    /// Print the wrapper's usage.
    pub help: bool,
    /// Localize the archives named by `args` instead of compiling.
    pub localize: bool,
    /// Static or shared stormpi.
    pub linking: Linking,
    /// The language of the wrapper (C unless set after [`Invocation::parse`]).
    pub lang: Language,
    /// Everything else, passed to the compiler in order.
    pub args: Vec<OsString>,
}

impl Invocation {
    /// Splits the wrapper's own flags from the compiler's.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Invocation {
        let mut inv = Invocation {
            show: None,
            help: false,
            localize: false,
            linking: Linking::Static,
            lang: Language::C,
            args: Vec::new(),
        };
        let mut chosen = false;
        for arg in args {
            match arg.as_bytes() {
                b"-show" | b"--show" | b"-showme" | b"--showme" | b"-link_info" => {
                    inv.show = Some(Show::Command)
                }
                b"-compile_info" => inv.show = Some(Show::Compile),
                b"-showme:compile" | b"--showme:compile" => inv.show = Some(Show::CompileFlags),
                b"-showme:link" | b"--showme:link" => inv.show = Some(Show::LinkFlags),
                b"--dynamic" | b"-dynamic-mpi" => (inv.linking, chosen) = (Linking::Dynamic, true),
                b"--static-mpi" | b"-static-mpi" => (inv.linking, chosen) = (Linking::Static, true),
                b"-help" | b"--stormpi-help" => inv.help = true,
                b"--localize-library" => inv.localize = true,
                _ => inv.args.push(arg),
            }
        }
        // A shared object (a Python extension, a plugin) links the shared library unless told
        // otherwise: one process may load several, and each with its own copy of MPI would
        // have its own MPI_COMM_WORLD.
        if !chosen && inv.args.iter().any(|a| a == "-shared") {
            inv.linking = Linking::Dynamic;
        }
        inv
    }

    /// What to print for a show flag, or the command to run without one:
    /// compiler words first. Fails when a file the command needs is missing.
    pub fn command(&self, compiler: &[OsString], layout: &Layout) -> Result<Vec<OsString>, String> {
        if self.args.is_empty() || matches!(self.show, Some(Show::CompileFlags | Show::LinkFlags)) {
            return self.describe(compiler, layout);
        }
        let mut cmd = self.full_command(compiler, layout)?;
        if self.show == Some(Show::Compile) {
            // The compile step's view of the same command: everything but what linking adds.
            let added = layout.compile_flags(self.lang, compiler).len();
            cmd.truncate(compiler.len() + added + self.args.len());
        }
        Ok(cmd)
    }

    /// How a program is built, for a show flag without input files (or Open
    /// MPI's flag-only forms): the header directory and the shared library
    /// in `-I`/`-L`/`-l` form, which is what tools that parse `mpicc -show`
    /// understand (a static archive's path is no flag they know).
    fn describe(&self, compiler: &[OsString], layout: &Layout) -> Result<Vec<OsString>, String> {
        let show = self.show.unwrap_or(Show::Command);
        let link = matches!(show, Show::Command | Show::LinkFlags);
        layout.check(self.lang, link.then_some(Linking::Dynamic))?;
        let mut cmd = Vec::new();
        if matches!(show, Show::Command | Show::Compile) {
            cmd.extend_from_slice(compiler);
        }
        if show != Show::LinkFlags {
            cmd.extend(layout.compile_flags(self.lang, compiler));
        }
        if link {
            cmd.extend(layout.shared_link_flags());
        }
        Ok(cmd)
    }

    fn full_command(
        &self,
        compiler: &[OsString],
        layout: &Layout,
    ) -> Result<Vec<OsString>, String> {
        let mode = Mode::of(&self.args);
        layout.check(self.lang, (mode == Mode::Link).then_some(self.linking))?;
        let mut cmd = compiler.to_vec();
        if mode != Mode::Query {
            cmd.extend(layout.compile_flags(self.lang, compiler));
        }
        cmd.extend(self.args.iter().cloned());
        if mode != Mode::Link {
            return Ok(cmd);
        }
        match self.linking {
            Linking::Static => {
                cmd.push(layout.libdir.join("libmpi.a").into());
                // A fully static program has no libgcc_s.so; the unwinder
                // it needs is in libgcc_eh.a.
                let fully_static = self.args.iter().any(|a| a == "-static");
                if fully_static && self.lang == Language::Fortran {
                    cmd.push(GFORTRAN_STATIC_PTHREAD.into());
                }
                // The registration cache's memory hooks (shim-linux/src/memhooks.rs): the
                // program defines the C library's names as the hooks, interposing as
                // libmpi.so's do; a fully static link would collide with libc.a's, and a
                // shared object (loaded locally) would not interpose.
                let shared = self.args.iter().any(|a| a == "-shared");
                if !fully_static && !shared && defines_memhooks(&layout.libdir.join("libmpi.a")) {
                    cmd.push(MEMHOOK_DEFSYMS.into());
                }
                for lib in NATIVE_STATIC_LIBS {
                    let lib = if fully_static && *lib == "-lgcc_s" {
                        "-lgcc_eh"
                    } else {
                        lib
                    };
                    cmd.push(lib.into());
                }
            }
            Linking::Dynamic => cmd.extend(layout.shared_link_flags()),
        }
        Ok(cmd)
    }
}

impl Layout {
    /// The `-I` flags of a language: `mpi.h`'s directory; for Fortran the
    /// directories of `mpif.h` and `mpi.mod`.
    fn include_flags(&self, lang: Language) -> Vec<OsString> {
        match lang {
            Language::Fortran if self.moddir != self.fortran_includedir => vec![
                concat_os("-I", &self.fortran_includedir),
                concat_os("-I", &self.moddir),
            ],
            Language::Fortran => vec![concat_os("-I", &self.fortran_includedir)],
            _ => vec![concat_os("-I", &self.includedir)],
        }
    }

    /// The flags a language adds at compile time: `-I` ([`Layout::include_flags`]), and for
    /// gfortran `-fallow-argument-mismatch`, without which gfortran 10 and later refuse
    /// `mpif.h` programs that pass buffers of different types to one procedure (MPICH's
    /// `mpif90` adds it too).
    fn compile_flags(&self, lang: Language, compiler: &[OsString]) -> Vec<OsString> {
        let mut flags = self.include_flags(lang);
        let gfortran = compiler.iter().any(|w| {
            Path::new(w)
                .file_name()
                .is_some_and(|n| n.as_bytes().starts_with(b"gfortran"))
        });
        if lang == Language::Fortran && gfortran {
            flags.push("-fallow-argument-mismatch".into());
        }
        flags
    }

    /// For a wrapper run from a cargo build directory: compiles the `mpi` and `mpi_f08`
    /// modules (`mpi.f90`, `mpi_f08.f90` beside `mpif.h`) into `moddir` when a `.mod` there
    /// is missing or older than its source. Compiled in a directory of its
    /// own and renamed into place, so that wrappers running at once never
    /// see half a module.
    pub fn ensure_module(&self, compiler: &[OsString]) -> Result<(), String> {
        for name in ["mpi", "mpi_f08"] {
            self.ensure_one_module(compiler, name)?;
        }
        Ok(())
    }

    fn ensure_one_module(&self, compiler: &[OsString], name: &str) -> Result<(), String> {
        let src = self.fortran_includedir.join(format!("{name}.f90"));
        let module = self.moddir.join(format!("{name}.mod"));
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        match (modified(&src), modified(&module)) {
            (None, _) => return Err(format!("{} not found", src.display())),
            (Some(s), Some(m)) if m >= s => return Ok(()),
            _ => {}
        }
        let work = self.moddir.join(format!("build-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
        let status = std::process::Command::new(&compiler[0])
            .args(&compiler[1..])
            .arg("-c")
            .arg(&src)
            .arg(concat_os("-J", &work))
            .arg("-o")
            .arg(work.join(format!("{name}.o")))
            .status();
        let result = match status {
            Ok(s) if s.success() => std::fs::rename(work.join(format!("{name}.mod")), &module)
                .map_err(|e| format!("{}: {e}", module.display())),
            Ok(s) => Err(format!("compiling {} failed ({s})", src.display())),
            Err(e) => Err(format!("cannot run {}: {e}", compiler[0].to_string_lossy())),
        };
        let _ = std::fs::remove_dir_all(&work);
        result
    }

    /// The flags that link the shared library and find it again at run time.
    fn shared_link_flags(&self) -> [OsString; 3] {
        let name = if self.libdir.join("libstormpi.so").exists() {
            "-lstormpi"
        } else {
            "-lmpi"
        };
        [
            concat_os("-L", &self.libdir),
            name.into(),
            concat_os("-Wl,-rpath,", &self.libdir),
        ]
    }
}

fn concat_os(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(path);
    s
}

/// The compiler command words: `$STORMPI_CC`/`$STORMPI_CXX` split at
/// whitespace, else the default compiler.
pub fn compiler(lang: Language, env: impl Fn(&str) -> Option<OsString>) -> Vec<OsString> {
    let words: Vec<OsString> = env(lang.compiler_variable())
        .map(|v| {
            v.as_bytes()
                .split(u8::is_ascii_whitespace)
                .filter(|w| !w.is_empty())
                .map(|w| OsStr::from_bytes(w).to_os_string())
                .collect()
        })
        .unwrap_or_default();
    if words.is_empty() {
        vec![lang.default_compiler().into()]
    } else {
        words
    }
}

/// A command as one line a POSIX shell would run unchanged.
pub fn shell_line(cmd: &[OsString]) -> String {
    let quote = |w: &OsString| {
        let s = w.to_string_lossy();
        let plain = !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./,=+:@%".contains(&b));
        if plain {
            s.into_owned()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    cmd.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The usage text.
pub fn usage(lang: Language) -> String {
    let name = lang.wrapper_name();
    format!(
        "Usage: {name} [--dynamic] [-show] COMPILER-ARGS...\n\
         Runs ${var} (default: {cc}) with stormpi's header{module} and library added.\n\
         \n  -show, -showme    print the command instead of running it (also -link_info;\
         \n                    without input files: the flags that build with libmpi.so)\
         \n  -compile_info     print the command without the libraries\
         \n  -showme:compile, -showme:link\
         \n                    print only the compile or link flags stormpi adds\
         \n  --dynamic         link libmpi.so (with an rpath) instead of libmpi.a\
         \n                    (also -dynamic-mpi; --static-mpi is the default)\
         \n  --localize-library ARCHIVE...\
         \n                    make each archive define only MPI's symbols (done to\
         \n                    libmpi.a before a static link anyway), link nothing\
         \n  -help             this text\
         \n\nLinking is skipped with -c, -E, -S, -M or -MM.\
         \nSTORMPI_INCLUDEDIR and STORMPI_LIBDIR override where mpi.h and libmpi are.\n",
        var = lang.compiler_variable(),
        cc = lang.default_compiler(),
        module = if lang == Language::Fortran {
            ", the mpi module"
        } else {
            ""
        },
    )
}

/// Runs the wrapper: `argv0` is the name it was called by, `args` the rest
/// of its command line. Returns only on failure or for `-show`/`-help`, with
/// the exit status; otherwise the compiler replaces this process.
pub fn main(argv0: &OsStr, args: impl IntoIterator<Item = OsString>) -> i32 {
    use std::os::unix::process::CommandExt;

    let lang = Language::from_program_name(argv0);
    let name = lang.wrapper_name();
    let mut inv = Invocation::parse(args);
    inv.lang = lang;
    if inv.help {
        print!("{}", usage(lang));
        return 0;
    }
    if inv.args.is_empty() && inv.show.is_none() {
        eprint!("{name}: no input files\n{}", usage(lang));
        return 1;
    }
    let env = |var: &str| std::env::var_os(var);
    let compiler_words = compiler(lang, env);
    if inv.localize {
        let mut status = 0;
        for archive in &inv.args {
            match localize::localize(Path::new(archive), &compiler_words) {
                Ok(rewrote) => {
                    let what = if rewrote {
                        "localized"
                    } else {
                        "already localized"
                    };
                    println!("{name}: {}: {what}", archive.to_string_lossy());
                }
                Err(msg) => {
                    eprintln!("{name}: {msg}");
                    status = 1;
                }
            }
        }
        return status;
    }
    // The real path, so that symlinks (mpicc -> stormcc) find the tree the
    // executable belongs to.
    let exe_dir = match std::env::current_exe() {
        Ok(exe) => exe.parent().map(Path::to_path_buf).unwrap_or_default(),
        Err(e) => {
            eprintln!("{name}: cannot find my own executable: {e}");
            return 1;
        }
    };
    let layout = Layout::locate(&exe_dir, env);
    let cmd = match inv.command(&compiler_words, &layout) {
        Ok(cmd) => cmd,
        Err(msg) => {
            eprintln!("{name}: {msg}");
            return 1;
        }
    };
    if inv.show.is_some() {
        println!("{}", shell_line(&cmd));
        return 0;
    }
    if lang == Language::Fortran && !layout.installed && Mode::of(&inv.args) != Mode::Query {
        if let Err(msg) = layout.ensure_module(&compiler_words) {
            eprintln!("{name}: the mpi module: {msg}");
            return 1;
        }
    }
    if inv.linking == Linking::Static && Mode::of(&inv.args) == Mode::Link {
        // cargo writes libmpi.a afresh with every build; the first link after
        // one localizes it. Linking it as it is still works, so a failure here
        // (a read-only directory) is a warning.
        let lib = layout.libdir.join("libmpi.a");
        if let Err(msg) = localize::localize(&lib, &compiler_words) {
            eprintln!(
                "{name}: warning: {msg}; linking {} as it is: its copies of libm functions \
                 may replace the program's own",
                lib.display()
            );
        }
    }
    let err = std::process::Command::new(&cmd[0]).args(&cmd[1..]).exec();
    eprintln!("{name}: cannot run {}: {err}", cmd[0].to_string_lossy());
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    /// A layout over real directories, so that `check` passes.
    struct Tree {
        root: PathBuf,
    }

    impl Tree {
        fn new(tag: &str, files: &[&str]) -> Tree {
            let root =
                std::env::temp_dir().join(format!("stormcc-unit-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            for f in files {
                let p = root.join(f);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, b"").unwrap();
            }
            std::fs::create_dir_all(root.join("bin")).unwrap();
            Tree { root }
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    fn installed(tag: &str) -> (Tree, Layout) {
        let t = Tree::new(tag, &["include/mpi.h", "lib/libmpi.a", "lib/libmpi.so"]);
        let l = Layout::locate(&t.root.join("bin"), no_env);
        (t, l)
    }

    #[test]
    fn program_name_picks_the_language() {
        for n in ["stormcc", "/usr/bin/mpicc", "x/mpicc.stormpi"] {
            assert_eq!(
                Language::from_program_name(OsStr::new(n)),
                Language::C,
                "{n}"
            );
        }
        for n in ["stormcxx", "/opt/s/bin/mpicxx", "mpic++"] {
            assert_eq!(
                Language::from_program_name(OsStr::new(n)),
                Language::Cxx,
                "{n}"
            );
        }
        for n in ["stormfort", "/opt/s/bin/mpifort", "mpif90", "mpif77"] {
            assert_eq!(
                Language::from_program_name(OsStr::new(n)),
                Language::Fortran,
                "{n}"
            );
        }
    }

    /// Fortran: mpif.h and mpi.mod from PREFIX/include, gfortran's mismatch flag, libmpi.a.
    #[test]
    fn fortran_static_link_command() {
        let t = Tree::new(
            "fortran",
            &[
                "include/mpi.h",
                "include/mpif.h",
                "lib/libmpi.a",
                "lib/libmpi.so",
            ],
        );
        let l = Layout::locate(&t.root.join("bin"), no_env);
        assert_eq!(l.moddir, t.root.join("include"));
        let mut inv = Invocation::parse(os(&["-O2", "a.f90", "-o", "a"]));
        inv.lang = Language::Fortran;
        let cmd = inv.command(&os(&["gfortran"]), &l).unwrap();
        let inc = format!("-I{}", t.root.join("include").display());
        let lib = t.root.join("lib/libmpi.a");
        assert_eq!(
            cmd[..7],
            os(&[
                "gfortran",
                &inc,
                "-fallow-argument-mismatch",
                "-O2",
                "a.f90",
                "-o",
                "a"
            ])[..]
        );
        assert_eq!(cmd[7], lib.as_os_str());
        // Another compiler gets no gfortran flag; -compile_info drops the libraries.
        inv.show = Some(Show::Compile);
        let cmd = inv.command(&os(&["flang"]), &l).unwrap();
        assert_eq!(cmd, os(&["flang", &inc, "-O2", "a.f90", "-o", "a"]));
    }

    /// A fully static Fortran link pulls in the thread functions libgfortran needs.
    #[test]
    fn fortran_fully_static_link_pulls_in_pthread() {
        let (_t, l) = installed("fortran-static");
        let mut inv = Invocation::parse(os(&["-static", "a.f90"]));
        inv.lang = Language::Fortran;
        let Err(e) = inv.command(&os(&["gfortran"]), &l) else {
            panic!("no mpif.h in that tree");
        };
        assert!(e.contains("mpif.h"), "{e}");
        let t = Tree::new(
            "fortran-static-2",
            &["include/mpi.h", "include/mpif.h", "lib/libmpi.a"],
        );
        let l = Layout::locate(&t.root.join("bin"), no_env);
        let cmd = inv.command(&os(&["gfortran"]), &l).unwrap();
        assert!(cmd.contains(&GFORTRAN_STATIC_PTHREAD.into()), "{cmd:?}");
        assert!(cmd.contains(&"-lgcc_eh".into()), "{cmd:?}");
    }

    /// From a cargo build directory, mpif.h comes from the sources and mpi.mod from
    /// target/<profile>/fortran.
    #[test]
    fn fortran_build_tree_layout() {
        let l = Layout::locate(Path::new("/w/target/release"), no_env);
        assert!(l.fortran_includedir.ends_with("fortran/include"));
        assert_eq!(l.moddir, Path::new("/w/target/release/fortran"));
        assert_eq!(l.include_flags(Language::Fortran).len(), 2);
    }

    #[test]
    fn modes() {
        assert_eq!(Mode::of(&os(&["-O2", "a.c", "-o", "a"])), Mode::Link);
        assert_eq!(Mode::of(&os(&["a.o", "b.o"])), Mode::Link);
        for flag in ["-c", "-E", "-S", "-M", "-MM"] {
            assert_eq!(
                Mode::of(&os(&["-O2", flag, "a.c"])),
                Mode::CompileOnly,
                "{flag}"
            );
        }
        assert_eq!(Mode::of(&os(&["-MD", "-MF", "a.d", "a.c"])), Mode::Link);
        assert_eq!(Mode::of(&os(&["--version"])), Mode::Query);
        assert_eq!(Mode::of(&os(&["-print-file-name=libc.a"])), Mode::Query);
        assert_eq!(Mode::of(&os(&["-v", "a.c"])), Mode::Link);
    }

    #[test]
    fn wrapper_flags_are_taken_out() {
        let inv = Invocation::parse(os(&["-show", "-O2", "--dynamic", "a.c"]));
        assert!(inv.show == Some(Show::Command) && !inv.help);
        assert_eq!(inv.linking, Linking::Dynamic);
        assert_eq!(inv.args, os(&["-O2", "a.c"]));
        let inv = Invocation::parse(os(&["-dynamic-mpi", "--static-mpi", "a.c"]));
        assert_eq!(inv.linking, Linking::Static);
    }

    #[test]
    fn a_shared_object_links_the_shared_library_unless_told() {
        let inv = Invocation::parse(os(&["-shared", "-fPIC", "a.o", "-o", "a.so"]));
        assert_eq!(inv.linking, Linking::Dynamic);
        let inv = Invocation::parse(os(&["-shared", "--static-mpi", "a.o"]));
        assert_eq!(inv.linking, Linking::Static);
        assert_eq!(Invocation::parse(os(&["a.c"])).linking, Linking::Static);
    }

    #[test]
    fn installed_layout_is_found_beside_bin() {
        let (t, l) = installed("inst");
        assert!(l.installed);
        assert_eq!(l.includedir, t.root.join("include"));
        assert_eq!(l.libdir, t.root.join("lib"));
    }

    #[test]
    fn build_tree_layout_uses_the_sources_and_the_exe_dir() {
        let t = Tree::new("build", &["release/libmpi.a"]);
        let dir = t.root.join("release");
        let l = Layout::locate(&dir, no_env);
        assert!(!l.installed);
        assert_eq!(l.libdir, dir);
        assert!(l.includedir.join("mpi.h").is_file(), "{l:?}");
        assert!(l.includedir.ends_with("core/include"), "{l:?}");
    }

    #[test]
    fn environment_overrides_the_layout() {
        let env = |v: &str| match v {
            "STORMPI_INCLUDEDIR" => Some(OsString::from("/inc")),
            "STORMPI_LIBDIR" => Some(OsString::from("/lib9")),
            _ => None,
        };
        let l = Layout::locate(Path::new("/nonexistent/bin"), env);
        assert_eq!(l.includedir, PathBuf::from("/inc"));
        assert_eq!(l.libdir, PathBuf::from("/lib9"));
        let a_c = Invocation::parse(os(&["a.c"]));
        let e = a_c.command(&os(&["cc"]), &l).unwrap_err();
        assert!(e.contains("/inc/mpi.h not found"), "{e}");
        // With the source tree's header, the missing library is blamed on the variable.
        let l = Layout {
            includedir: Layout::locate(Path::new("/nonexistent/bin"), no_env).includedir,
            ..l
        };
        let e = a_c.command(&os(&["cc"]), &l).unwrap_err();
        assert!(
            e.contains("/lib9/libmpi.a not found; STORMPI_LIBDIR"),
            "{e}"
        );
    }

    #[test]
    fn static_link_command() {
        let (t, l) = installed("static");
        let inv = Invocation::parse(os(&["-O2", "a.c", "-o", "a"]));
        let cmd = inv.command(&os(&["gcc"]), &l).unwrap();
        let mut want = os(&["gcc"]);
        want.push(concat_os("-I", &t.root.join("include")));
        want.extend(os(&["-O2", "a.c", "-o", "a"]));
        want.push(t.root.join("lib/libmpi.a").into());
        want.extend(os(NATIVE_STATIC_LIBS));
        assert_eq!(cmd, want);
    }

    #[test]
    fn fully_static_link_uses_the_static_unwinder() {
        let (_t, l) = installed("fullstatic");
        let inv = Invocation::parse(os(&["-static", "a.c"]));
        let cmd = inv.command(&os(&["cc"]), &l).unwrap();
        assert!(cmd.contains(&"-lgcc_eh".into()) && !cmd.contains(&"-lgcc_s".into()));
    }

    #[test]
    fn dynamic_link_command() {
        let (t, l) = installed("dyn");
        let inv = Invocation::parse(os(&["--dynamic", "a.c"]));
        let cmd = inv.command(&os(&["cc"]), &l).unwrap();
        let lib = t.root.join("lib");
        let tail: Vec<OsString> = vec![
            concat_os("-L", &lib),
            "-lmpi".into(),
            concat_os("-Wl,-rpath,", &lib),
        ];
        assert_eq!(cmd[cmd.len() - 3..], tail[..]);
    }

    /// A show flag alone (how rsmpi, CMake and autotools ask) describes the build in flags:
    /// each spelling prints what it prints with files, the libraries as `-L`/`-l`.
    #[test]
    fn show_without_files_describes_the_build() {
        let (t, l) = installed("describe");
        let inc = concat_os("-I", &t.root.join("include"));
        let lib = t.root.join("lib");
        let link = vec![
            concat_os("-L", &lib),
            "-lmpi".into(),
            concat_os("-Wl,-rpath,", &lib),
        ];
        let shown = |flag: &str| {
            Invocation::parse(os(&[flag]))
                .command(&os(&["gcc"]), &l)
                .unwrap()
        };
        let mut full = vec!["gcc".into(), inc.clone()];
        full.extend(link.iter().cloned());
        for flag in ["-show", "-showme", "--showme", "-link_info"] {
            assert_eq!(shown(flag), full, "{flag}");
        }
        assert_eq!(
            shown("-compile_info"),
            vec![OsString::from("gcc"), inc.clone()]
        );
        assert_eq!(shown("-showme:compile"), vec![inc.clone()]);
        assert_eq!(shown("-showme:link"), link);
        // With libstormpi.so installed, that name is linked: no other MPI's library has it.
        std::fs::write(lib.join("libstormpi.so"), b"").unwrap();
        assert_eq!(shown("-showme:link")[1], OsString::from("-lstormpi"));
        // With files, -compile_info leaves the libraries out and Open MPI's forms ignore them.
        let with = |flag: &str| {
            Invocation::parse(os(&[flag, "-O2", "a.c"]))
                .command(&os(&["gcc"]), &l)
                .unwrap()
        };
        assert_eq!(
            with("-compile_info"),
            vec!["gcc".into(), inc.clone(), "-O2".into(), "a.c".into()]
        );
        assert_eq!(with("-link_info"), with("-show"));
        assert_eq!(with("-showme:compile"), vec![inc]);
    }

    #[test]
    fn compile_only_adds_no_libraries() {
        let (t, l) = installed("compile");
        let cmd = Invocation::parse(os(&["-c", "a.c"]))
            .command(&os(&["cc"]), &l)
            .unwrap();
        let mut want = os(&["cc"]);
        want.push(concat_os("-I", &t.root.join("include")));
        want.extend(os(&["-c", "a.c"]));
        assert_eq!(cmd, want);
    }

    #[test]
    fn missing_library_is_explained() {
        let t = Tree::new("missing", &[]);
        let l = Layout::locate(&t.root.join("release"), no_env);
        let e = Invocation::parse(os(&["a.c"]))
            .command(&os(&["cc"]), &l)
            .unwrap_err();
        assert!(
            e.contains("libmpi.a not found")
                && e.contains("cargo build --release -p stormpi-linux"),
            "{e}"
        );
        // Compiling only needs the header.
        assert!(Invocation::parse(os(&["-c", "a.c"]))
            .command(&os(&["cc"]), &l)
            .is_ok());
    }

    #[test]
    fn compiler_from_environment() {
        assert_eq!(compiler(Language::C, no_env), os(&["cc"]));
        assert_eq!(compiler(Language::Cxx, no_env), os(&["c++"]));
        let env = |v: &str| (v == "STORMPI_CC").then(|| OsString::from(" ccache  gcc-12 "));
        assert_eq!(compiler(Language::C, env), os(&["ccache", "gcc-12"]));
        assert_eq!(compiler(Language::Cxx, env), os(&["c++"]));
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(
            shell_line(&os(&["cc", "-DX=\"a b\"", "it's", "-I/a/b", ""])),
            r#"cc '-DX="a b"' 'it'\''s' -I/a/b ''"#
        );
    }
}
