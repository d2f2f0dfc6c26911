//! The command line of `stormrun`, modelled on `mpirun`:
//!
//! ```text
//! stormrun [job options] [-n N] prog [args] [: [-n N] prog [args]]...
//! ```
//!
//! Each `:`-separated part is an application context (MPMD). Options are
//! described once, in the `OPTIONS` table; each is either job-wide (it may appear in
//! any context) or belongs to the context it appears in (`-n`). Adding an
//! option is one table row and one match arm in `apply`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use super::address;
use super::agent::{self, QuoteMode};
use super::bind;
use super::hosts::{self, Host, MapBy};

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Launch a job.
    Run(Box<LaunchSpec>),
    /// Print the help text.
    Help,
    /// Print the version.
    Version,
}

/// A parsed launch request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LaunchSpec {
    /// Options that apply to the whole job.
    pub options: JobOptions,
    /// The programs to start, in rank order.
    pub apps: Vec<AppContext>,
}

/// Whether local ranks lead sessions of their own (so autogroup scheduling gives each its share
/// of a busy machine) or stay in stormrun's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sessions {
    /// Their own when the node's ranks fit its cores, else stormrun's.
    #[default]
    Auto,
    /// Their own (`--own-sessions`).
    Own,
    /// stormrun's (`--same-session`).
    Same,
}

/// Job-wide options.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobOptions {
    /// Allow more ranks than cores.
    pub oversubscribe: bool,
    /// `-x` exports, in command-line order.
    pub exports: Vec<Export>,
    /// Prefix each output line with its rank.
    pub tag_output: bool,
    /// Kill the job after this long.
    pub timeout: Option<Duration>,
    /// `--mca NAME VALUE` parameters, in command-line order.
    pub mca: Vec<(String, OsString)>,
    /// `--host` entries, in command-line order (repeats not yet merged).
    pub hosts: Vec<Host>,
    /// `--hostfile`, read when the job is configured.
    pub hostfile: Option<PathBuf>,
    /// `--launch-agent` (default [`agent::DEFAULT_AGENT`]).
    pub launch_agent: Option<String>,
    /// `--launch-agent-quote`.
    pub agent_quote: QuoteMode,
    /// `--pmi-address`.
    pub pmi_address: Option<SocketAddr>,
    /// `--pmi-unauthenticated`.
    pub pmi_unauthenticated: bool,
    /// `--bind-to`.
    pub bind_to: bind::Level,
    /// `--bind-to LEVEL:overload-allowed`.
    pub bind_overload: bool,
    /// `--map-by` (or `-N`).
    pub map_by: MapBy,
    /// `--rankfile`, read when the job is configured.
    pub rankfile: Option<PathBuf>,
    /// `--report-bindings`.
    pub report_bindings: bool,
    /// `--own-sessions` / `--same-session`: whether local ranks lead sessions of their own.
    pub sessions: Sessions,
    /// `--cpus-per-rank` (1 when not given).
    pub cpus_per_rank: Option<u32>,
    /// `--output-filename DIR[:nocopy]`: per-rank output files under DIR, and
    /// whether output is also copied to stormrun's own.
    pub output_dir: Option<(PathBuf, bool)>,
    /// `--wdir`: the ranks' working directory.
    pub wdir: Option<PathBuf>,
    /// `--path`: directories searched for the program before `PATH`.
    pub path: Option<OsString>,
}

/// One `-x` argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Export {
    /// `-x VAR`: pass VAR's value from stormrun's environment.
    Inherit(String),
    /// `-x VAR=value`: set VAR to value.
    Set(String, OsString),
}

/// One application context: a program, its arguments and its rank count.
#[derive(Debug, Clone, PartialEq)]
pub struct AppContext {
    /// `-n`, if given.
    pub np: Option<u32>,
    /// The program to run (looked up in `PATH` if it has no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// A command-line problem, with a message for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError(msg.into()))
}

/// The options stormrun knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Np,
    Oversubscribe,
    Export,
    TagOutput,
    Timeout,
    Mca,
    Host,
    Hostfile,
    LaunchAgent,
    AgentQuote,
    PmiAddress,
    PmiUnauthenticated,
    BindTo,
    MapBy,
    NPerNode,
    Rankfile,
    ReportBindings,
    OwnSessions,
    SameSession,
    CpusPerRank,
    OutputFilename,
    Wdir,
    Path,
    Help,
    Version,
}

/// One row of the option table.
struct OptSpec {
    names: &'static [&'static str],
    opt: Opt,
    /// Names of the values the option takes (their count is its arity).
    values: &'static [&'static str],
    help: &'static str,
}

/// Every option, in the order `--help` lists them.
const OPTIONS: &[OptSpec] = &[
    OptSpec {
        names: &["-n", "-np", "--np", "--n"],
        opt: Opt::Np,
        values: &["N"],
        help: "start N copies of the program (per application context; default: one per core)",
    },
    OptSpec {
        names: &["--oversubscribe", "-oversubscribe"],
        opt: Opt::Oversubscribe,
        values: &[],
        help: "allow more ranks than cores (or than the hosts' slots: wrap around)",
    },
    OptSpec {
        names: &["-x"],
        opt: Opt::Export,
        values: &["VAR[=VALUE]"],
        help: "export VAR from stormrun's environment to the ranks, or set it to VALUE",
    },
    OptSpec {
        names: &["--tag-output", "-tag-output"],
        opt: Opt::TagOutput,
        values: &[],
        help: "prefix each output line with [1,RANK]<stdout>: or [1,RANK]<stderr>:",
    },
    OptSpec {
        names: &["--timeout", "-timeout"],
        opt: Opt::Timeout,
        values: &["SECONDS"],
        help: "kill the job if it runs longer than SECONDS (exit status 124)",
    },
    OptSpec {
        names: &["--mca", "-mca"],
        opt: Opt::Mca,
        values: &["NAME", "VALUE"],
        help: "set run-time parameter NAME (passed to ranks as STORMPI_MCA_NAME=VALUE)",
    },
    OptSpec {
        names: &["--host", "-host", "-H", "--H"],
        opt: Opt::Host,
        values: &["HOST[:SLOTS],..."],
        help: "run on these hosts, filling each one's SLOTS (default 1) in order",
    },
    OptSpec {
        names: &["--hostfile", "-hostfile", "--machinefile", "-machinefile"],
        opt: Opt::Hostfile,
        values: &["FILE"],
        help: "hosts from FILE: lines `HOST [slots=N]` or `HOST:N`, # comments",
    },
    OptSpec {
        names: &["--launch-agent", "-launch-agent"],
        opt: Opt::LaunchAgent,
        values: &["CMD"],
        help: "start remote ranks with `CMD HOST env VAR=VALUE... STORMRUN --exec-with-pmi-key PROGRAM \
               ARGS` (default: ssh; stormrun must be at the same path there)",
    },
    OptSpec {
        names: &["--launch-agent-quote"],
        opt: Opt::AgentQuote,
        values: &["WHEN"],
        help: "auto|always|never: quote the remote command for a shell (auto: for ssh, rsh)",
    },
    OptSpec {
        names: &["--pmi-address", "-pmi-address"],
        opt: Opt::PmiAddress,
        values: &["ADDR[:PORT]"],
        help: "this machine's address remote ranks reach the PMI server at",
    },
    OptSpec {
        names: &["--pmi-unauthenticated"],
        opt: Opt::PmiUnauthenticated,
        values: &[],
        help: "serve remote ranks whose PMI client cannot prove the job's key (another MPI's \
               library) on a first-come basis; only on a network you trust",
    },
    OptSpec {
        names: &["--bind-to", "-bind-to"],
        opt: Opt::BindTo,
        values: &["LEVEL"],
        help: "bind ranks to none|hwthread|core|socket|numa (add :overload-allowed to let \
               ranks share); default: cores when a node's ranks fit its cores, else none",
    },
    OptSpec {
        names: &["--map-by", "-map-by"],
        opt: Opt::MapBy,
        values: &["POLICY"],
        help: "place ranks by slot (fill each host in turn; default), core (the same), node \
               (round robin over hosts) or ppr:N:node (N ranks per host)",
    },
    OptSpec {
        names: &["-N", "--npernode", "-npernode"],
        opt: Opt::NPerNode,
        values: &["N"],
        help: "N ranks per host (--map-by ppr:N:node)",
    },
    OptSpec {
        names: &["--rankfile", "-rankfile", "-rf"],
        opt: Opt::Rankfile,
        values: &["FILE"],
        help: "host and cores of each rank from FILE: lines `rank R=HOST slot=CORES` (CORES: \
               cores like 0-1, or SOCKET:CORES like 1:0)",
    },
    OptSpec {
        names: &["--report-bindings", "-report-bindings"],
        opt: Opt::ReportBindings,
        values: &[],
        help: "print each rank's binding on stderr as it starts",
    },
    OptSpec {
        names: &["--own-sessions"],
        opt: Opt::OwnSessions,
        values: &[],
        help: "start every rank in a session of its own also when the ranks outnumber the cores \
               (their idle waits then sleep: slower handoffs, but more of a machine busy with \
               other work)",
    },
    OptSpec {
        names: &["--same-session"],
        opt: Opt::SameSession,
        values: &[],
        help: "keep every rank in stormrun's session (each in a process group of its own), also \
               when the ranks fit the cores",
    },
    OptSpec {
        names: &["--cpus-per-rank", "-cpus-per-rank", "--cpus-per-proc"],
        opt: Opt::CpusPerRank,
        values: &["N"],
        help: "bind each rank to N consecutive cores (a thread per core for threaded ranks)",
    },
    OptSpec {
        names: &["--output-filename", "-output-filename"],
        opt: Opt::OutputFilename,
        values: &["DIR[:nocopy]"],
        help: "also write each rank's output to DIR/1/rank.R/stdout and stderr (:nocopy: only \
               there)",
    },
    OptSpec {
        names: &["--wdir", "-wdir", "--wd", "-wd"],
        opt: Opt::Wdir,
        values: &["DIR"],
        help: "run the ranks in DIR (default: stormrun's working directory)",
    },
    OptSpec {
        names: &["--path", "-path"],
        opt: Opt::Path,
        values: &["DIRS"],
        help: "look for the program in DIRS (colon-separated) before PATH",
    },
    OptSpec {
        names: &["-h", "--help"],
        opt: Opt::Help,
        values: &[],
        help: "show this help",
    },
    OptSpec {
        names: &["-V", "--version"],
        opt: Opt::Version,
        values: &[],
        help: "show the version",
    },
];

fn lookup(name: &str) -> Option<&'static OptSpec> {
    OPTIONS.iter().find(|spec| spec.names.contains(&name))
}

/// Parses stormrun's arguments (without the program name).
pub fn parse<I>(args: I) -> Result<Command, ArgError>
where
    I: IntoIterator<Item = OsString>,
{
    let args: Vec<OsString> = args.into_iter().collect();
    let mut options = JobOptions::default();
    let mut apps = Vec::new();
    let mut i = 0;
    loop {
        // Options of this context, up to its program.
        let mut np = None;
        loop {
            let Some(arg) = args.get(i) else {
                return if apps.is_empty() && i == 0 {
                    err("no program given")
                } else {
                    err("an application context has options but no program")
                };
            };
            let Some(word) = arg.to_str() else { break };
            if word == "--" {
                i += 1;
                break;
            }
            if word == ":" {
                return err("an application context before `:` has no program");
            }
            if !word.starts_with('-') || word == "-" {
                break;
            }
            // `--name=value` for long options that take one value.
            let (name, inline) = match word.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(OsString::from(v))),
                _ => (word, None),
            };
            let Some(spec) = lookup(name) else {
                return err(format!("unknown option `{word}` (see stormrun --help)"));
            };
            i += 1;
            let mut values = Vec::new();
            if let Some(v) = inline {
                if spec.values.len() != 1 {
                    return err(format!("option `{name}` does not take `=value`"));
                }
                values.push(v);
            } else {
                for value_name in spec.values {
                    match args.get(i) {
                        Some(v) => values.push(v.clone()),
                        None => return err(format!("option `{name}` needs {value_name}")),
                    }
                    i += 1;
                }
            }
            match spec.opt {
                Opt::Help => return Ok(Command::Help),
                Opt::Version => return Ok(Command::Version),
                opt => apply(opt, name, &values, &mut options, &mut np)?,
            }
        }

        let Some(program) = args.get(i) else {
            return err("an application context has options but no program");
        };
        if program.is_empty() {
            return err("empty program name");
        }
        i += 1;
        let rest = &args[i..];
        let end = rest.iter().position(|a| a == ":").unwrap_or(rest.len());
        apps.push(AppContext {
            np,
            program: program.clone(),
            args: rest[..end].to_vec(),
        });
        i += end;
        if i == args.len() {
            break;
        }
        i += 1; // the `:`
        if i == args.len() {
            return err("nothing follows the last `:`");
        }
    }
    Ok(Command::Run(Box::new(LaunchSpec { options, apps })))
}

/// Applies one option with its values.
fn apply(
    opt: Opt,
    name: &str,
    values: &[OsString],
    options: &mut JobOptions,
    np: &mut Option<u32>,
) -> Result<(), ArgError> {
    let text = |v: &OsStr| -> Result<String, ArgError> {
        v.to_str()
            .map(str::to_string)
            .ok_or_else(|| ArgError(format!("the value of `{name}` is not valid UTF-8")))
    };
    match opt {
        Opt::Np => {
            let v = text(&values[0])?;
            match v.parse::<u32>() {
                Ok(n) if n > 0 => *np = Some(n),
                _ => {
                    return err(format!(
                        "`{name}` needs a positive number of ranks, not `{v}`"
                    ))
                }
            }
        }
        Opt::Oversubscribe => options.oversubscribe = true,
        Opt::TagOutput => options.tag_output = true,
        Opt::Export => {
            let raw = values[0].as_bytes();
            let (var, value) = match raw.iter().position(|&b| b == b'=') {
                Some(eq) => (&raw[..eq], Some(&raw[eq + 1..])),
                None => (raw, None),
            };
            let var = std::str::from_utf8(var)
                .ok()
                .filter(|v| is_env_name(v))
                .ok_or_else(|| {
                    ArgError(format!(
                        "`-x {}`: not a valid environment variable name",
                        values[0].to_string_lossy()
                    ))
                })?;
            options.exports.push(match value {
                Some(v) => Export::Set(var.to_string(), OsStr::from_bytes(v).to_os_string()),
                None => Export::Inherit(var.to_string()),
            });
        }
        Opt::Timeout => {
            let v = text(&values[0])?;
            match v.parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => {
                    options.timeout = Some(Duration::from_secs_f64(s))
                }
                _ => {
                    return err(format!(
                        "`{name}` needs a positive number of seconds, not `{v}`"
                    ))
                }
            }
        }
        Opt::Mca => {
            let param = text(&values[0])?;
            if param.is_empty() || !param.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return err(format!(
                    "`{name} {param}`: parameter names use only letters, digits and `_`"
                ));
            }
            options.mca.push((param, values[1].clone()));
        }
        Opt::Host => {
            let list = text(&values[0])?;
            options
                .hosts
                .extend(hosts::parse_host_list(&list).map_err(ArgError)?);
        }
        Opt::Hostfile => {
            if options.hostfile.is_some() {
                return err(format!("`{name}` given twice"));
            }
            options.hostfile = Some(PathBuf::from(&values[0]));
        }
        Opt::LaunchAgent => {
            let cmd = text(&values[0])?;
            // Checked now, used when the job is configured.
            agent::LaunchAgent::new(&cmd, QuoteMode::Auto)
                .map_err(|e| ArgError(format!("`{name}`: {e}")))?;
            options.launch_agent = Some(cmd);
        }
        Opt::AgentQuote => {
            let v = text(&values[0])?;
            options.agent_quote = QuoteMode::parse(&v).ok_or_else(|| {
                ArgError(format!("`{name}` takes auto, always or never, not `{v}`"))
            })?;
        }
        Opt::PmiAddress => {
            let v = text(&values[0])?;
            options.pmi_address = Some(address::parse_pmi_address(&v).map_err(ArgError)?);
        }
        Opt::PmiUnauthenticated => options.pmi_unauthenticated = true,
        Opt::BindTo => {
            let v = text(&values[0])?;
            let (level, qualifier) = match v.split_once(':') {
                Some((l, q)) => (l, Some(q)),
                None => (v.as_str(), None),
            };
            options.bind_to = bind::Level::parse(level).ok_or_else(|| {
                ArgError(format!(
                    "`{name}` takes none, hwthread, core, socket or numa, not `{level}`"
                ))
            })?;
            match qualifier {
                None => {}
                Some("overload-allowed") => options.bind_overload = true,
                Some(q) => {
                    return err(format!(
                        "`{name} {v}`: the only qualifier is overload-allowed, not `{q}`"
                    ))
                }
            }
        }
        Opt::MapBy => {
            let v = text(&values[0])?;
            options.map_by = MapBy::parse(&v).ok_or_else(|| {
                ArgError(format!(
                    "`{name}` takes slot, core, node or ppr:N:node, not `{v}`"
                ))
            })?;
        }
        Opt::NPerNode => {
            let v = text(&values[0])?;
            match v.parse::<u32>() {
                Ok(n) if n > 0 => options.map_by = MapBy::PerNode(n),
                _ => return err(format!("`{name}` needs a positive number, not `{v}`")),
            }
        }
        Opt::Rankfile => {
            if options.rankfile.is_some() {
                return err(format!("`{name}` given twice"));
            }
            options.rankfile = Some(PathBuf::from(&values[0]));
        }
        Opt::ReportBindings => options.report_bindings = true,
        Opt::SameSession => options.sessions = Sessions::Same,
        Opt::OwnSessions => options.sessions = Sessions::Own,
        Opt::CpusPerRank => {
            let v = text(&values[0])?;
            match v.parse::<u32>() {
                Ok(n) if n > 0 => options.cpus_per_rank = Some(n),
                _ => return err(format!("`{name}` needs a positive number, not `{v}`")),
            }
        }
        Opt::OutputFilename => {
            let raw = values[0].as_bytes();
            let (dir, copy) = match raw
                .strip_suffix(b":nocopy")
                .or(raw.strip_suffix(b":NOCOPY"))
            {
                Some(d) => (d, false),
                None => (raw, true),
            };
            if dir.is_empty() {
                return err(format!("`{name}` needs a directory"));
            }
            options.output_dir = Some((PathBuf::from(OsStr::from_bytes(dir)), copy));
        }
        Opt::Wdir => options.wdir = Some(PathBuf::from(&values[0])),
        Opt::Path => {
            if values[0].is_empty() {
                return err(format!("`{name}` needs directories"));
            }
            options.path = Some(values[0].clone());
        }
        // The caller answers these before it applies options.
        Opt::Help | Opt::Version => {}
    }
    Ok(())
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl LaunchSpec {
    /// Ranks per application context. A single context without `-n` gets
    /// `default` ranks (one per core, or one per slot of a host list, as
    /// with `mpirun`); in an MPMD launch every context must say how many
    /// ranks it wants.
    pub fn rank_counts(&self, default: u32) -> Result<Vec<u32>, ArgError> {
        if self.apps.len() == 1 {
            return Ok(vec![self.apps[0].np.unwrap_or(default)]);
        }
        self.apps
            .iter()
            .enumerate()
            .map(|(i, app)| {
                app.np.ok_or_else(|| {
                    ArgError(format!(
                        "application context {} (`{}`) needs -n: an MPMD launch gives each program its rank count",
                        i + 1,
                        app.program.to_string_lossy()
                    ))
                })
            })
            .collect()
    }
}

/// The text `stormrun --help` prints.
pub fn help_text() -> String {
    let mut s = String::from(
        "Usage: stormrun [options] [-n N] PROGRAM [ARGS...] [: [-n N] PROGRAM [ARGS...]]...\n\
         \n\
         Starts N copies of PROGRAM as one MPI job, on this node or on the hosts of\n\
         --host/--hostfile. Several programs separated by `:` form one MPMD job; ranks\n\
         are numbered in command-line order and placed in that order, filling each\n\
         host's slots before the next.\n\
         \n\
         Options:\n",
    );
    for spec in OPTIONS {
        let mut left = spec.names.join(", ");
        for v in spec.values {
            left.push(' ');
            left.push_str(v);
        }
        if left.len() > 32 {
            // Too wide for the column: the description goes below.
            s.push_str(&format!("  {left}\n  {:<32} {}\n", "", spec.help));
        } else {
            s.push_str(&format!("  {left:<32} {}\n", spec.help));
        }
    }
    s.push_str(
        "\n\
         Options may also be written --name=VALUE. `--` ends the options of a context.\n\
         \n\
         Ranks inherit stormrun's environment plus PMI_FD, PMI_RANK, PMI_SIZE,\n\
         STORMPI_JOBID, STORMPI_NODE, STORMPI_LOCAL_RANK, STORMPI_LOCAL_SIZE and\n\
         STORMPI_NUM_CORES. Ranks on other hosts (any host but localhost and this\n\
         machine's name) are started through the launch agent and get PMI_PORT and\n\
         PMI_ID instead of PMI_FD, and no STORMPI_NUM_CORES.\n\
         \n\
         Output is forwarded line by line. If a rank exits non-zero, is killed by a\n\
         signal or calls MPI_Abort, the other ranks are killed and stormrun exits with\n\
         that rank's status (128+N for signal N, the abort code for MPI_Abort).\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Command, ArgError> {
        parse(args.iter().map(OsString::from))
    }

    fn run(args: &[&str]) -> LaunchSpec {
        match parse_str(args) {
            Ok(Command::Run(spec)) => *spec,
            other => panic!("{args:?} gave {other:?}"),
        }
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn simple_launch() {
        let spec = run(&["-n", "4", "./ring", "-v", "--size", "10"]);
        assert_eq!(spec.options, JobOptions::default());
        assert_eq!(
            spec.apps,
            vec![AppContext {
                np: Some(4),
                program: "./ring".into(),
                args: os(&["-v", "--size", "10"]),
            }]
        );
        assert_eq!(run(&["-np", "2", "a"]).apps[0].np, Some(2));
        assert_eq!(run(&["--np=3", "a"]).apps[0].np, Some(3));
        assert_eq!(run(&["a"]).apps[0].np, None);
    }

    #[test]
    fn job_options() {
        let spec = run(&[
            "--oversubscribe",
            "-x",
            "FOO",
            "-x",
            "BAR=a=b c",
            "--tag-output",
            "--timeout",
            "2.5",
            "--mca",
            "btl",
            "sm,self",
            "-n",
            "8",
            "prog",
        ]);
        let o = &spec.options;
        assert!(o.oversubscribe && o.tag_output);
        assert_eq!(o.sessions, Sessions::Auto);
        assert_eq!(
            run(&["--same-session", "a"]).options.sessions,
            Sessions::Same
        );
        assert_eq!(
            run(&["--same-session", "--own-sessions", "a"])
                .options
                .sessions,
            Sessions::Own,
            "the last of the two counts"
        );
        assert_eq!(
            o.exports,
            vec![
                Export::Inherit("FOO".into()),
                Export::Set("BAR".into(), "a=b c".into())
            ]
        );
        assert_eq!(o.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(o.mca, vec![("btl".into(), OsString::from("sm,self"))]);
        assert_eq!(
            run(&["--timeout=7", "p"]).options.timeout,
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn mpmd_contexts() {
        let spec = run(&[
            "-n",
            "2",
            "./a",
            "x",
            ":",
            "-n",
            "1",
            "--tag-output",
            "./b",
            "y",
            "z",
            ":",
            "-np",
            "3",
            "./c",
        ]);
        assert!(
            spec.options.tag_output,
            "job options may appear in any context"
        );
        let got: Vec<(Option<u32>, &str, Vec<OsString>)> = spec
            .apps
            .iter()
            .map(|a| (a.np, a.program.to_str().unwrap(), a.args.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(2), "./a", os(&["x"])),
                (Some(1), "./b", os(&["y", "z"])),
                (Some(3), "./c", vec![]),
            ]
        );
        assert_eq!(spec.rank_counts(2).unwrap(), vec![2, 1, 3]);
    }

    #[test]
    fn program_args_are_not_parsed() {
        let spec = run(&["-n", "1", "prog", "-n", "5", "--timeout", "x", "--bogus"]);
        assert_eq!(
            spec.apps[0].args,
            os(&["-n", "5", "--timeout", "x", "--bogus"])
        );
        assert!(spec.options.timeout.is_none());
        // `--` lets a program name start with a dash.
        let spec = run(&["-n", "1", "--", "-weird", "a"]);
        assert_eq!(spec.apps[0].program, "-weird");
    }

    #[test]
    fn rank_counts_defaults() {
        assert_eq!(run(&["a"]).rank_counts(6).unwrap(), vec![6]);
        let e = run(&["-n", "1", "a", ":", "b"]).rank_counts(6).unwrap_err();
        assert!(e.0.contains("`b`") && e.0.contains("needs -n"), "{e}");
    }

    #[test]
    fn host_options() {
        let spec = run(&[
            "--host",
            "h1:2,h2",
            "-H",
            "h3:3",
            "--launch-agent",
            "ip netns exec",
            "--launch-agent-quote",
            "never",
            "--pmi-address",
            "10.1.2.1",
            "-n",
            "4",
            "prog",
        ]);
        let o = &spec.options;
        let names: Vec<(&str, u32)> = o.hosts.iter().map(|h| (h.name.as_str(), h.slots)).collect();
        assert_eq!(names, [("h1", 2), ("h2", 1), ("h3", 3)]);
        assert_eq!(o.launch_agent.as_deref(), Some("ip netns exec"));
        assert_eq!(o.agent_quote, QuoteMode::Never);
        assert_eq!(o.pmi_address, Some("10.1.2.1:0".parse().unwrap()));
        let spec = run(&["--hostfile=/tmp/hosts", "p"]);
        assert_eq!(spec.options.hostfile, Some(PathBuf::from("/tmp/hosts")));
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse_str(&["-h"]), Ok(Command::Help));
        assert_eq!(parse_str(&["-n", "2", "--help", "x"]), Ok(Command::Help));
        assert_eq!(parse_str(&["--version"]), Ok(Command::Version));
        let text = help_text();
        for needle in [
            "--oversubscribe",
            "-x VAR[=VALUE]",
            "-mca NAME VALUE",
            "-timeout SECONDS",
        ] {
            assert!(text.contains(needle), "help lacks {needle}");
        }
    }

    #[test]
    fn errors_are_clear() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "no program given"),
            (&["-n"], "needs N"),
            (&["-n", "0", "a"], "positive number of ranks"),
            (&["-n", "two", "a"], "positive number of ranks"),
            (&["--frob", "a"], "unknown option `--frob`"),
            (&["-n", "2"], "no program"),
            (&["-n", "2", "a", ":"], "nothing follows"),
            (&["-n", "2", "a", ":", ":", "b"], "has no program"),
            (&["-n", "2", "a", ":", "-n", "1"], "no program"),
            (&["--timeout", "0", "a"], "positive number of seconds"),
            (&["--timeout", "-1", "a"], "positive number of seconds"),
            (&["--timeout", "nan", "a"], "positive number of seconds"),
            (
                &["-x", "1BAD", "a"],
                "not a valid environment variable name",
            ),
            (&["-x", "=v", "a"], "not a valid environment variable name"),
            (&["--mca", "btl"], "needs VALUE"),
            (&["--mca", "b-tl", "x", "a"], "parameter names"),
            (&["--oversubscribe=yes", "a"], "does not take `=value`"),
            (&["", "a"], "empty program name"),
            (&["--host", "a:0", "p"], "not a slot count"),
            (&["--host", "-evil", "p"], "starts with `-`"),
            (&["--hostfile", "a", "--hostfile", "b", "p"], "given twice"),
            (&["--launch-agent", "", "p"], "launch agent is empty"),
            (&["--launch-agent", "ssh 'x", "p"], "unterminated"),
            (
                &["--launch-agent-quote", "maybe", "p"],
                "auto, always or never",
            ),
            (&["--pmi-address", "eth0", "p"], "not an IP address"),
            (&["--bind-to", "l3cache", "p"], "none, hwthread, core"),
            (&["--bind-to", "core:maybe", "p"], "overload-allowed"),
            (&["--map-by", "ppr:x:node", "p"], "ppr:N:node"),
            (&["-N", "0", "p"], "positive number"),
            (&["--cpus-per-rank", "0", "p"], "positive number"),
            (&["--rankfile", "a", "--rankfile", "b", "p"], "given twice"),
        ];
        for (args, needle) in cases {
            match parse_str(args) {
                Err(ArgError(msg)) => assert!(msg.contains(needle), "{args:?}: `{msg}`"),
                other => panic!("{args:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn placement_and_binding_options() {
        let o = run(&[
            "--bind-to",
            "socket:overload-allowed",
            "--map-by",
            "ppr:2:node",
            "--report-bindings",
            "--cpus-per-rank=2",
            "p",
        ])
        .options;
        assert_eq!(o.bind_to, bind::Level::Socket);
        assert!(o.bind_overload && o.report_bindings);
        assert_eq!(o.map_by, MapBy::PerNode(2));
        assert_eq!(o.cpus_per_rank, Some(2));
        assert_eq!(run(&["-N", "3", "p"]).options.map_by, MapBy::PerNode(3));
        assert_eq!(run(&["--map-by", "node", "p"]).options.map_by, MapBy::Node);
    }
}
