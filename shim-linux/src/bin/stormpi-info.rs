//! `stormpi-info`: what this stormpi is and how it is set (as `ompi_info` and `mpichversion`).
//!
//! ```text
//! stormpi-info                          version, components, every parameter
//! stormpi-info --param FRAMEWORK [COMPONENT]   the parameters of one framework or component
//! stormpi-info --parsable ...           one `key:value` fact per line
//! stormpi-info --mca NAME VALUE ...     values as `stormrun --mca NAME VALUE` would set them
//! ```

use std::process::ExitCode;

use mpi::info::{mpi_version, COMPONENTS};
use stormpi_core::params::{Entry, Kind};

const USAGE: &str = "Usage: stormpi-info [--parsable] [--param FRAMEWORK [COMPONENT]] \
                     [--mca NAME VALUE]... [--version]";

struct Options {
    parsable: bool,
    param: Option<(String, Option<String>)>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stormpi-info: {e}");
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let params = match mpi::init::params() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("stormpi-info: {e}");
            return ExitCode::from(1);
        }
    };
    let mut entries: Vec<&Entry> = params.iter().collect();
    entries.sort_by_key(|e| e.def.name);
    if let Some((framework, component)) = &opts.param {
        if framework != "all" {
            let (prefix, whole) = match component {
                Some(c) if c != "all" => (format!("{framework}_{c}_"), false),
                _ => (format!("{framework}_"), true),
            };
            // A framework's own parameter (`btl`) belongs to it, not to a component.
            entries
                .retain(|e| e.def.name.starts_with(&prefix) || (whole && e.def.name == framework));
            if entries.is_empty() {
                eprintln!("stormpi-info: no parameter names start with `{prefix}`");
                return ExitCode::from(2);
            }
        }
    }
    if opts.parsable {
        print_parsable(&entries, opts.param.is_none());
    } else {
        print_human(&entries, opts.param.is_none());
    }
    ExitCode::SUCCESS
}

/// The options, or `None` when the command was answered already (`--help`, `--version`).
fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut opts = Options {
        parsable: false,
        param: None,
    };
    let mut cmdline: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--parsable" | "--parseable" => opts.parsable = true,
            "--all" | "-a" => {}
            "--param" => {
                let framework = args.get(i + 1).ok_or("--param needs FRAMEWORK")?;
                let component = args.get(i + 2).filter(|c| !c.starts_with('-')).cloned();
                i += 1 + usize::from(component.is_some());
                opts.param = Some((framework.clone(), component));
            }
            "--mca" => {
                let (Some(name), Some(value)) = (args.get(i + 1), args.get(i + 2)) else {
                    return Err("--mca needs NAME VALUE".into());
                };
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!(
                        "`--mca {name}`: parameter names use only letters, digits and `_`"
                    ));
                }
                std::env::set_var(format!("STORMPI_MCA_{name}"), value);
                cmdline.push(name.clone());
                i += 2;
            }
            "-V" | "--version" => {
                println!("stormpi {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("unknown option `{other}`")),
        }
        i += 1;
    }
    if !cmdline.is_empty() {
        std::env::set_var(mpi::params::CMDLINE_ENV, cmdline.join(","));
    }
    Ok(Some(opts))
}

fn kind_text(kind: Kind) -> String {
    match kind {
        Kind::Int { min, max } => format!("integer {min}..{max}"),
        Kind::Bool => "boolean".into(),
        Kind::Str => "text".into(),
    }
}

fn default_text(e: &Entry) -> String {
    match e.def.default {
        stormpi_core::params::Default::Int(v) => v.to_string(),
        stormpi_core::params::Default::Bool(v) => v.to_string(),
        stormpi_core::params::Default::Str(s) => s.to_string(),
    }
}

fn print_human(entries: &[&Entry], header: bool) {
    if header {
        let (major, minor) = mpi_version();
        println!(
            "                 Package: stormpi {}",
            env!("CARGO_PKG_VERSION")
        );
        println!("             MPI version: {major}.{minor}");
        println!("                     ABI: MPICH's (mpi.h, libmpich.so.12, libmpichfort.so.12)");
        println!("           Thread levels: MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE");
        println!("  Parameters are set by: stormrun --mca NAME VALUE, STORMPI_MCA_NAME=VALUE, or `NAME = VALUE` lines in $STORMPI_MCA_CONF (default ~/.stormpi/mca-params.conf), first found wins");
        println!();
        println!("Components:");
        for c in COMPONENTS {
            let prio = c
                .priority
                .map_or(String::new(), |p| format!(" (exclusivity {p})"));
            println!("  {:>4} {:<5}{prio}: {}", c.framework, c.name, c.about);
        }
        println!();
        println!("Parameters:");
    }
    for e in entries {
        println!(
            "  {} = \"{}\" (default \"{}\", from {}, {})",
            e.def.name,
            e.value,
            default_text(e),
            e.source.name(),
            kind_text(e.def.kind)
        );
        println!("      {}", e.def.description);
    }
}

fn print_parsable(entries: &[&Entry], header: bool) {
    if header {
        let (major, minor) = mpi_version();
        println!("package:stormpi {}", env!("CARGO_PKG_VERSION"));
        println!("mpi-version:{major}.{minor}");
        println!("abi:mpich");
        for c in COMPONENTS {
            match c.priority {
                Some(p) => println!("component:{}:{}:priority:{p}", c.framework, c.name),
                None => println!("component:{}:{}", c.framework, c.name),
            }
        }
    }
    for e in entries {
        let n = e.def.name;
        println!("param:{n}:value:{}", e.value);
        println!("param:{n}:default:{}", default_text(e));
        println!("param:{n}:source:{}", e.source.name());
        match e.def.kind {
            Kind::Int { min, max } => println!("param:{n}:type:int:{min}:{max}"),
            Kind::Bool => println!("param:{n}:type:bool"),
            Kind::Str => println!("param:{n}:type:string"),
        }
        println!("param:{n}:help:{}", e.def.description);
    }
}
