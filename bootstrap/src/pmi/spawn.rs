//! Spawn requests (`MPI_Comm_spawn`, `MPI_Comm_spawn_multiple`) on the PMI-1 wire, in the
//! multi-line form MPICH's simple PMI client sends: per command a block
//!
//! ```text
//! mcmd=spawn
//! nprocs=N
//! execname=PROGRAM
//! totspawns=COMMANDS
//! spawnssofar=I          (1-based: this is command I of COMMANDS)
//! argcnt=A
//! arg1=...  argA=...
//! preput_num=P
//! preput_key_0=...  preput_val_0=...
//! info_num=K
//! info_key_0=...  info_val_0=...
//! endcmd
//! ```
//!
//! where each line is `key=value` with the value running to the end of the line; the server
//! answers `cmd=spawn_result rc=0` (or a non-zero `rc` with `msg`) after the last block.
//! The preput pairs are for the children: stormpi's client puts the port its parents wait at
//! under [`PARENT_PORT_KEY`].

/// The preput key of the port the parents wait at (MPICH's name for it).
pub const PARENT_PORT_KEY: &str = "PARENT_ROOT_PORT_NAME";

/// The variable that tells the ranks of a job stormrun spawned the port their parents wait
/// at (only the environment carries it: command lines are readable by anyone on the host).
pub const PARENT_PORT_ENV: &str = "STORMPI_PARENT_PORT";

/// Most lines in one block (bounds what a server keeps for a client that never ends one).
pub const MAX_BLOCK_LINES: usize = 4096;

/// Most commands in one request.
pub const MAX_COMMANDS: usize = 64;

/// One command of a spawn request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnCommand {
    /// The program.
    pub command: String,
    /// Its arguments (not the program name).
    pub args: Vec<String>,
    /// How many processes run it.
    pub maxprocs: u32,
    /// Its info (keys such as `wdir`, `path`, `host`).
    pub info: Vec<(String, String)>,
    /// Values for the children (the same in every block of a request).
    pub preput: Vec<(String, String)>,
}

impl SpawnCommand {
    /// The value of info key `key`, if given.
    pub fn info(&self, key: &str) -> Option<&str> {
        self.info
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The blocks of a request for `cmds`; an error names a string that cannot travel (a line
/// break in it).
pub fn encode(cmds: &[SpawnCommand]) -> Result<Vec<u8>, String> {
    let mut out = String::new();
    let mut line = |k: &str, v: &str| -> Result<(), String> {
        if v.contains(['\n', '\r']) {
            return Err(format!("`{k}` of a spawn request holds a line break"));
        }
        out.push_str(k);
        // `endcmd` stands alone on its line.
        if k != "endcmd" {
            out.push('=');
            out.push_str(v);
        }
        out.push('\n');
        Ok(())
    };
    for (i, c) in cmds.iter().enumerate() {
        line("mcmd", "spawn")?;
        line("nprocs", &c.maxprocs.to_string())?;
        line("execname", &c.command)?;
        line("totspawns", &cmds.len().to_string())?;
        line("spawnssofar", &(i + 1).to_string())?;
        line("argcnt", &c.args.len().to_string())?;
        for (k, a) in c.args.iter().enumerate() {
            line(&format!("arg{}", k + 1), a)?;
        }
        line("preput_num", &c.preput.len().to_string())?;
        for (k, (key, value)) in c.preput.iter().enumerate() {
            line(&format!("preput_key_{k}"), key)?;
            line(&format!("preput_val_{k}"), value)?;
        }
        line("info_num", &c.info.len().to_string())?;
        for (k, (key, value)) in c.info.iter().enumerate() {
            line(&format!("info_key_{k}"), key)?;
            line(&format!("info_val_{k}"), value)?;
        }
        line("endcmd", "")?;
    }
    Ok(out.into_bytes())
}

/// One received block, read: the command, and its place (`spawnssofar`, `totspawns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The command.
    pub command: SpawnCommand,
    /// 1-based index of this block in its request.
    pub index: usize,
    /// Number of blocks in the request.
    pub total: usize,
}

/// Reads a block from its `key=value` lines (from `mcmd=spawn` to before `endcmd`).
pub fn parse_block(lines: &[(String, String)]) -> Result<Block, String> {
    let get = |k: &str| {
        lines
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| format!("the spawn request lacks `{k}`"))
    };
    let num = |k: &str| -> Result<usize, String> {
        get(k)?
            .trim()
            .parse::<usize>()
            .map_err(|_| format!("`{k}` of the spawn request is not a count"))
    };
    if get("mcmd")? != "spawn" {
        return Err("only `mcmd=spawn` is served".into());
    }
    let maxprocs = num("nprocs")?;
    if maxprocs == 0 || maxprocs > u32::MAX as usize {
        return Err("`nprocs` of the spawn request is not a positive count".into());
    }
    let total = num("totspawns")?;
    let index = num("spawnssofar")?;
    if total == 0 || total > MAX_COMMANDS || index == 0 || index > total {
        return Err(format!(
            "the spawn request's `spawnssofar` {index} of `totspawns` {total} is out of range \
             (at most {MAX_COMMANDS} commands)"
        ));
    }
    let mut command = SpawnCommand {
        command: get("execname")?.to_string(),
        maxprocs: maxprocs as u32,
        ..SpawnCommand::default()
    };
    if command.command.is_empty() {
        return Err("`execname` of the spawn request is empty".into());
    }
    for k in 1..=num("argcnt")? {
        command.args.push(get(&format!("arg{k}"))?.to_string());
    }
    for k in 0..num("preput_num")? {
        let key = get(&format!("preput_key_{k}"))?.to_string();
        command
            .preput
            .push((key, get(&format!("preput_val_{k}"))?.to_string()));
    }
    for k in 0..num("info_num")? {
        let key = get(&format!("info_key_{k}"))?.to_string();
        command
            .info
            .push((key, get(&format!("info_val_{k}"))?.to_string()));
    }
    Ok(Block {
        command,
        index,
        total,
    })
}

/// Splits one line of a block into key and value (the value runs to the end of the line).
pub fn split_line(line: &[u8]) -> Result<(String, String), String> {
    let text = std::str::from_utf8(line).map_err(|_| "a spawn request line is not UTF-8")?;
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| format!("a spawn request line `{}` has no `=`", excerpt(text)))?;
    Ok((k.to_string(), v.to_string()))
}

fn excerpt(s: &str) -> &str {
    let end = s.char_indices().nth(60).map_or(s.len(), |(i, _)| i);
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(bytes: &[u8]) -> Vec<Vec<(String, String)>> {
        let mut blocks = Vec::new();
        let mut cur = Vec::new();
        for l in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if l == b"endcmd" {
                blocks.push(std::mem::take(&mut cur));
            } else {
                cur.push(split_line(l).unwrap());
            }
        }
        blocks
    }

    #[test]
    fn requests_round_trip() {
        let cmds = vec![
            SpawnCommand {
                command: "./worker".into(),
                args: vec!["a b".into(), "x=y".into()],
                maxprocs: 3,
                info: vec![("wdir".into(), "/tmp".into())],
                preput: vec![(
                    PARENT_PORT_KEY.into(),
                    "stormpi-port:tcp:1.2.3.4:5:ab".into(),
                )],
            },
            SpawnCommand {
                command: "other".into(),
                maxprocs: 1,
                ..SpawnCommand::default()
            },
        ];
        let blocks = lines(&encode(&cmds).unwrap());
        assert_eq!(blocks.len(), 2);
        for (i, b) in blocks.iter().enumerate() {
            let got = parse_block(b).unwrap();
            assert_eq!(got.command, cmds[i]);
            assert_eq!((got.index, got.total), (i + 1, 2));
        }
        assert_eq!(cmds[0].info("wdir"), Some("/tmp"));
        assert_eq!(cmds[0].info("path"), None);
    }

    #[test]
    fn bad_blocks_are_refused_with_a_reason() {
        let one = SpawnCommand {
            command: "p".into(),
            maxprocs: 1,
            ..SpawnCommand::default()
        };
        let mut block = lines(&encode(&[one]).unwrap()).remove(0);
        block.retain(|(k, _)| k != "execname");
        assert!(parse_block(&block).unwrap_err().contains("execname"));
        let zero = SpawnCommand {
            command: "p".into(),
            ..SpawnCommand::default()
        };
        let block = lines(&encode(&[zero]).unwrap()).remove(0);
        assert!(parse_block(&block).unwrap_err().contains("nprocs"));
        let broken = SpawnCommand {
            command: "p\nq".into(),
            maxprocs: 1,
            ..SpawnCommand::default()
        };
        assert!(encode(&[broken]).unwrap_err().contains("line break"));
    }
}
