//! Where run-time parameters come from on Linux.
//!
//! First the environment (`STORMPI_MCA_<name>=value`, which is also how `stormrun --mca NAME
//! VALUE` passes them), then a config file of `name = value` lines: `$STORMPI_MCA_CONF` if set,
//! else `~/.stormpi/mca-params.conf`. The names stormrun set from its command line are listed in
//! [`CMDLINE_ENV`], so their values say so ([`CmdlineSource`]).

use std::collections::HashMap;

use stormpi_core::params::{ParamSource, Source};

/// The variable in which the launcher lists (comma-separated) the parameters it set from its
/// command line (`stormrun --mca NAME VALUE`).
pub const CMDLINE_ENV: &str = "STORMPI_MCA_CMDLINE";

/// The launcher's `--mca` parameters: `STORMPI_MCA_<name>` variables it lists in [`CMDLINE_ENV`].
pub struct CmdlineSource {
    names: Vec<String>,
}

impl CmdlineSource {
    /// The names listed in the environment now.
    pub fn from_env() -> CmdlineSource {
        let names = std::env::var(CMDLINE_ENV)
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        CmdlineSource { names }
    }
}

impl ParamSource for CmdlineSource {
    fn source(&self) -> Source {
        Source::CommandLine
    }

    fn lookup(&self, name: &str, out: &mut [u8]) -> Option<usize> {
        if !self.names.iter().any(|n| n == name) {
            return None;
        }
        EnvSource.lookup(name, out)
    }
}

/// Parameters from `STORMPI_MCA_<name>` environment variables.
pub struct EnvSource;

impl ParamSource for EnvSource {
    fn source(&self) -> Source {
        Source::Environment
    }

    fn lookup(&self, name: &str, out: &mut [u8]) -> Option<usize> {
        let v = std::env::var(format!("STORMPI_MCA_{name}"))
            .or_else(|_| std::env::var(format!("STORMPI_MCA_{}", name.to_ascii_uppercase())))
            .ok()?;
        let n = v.len().min(out.len());
        out[..n].copy_from_slice(&v.as_bytes()[..n]);
        Some(n)
    }
}

/// Parameters from a config file.
pub struct FileSource {
    values: HashMap<String, String>,
}

impl FileSource {
    /// Reads the config file, if there is one; a line that is not `name = value` is reported
    /// and skipped.
    pub fn load() -> FileSource {
        let path = std::env::var_os("STORMPI_MCA_CONF")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| std::path::Path::new(&h).join(".stormpi/mca-params.conf"))
            });
        let text = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        FileSource::parse(&text, path.as_deref())
    }

    /// Parses `name = value` lines; `#` starts a comment.
    pub fn parse(text: &str, path: Option<&std::path::Path>) -> FileSource {
        let mut values = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            match line.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    values.insert(k.trim().to_string(), v.trim().to_string());
                }
                _ => eprintln!(
                    "stormpi: warning: {}:{}: ignoring line that is not 'name = value': {line}",
                    path.map_or("config".into(), |p| p.display().to_string()),
                    i + 1
                ),
            }
        }
        FileSource { values }
    }
}

impl ParamSource for FileSource {
    fn source(&self) -> Source {
        Source::File
    }

    fn lookup(&self, name: &str, out: &mut [u8]) -> Option<usize> {
        let v = self.values.get(name)?;
        let n = v.len().min(out.len());
        out[..n].copy_from_slice(&v.as_bytes()[..n]);
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_lines_parse_and_comments_are_ignored() {
        let f = FileSource::parse(
            "# comment\nbtl = sm,self  # trailing\n\n btl_sm_eager_limit=8k\nbogus line\n",
            None,
        );
        let mut out = [0u8; 64];
        let n = f.lookup("btl", &mut out).unwrap();
        assert_eq!(&out[..n], b"sm,self");
        let n = f.lookup("btl_sm_eager_limit", &mut out).unwrap();
        assert_eq!(&out[..n], b"8k");
        assert!(f.lookup("bogus line", &mut out).is_none());
    }
}
