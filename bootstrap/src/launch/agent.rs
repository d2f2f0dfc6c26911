//! The launch agent: the command that starts a rank on another host.
//!
//! A remote rank is started as
//!
//! ```text
//! <agent words> <host> env NAME=VALUE... <stormrun> --exec-with-pmi-key <program> <args>...
//! ```
//!
//! `env` sets the rank's environment (see [`crate::launch`]) on the far
//! side, whatever the agent does with its own environment. Agents differ in
//! what they do with the words after the host:
//!
//! * `ssh` (and `rsh`) join them with spaces into one string that the
//!   remote user's shell parses again. Each word must therefore be quoted
//!   for a POSIX shell, and the command is passed as a single argument.
//! * `ip netns exec`, `sudo -u`, `chroot` and the like pass them to
//!   `execvp` as they are; quoting would reach the program.
//!
//! [`QuoteMode::Auto`] quotes when the agent's program is `ssh` or `rsh`
//! (by its file name, so `/usr/bin/ssh -p 2222` counts); `--launch-agent-quote
//! always|never` decides for agents the rule cannot recognise (e.g.
//! `timeout 30 ssh`).
//!
//! The rank's PMI key must not appear on a command line (anyone on either
//! host can read those), so the remote command starts with stormrun's exec
//! helper ([`KEY_HELPER_FLAG`]): stormrun writes the key as the first line
//! of the agent's stdin, and the helper, on the far side, reads that one
//! line, puts the key in the environment and execs the program, which
//! inherits the rest of stdin. So stormrun must be installed at the same
//! path on every host, as its ranks' programs must be.
//!
//! Teardown signals the agent's process group. With an exec-style agent the
//! rank *is* that process (`ip netns exec` execs the command), so it dies.
//! With ssh, killing the local client closes the connection; sshd then
//! ends the session, but a remote process without a terminal is not sent a
//! signal: it goes on until it next writes its output (SIGPIPE) or talks to
//! PMI (stormrun closes the remote ranks' PMI connections at teardown, so
//! any PMI call fails). A rank that does neither may linger on its host.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Whether the words after the host are quoted for a remote shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuoteMode {
    /// Quote when the agent is `ssh` or `rsh`.
    #[default]
    Auto,
    /// Always quote (the agent hands the command to a shell).
    Always,
    /// Never quote (the agent executes the words as argv).
    Never,
}

impl QuoteMode {
    /// Parses `auto`, `always` or `never`.
    pub fn parse(text: &str) -> Option<QuoteMode> {
        match text {
            "auto" => Some(QuoteMode::Auto),
            "always" => Some(QuoteMode::Always),
            "never" => Some(QuoteMode::Never),
            _ => None,
        }
    }
}

/// First argument of stormrun's exec helper mode: `stormrun
/// --exec-with-pmi-key PROGRAM ARGS...` (see [`exec_with_key`]).
pub const KEY_HELPER_FLAG: &str = "--exec-with-pmi-key";

/// The working directory the exec helper runs a remote rank in (`--wdir`).
pub const WDIR_ENV: &str = "STORMPI_WDIR";

/// Directories the exec helper puts before `PATH` for a remote rank (`--path`).
pub const PATH_ENV: &str = "STORMPI_PATH";

/// `dirs` followed by this process's `PATH`: where the program is looked for.
pub fn search_path(dirs: &OsStr) -> OsString {
    let mut p = dirs.to_os_string();
    if let Some(rest) = std::env::var_os("PATH") {
        p.push(":");
        p.push(rest);
    }
    p
}

/// The longest key line the helper reads.
const MAX_KEY_LINE: usize = 256;

/// The exec helper: reads the PMI key from the first line of stdin (one
/// byte at a time, so nothing after it is consumed), then execs `argv` with
/// the key in [`crate::pmi::port::KEY_ENV`]. Returns only on failure, with
/// the exit status to use after printing the error.
pub fn exec_with_key(argv: &[OsString]) -> i32 {
    use std::io::Read;
    use std::os::unix::process::CommandExt;

    let Some((program, args)) = argv.split_first() else {
        eprintln!("stormrun {KEY_HELPER_FLAG}: no program given");
        return 127;
    };
    let mut line = Vec::new();
    let mut stdin = std::io::stdin().lock();
    let mut byte = [0u8; 1];
    let ok = loop {
        match stdin.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break true,
            Ok(1) if line.len() < MAX_KEY_LINE => line.push(byte[0]),
            Ok(_) => break false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    let key = std::str::from_utf8(&line)
        .ok()
        .filter(|_| ok)
        .and_then(crate::auth::Key::from_hex);
    let Some(key) = key else {
        eprintln!(
            "stormrun {KEY_HELPER_FLAG}: stdin did not start with the PMI key (this mode is for \
             stormrun's launch agent only)"
        );
        return 127;
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).env(crate::pmi::port::KEY_ENV, key.to_hex());
    if let Some(dir) = std::env::var_os(WDIR_ENV) {
        if !std::path::Path::new(&dir).is_dir() {
            eprintln!(
                "stormrun: --wdir {}: not a directory on {}",
                dir.to_string_lossy(),
                super::hosts::local_hostname()
            );
            return 127;
        }
        cmd.env_remove(WDIR_ENV).current_dir(dir);
    }
    if let Some(dirs) = std::env::var_os(PATH_ENV) {
        cmd.env_remove(PATH_ENV).env("PATH", search_path(&dirs));
    }
    // This host's usable cores, for the library's spin-or-yield choice
    // (measured before binding narrows them).
    let cores = super::bind::allowed_cpus().len().max(1);
    cmd.env("STORMPI_NUM_CORES", cores.to_string());
    if let Some(text) = std::env::var_os(super::bind::REQUEST_ENV) {
        cmd.env_remove(super::bind::REQUEST_ENV);
        let rank = std::env::var("PMI_ID").unwrap_or_else(|_| "?".into());
        let req = text
            .to_str()
            .and_then(super::bind::Request::from_env)
            .ok_or_else(|| format!("bad {} value", super::bind::REQUEST_ENV))
            .and_then(|req| super::bind::bind_self(&req, &rank));
        match req {
            Ok(Some(report)) => eprintln!("stormrun: {report}"),
            Ok(None) => {}
            Err(e) => {
                eprintln!(
                    "stormrun: rank {rank} on {}: {e}",
                    super::hosts::local_hostname()
                );
                return 127;
            }
        }
    }
    let e = cmd.exec();
    eprintln!(
        "stormrun {KEY_HELPER_FLAG}: cannot run `{}`: {e}",
        program.to_string_lossy()
    );
    127
}

/// The agent used when `--launch-agent` is not given.
pub const DEFAULT_AGENT: &str = "ssh";

/// A launch agent, ready to build command lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchAgent {
    /// The agent's program and its options.
    pub words: Vec<String>,
    /// Whether the remote command is one shell-quoted string.
    pub quote: bool,
}

impl LaunchAgent {
    /// An agent from its command text (split like a shell would, with
    /// quotes and backslashes, but no expansions).
    pub fn new(text: &str, mode: QuoteMode) -> Result<LaunchAgent, String> {
        let words = split_words(text)?;
        let Some(program) = words.first() else {
            return Err("the launch agent is empty".into());
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        let quote = match mode {
            QuoteMode::Always => true,
            QuoteMode::Never => false,
            QuoteMode::Auto => matches!(name, "ssh" | "rsh"),
        };
        Ok(LaunchAgent { words, quote })
    }

    /// The argv that starts `program args` on `host` with `env` set.
    pub fn command_line(
        &self,
        host: &str,
        env: &[(OsString, OsString)],
        program: &OsStr,
        args: &[OsString],
    ) -> Vec<OsString> {
        let mut remote: Vec<OsString> = vec!["env".into()];
        for (k, v) in env {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            remote.push(kv);
        }
        remote.push(program.to_os_string());
        remote.extend(args.iter().cloned());

        let mut argv: Vec<OsString> = self.words.iter().map(OsString::from).collect();
        argv.push(host.into());
        if self.quote {
            let mut line = Vec::new();
            for (i, w) in remote.iter().enumerate() {
                if i > 0 {
                    line.push(b' ');
                }
                line.extend(shell_quote(w.as_bytes()));
            }
            argv.push(OsString::from_vec(line));
        } else {
            argv.extend(remote);
        }
        argv
    }
}

/// Splits a command into words as a POSIX shell would, without expansions:
/// blanks separate; `'...'` is literal; inside `"..."` a backslash escapes
/// only `"`, `\`, `$`, `` ` `` and a newline; outside quotes a backslash
/// protects the next character.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated ' in `{text}`")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(format!("unterminated \" in `{text}`")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated \" in `{text}`")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err(format!("`{text}` ends with a backslash")),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Quotes `word` for a POSIX shell: unchanged if it holds only characters
/// no shell treats specially, else in single quotes (inside which only `'`
/// itself needs care: it becomes `'\''`).
pub fn shell_quote(word: &[u8]) -> Vec<u8> {
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(b);
    if !word.is_empty() && word.iter().all(plain) {
        return word.to_vec();
    }
    let mut out = Vec::with_capacity(word.len() + 2);
    out.push(b'\'');
    for &b in word {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn env(v: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        v.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(split_words("ssh").unwrap(), ["ssh"]);
        assert_eq!(
            split_words("  ip  netns\texec ").unwrap(),
            ["ip", "netns", "exec"]
        );
        assert_eq!(
            split_words(r#"ssh -o 'ProxyJump a b' -p\ 1 "x \"y\" \\ \z" ''"#).unwrap(),
            ["ssh", "-o", "ProxyJump a b", "-p 1", r#"x "y" \ \z"#, ""]
        );
        assert!(split_words("ssh 'open").is_err());
        assert!(split_words("ssh \"open").is_err());
        assert!(split_words("ssh \\").is_err());
        assert!(LaunchAgent::new("   ", QuoteMode::Auto).is_err());
    }

    #[test]
    fn quoting_is_chosen_by_agent() {
        let q = |t: &str, m| LaunchAgent::new(t, m).unwrap().quote;
        assert!(q("ssh", QuoteMode::Auto));
        assert!(q("/usr/bin/ssh -p 2222", QuoteMode::Auto));
        assert!(q("rsh", QuoteMode::Auto));
        assert!(!q("ip netns exec", QuoteMode::Auto));
        assert!(!q("sshpass-wrapper", QuoteMode::Auto));
        assert!(q("timeout 30 ssh", QuoteMode::Always));
        assert!(!q("ssh", QuoteMode::Never));
        assert_eq!(QuoteMode::parse("never"), Some(QuoteMode::Never));
        assert_eq!(QuoteMode::parse("yes"), None);
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(
            shell_quote(b"PMI_PORT=10.1.2.1:4000"),
            b"PMI_PORT=10.1.2.1:4000"
        );
        assert_eq!(shell_quote(b""), b"''");
        assert_eq!(shell_quote(b"a b"), b"'a b'");
        assert_eq!(shell_quote(b"it's"), b"'it'\\''s'");
        assert_eq!(shell_quote(b"$HOME;`x`*\n"), b"'$HOME;`x`*\n'");
    }

    #[test]
    fn ip_netns_exec_gets_plain_argv() {
        let agent = LaunchAgent::new("ip netns exec", QuoteMode::Auto).unwrap();
        let argv = agent.command_line(
            "stormpi-h1-42",
            &env(&[("PMI_PORT", "10.1.2.1:4000"), ("X", "a b")]),
            OsStr::new("/bin/prog"),
            &os(&["it's", ""]),
        );
        assert_eq!(
            argv,
            os(&[
                "ip",
                "netns",
                "exec",
                "stormpi-h1-42",
                "env",
                "PMI_PORT=10.1.2.1:4000",
                "X=a b",
                "/bin/prog",
                "it's",
                "",
            ])
        );
    }

    #[test]
    fn ssh_gets_one_quoted_command() {
        let agent = LaunchAgent::new("ssh -p 2222", QuoteMode::Auto).unwrap();
        let argv = agent.command_line(
            "node7",
            &env(&[
                ("PMI_PORT", "10.1.2.1:4000"),
                ("PMI_ID", "3"),
                ("STORMPI_MCA_btl", "tcp,self"),
                ("MSG", "it's $HOME"),
            ]),
            OsStr::new("/home/me/my prog"),
            &os(&["-n", "5", "a;b", ""]),
        );
        assert_eq!(
            argv,
            os(&[
                "ssh",
                "-p",
                "2222",
                "node7",
                "env PMI_PORT=10.1.2.1:4000 PMI_ID=3 STORMPI_MCA_btl=tcp,self \
                 'MSG=it'\\''s $HOME' '/home/me/my prog' -n 5 'a;b' ''",
            ])
        );
    }

    /// What a real shell makes of the quoted command: the same words.
    #[test]
    fn quoted_command_survives_a_shell() {
        let agent = LaunchAgent::new("ssh", QuoteMode::Auto).unwrap();
        let tricky = ["it's", "a  b", "$HOME", "`x`", "\\", "\"q\"", "*", "", "é"];
        let argv = agent.command_line(
            "h",
            &env(&[("V", "x'y z")]),
            OsStr::new("printf"),
            &[OsString::from("[%s]"), OsString::from(tricky.join("|"))]
                .into_iter()
                .chain(tricky.iter().map(OsString::from))
                .collect::<Vec<_>>(),
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&argv[2])
            .output()
            .unwrap();
        let want: String = std::iter::once(tricky.join("|"))
            .chain(tricky.iter().map(|s| s.to_string()))
            .map(|w| format!("[{w}]"))
            .collect();
        assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    }
}
