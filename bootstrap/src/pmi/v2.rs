//! Client side of PMI-2 (Slurm's `--mpi=pmi2`, MPICH's Hydra), over the socket in `PMI_FD`.
//!
//! After one PMI-1 line (`cmd=init pmi_version=2 pmi_subversion=0`, answered by
//! `cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0`) both sides send *commands*: six
//! ASCII characters giving the length of the body in decimal (Slurm pads with spaces on the
//! right, Hydra on the left), then the body, `cmd=<name>;<key>=<value>;...`, with or without a
//! final `;`. A `;` inside a value is written `;;` (MPICH's rule; Slurm's server does not
//! understand it, so the client never sends one — see [`Session::abort`]). Requests and replies
//! strictly alternate, as in PMI-1.
//!
//! The exchanges used here, with the attribute names both servers use:
//!
//! | request | reply | |
//! |---|---|---|
//! | `fullinit` `pmijobid` `pmirank` `threaded` | `fullinit-response` `rank` `size` `appnum` | Slurm wants `pmijobid` (its `PMI_JOBID`) and `threaded`; Hydra only `pmirank`; Slurm answers `appnum=-1` |
//! | `job-getid` | `job-getid-response` `jobid` | the key-value space of the job |
//! | `info-getjobattr` `key` | `info-getjobattr-response` `found` `value` | `PMI_process_mapping`, `universeSize` |
//! | `kvs-put` `key` `value` | `kvs-put-response` | |
//! | `kvs-fence` | `kvs-fence-response` | commits puts; also the barrier |
//! | `kvs-get` `jobid` `srcid` `key` | `kvs-get-response` `found` `value` | `found=FALSE` when absent |
//! | `abort` `isworld` `exitcode` `message` | none | Slurm kills the step when `isworld=TRUE` |
//! | `finalize` | `finalize-response` | |
//!
//! Every reply may carry `rc` (non-zero: refused, with `errmsg`).

use std::fmt;

use super::error::{self, PmiError, Reply};
use super::transport::LineChannel;
use super::wire::{excerpt, Message};

/// Characters of the length prefix.
pub const LEN_DIGITS: usize = 6;
/// Longest command body either side sends (MPICH's limit, `PMII_MAX_COMMAND_LEN`).
pub const MAX_COMMAND: usize = 64 * 1024;
/// Longest key, counting the C string's NUL (`PMI2_MAX_KEYLEN` of MPICH and Slurm).
pub const KEYLEN_MAX: usize = 64;
/// Longest value, counting the C string's NUL (`PMI2_MAX_VALLEN`).
pub const VALLEN_MAX: usize = 1024;

/// One PMI-2 command or reply: its `cmd` and the other `key=value` pairs in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The value of the leading `cmd=` pair, e.g. `kvs-get-response`.
    pub cmd: String,
    /// The other pairs in wire order (values unescaped).
    pub args: Vec<(String, String)>,
}

/// Why bytes are not a PMI-2 command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The length prefix is not a decimal number of 1 to [`MAX_COMMAND`].
    BadLength(String),
    /// The body is not UTF-8.
    NotUtf8,
    /// The body does not begin with `cmd=<name>`.
    NoCmd,
    /// A pair without `=`, or with an empty or invalid key, at this byte offset.
    BadPair(usize),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::BadLength(p) => {
                write!(
                    f,
                    "length prefix `{p}` is not a number of 1 to {MAX_COMMAND}"
                )
            }
            WireError::NotUtf8 => f.write_str("command is not valid UTF-8"),
            WireError::NoCmd => f.write_str("command does not start with cmd=<name>"),
            WireError::BadPair(at) => write!(f, "no `key=value` pair at byte {at}"),
        }
    }
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_graphic() && c != '=' && c != ';'
}

/// Reads the length prefix: decimal digits, padded with spaces on either side.
pub fn parse_length(prefix: &[u8]) -> Result<usize, WireError> {
    let bad = || WireError::BadLength(excerpt(prefix));
    let text = std::str::from_utf8(prefix).map_err(|_| bad())?;
    let digits = text.trim_matches(' ');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match digits.parse::<usize>() {
        Ok(n) if (1..=MAX_COMMAND).contains(&n) => Ok(n),
        _ => Err(bad()),
    }
}

impl Command {
    /// A command with no pairs yet.
    pub fn new(cmd: &str) -> Command {
        Command {
            cmd: cmd.to_string(),
            args: Vec::new(),
        }
    }

    /// Appends `key=value` (builder style).
    pub fn arg(mut self, key: &str, value: impl ToString) -> Command {
        self.args.push((key.to_string(), value.to_string()));
        self
    }

    /// The value of the first pair named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Parses a body (without its length prefix).
    pub fn parse(body: &[u8]) -> Result<Command, WireError> {
        let text = std::str::from_utf8(body).map_err(|_| WireError::NotUtf8)?;
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut chars = text.char_indices().peekable();
        while let Some(&(start, _)) = chars.peek() {
            let mut key = String::new();
            loop {
                match chars.next() {
                    Some((_, '=')) => break,
                    Some((_, c)) if is_key_char(c) => key.push(c),
                    Some((at, _)) => return Err(WireError::BadPair(at)),
                    None => return Err(WireError::BadPair(start)),
                }
            }
            if key.is_empty() {
                return Err(WireError::BadPair(start));
            }
            let mut value = String::new();
            // A value runs to a `;` that is not doubled, or to the end.
            while let Some((_, c)) = chars.next() {
                if c == ';' {
                    if matches!(chars.peek(), Some((_, ';'))) {
                        chars.next();
                    } else {
                        break;
                    }
                }
                value.push(c);
            }
            pairs.push((key, value));
        }
        if pairs.is_empty() || pairs[0].0 != "cmd" || pairs[0].1.is_empty() {
            return Err(WireError::NoCmd);
        }
        let (_, cmd) = pairs.remove(0);
        Ok(Command { cmd, args: pairs })
    }

    /// The body, `cmd=<name>;<key>=<value>;...;`, with `;` in values doubled.
    pub fn body(&self) -> String {
        let mut out = String::with_capacity(16 + 16 * self.args.len());
        for (k, v) in std::iter::once(("cmd", self.cmd.as_str()))
            .chain(self.args.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        {
            out.push_str(k);
            out.push('=');
            out.push_str(&v.replace(';', ";;"));
            out.push(';');
        }
        out
    }

    /// The command as sent: length prefix (left-aligned, as Slurm writes it) and body.
    pub fn to_wire(&self) -> Result<Vec<u8>, PmiError> {
        let body = self.body();
        if body.len() > MAX_COMMAND {
            return Err(PmiError::InvalidKey {
                key: self.cmd.clone(),
                reason: format!(
                    "the command is {} bytes; PMI-2 allows {MAX_COMMAND}",
                    body.len()
                ),
            });
        }
        Ok(format!("{:<width$}{body}", body.len(), width = LEN_DIGITS).into_bytes())
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.body())
    }
}

/// The node of each rank, from the `PMI_process_mapping` job attribute: `(vector,(N,C,P),...)`,
/// where each block says that `C` nodes from node `N` on hold `P` consecutive ranks each; the
/// blocks repeat, in order, until every rank of the job has a node (`(vector,(0,2,1))` deals
/// ranks round robin over two nodes).
pub fn parse_process_mapping(text: &str, size: u32) -> Result<Vec<u32>, String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let inner = compact
        .strip_prefix("(vector")
        .and_then(|s| s.strip_suffix(')'))
        .ok_or("not of the form (vector,...)")?;
    let mut blocks = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let tail = rest
            .strip_prefix(",(")
            .ok_or_else(|| format!("expected `,(` at `{rest}`"))?;
        let end = tail
            .find(')')
            .ok_or_else(|| format!("unclosed block at `{rest}`"))?;
        let nums: Vec<&str> = tail[..end].split(',').collect();
        let [node, count, per] = nums[..] else {
            return Err(format!("block `({})` has not three numbers", &tail[..end]));
        };
        let num = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| format!("`{s}` in block `({})` is not a number", &tail[..end]))
        };
        let (node, count, per) = (num(node)?, num(count)?, num(per)?);
        if node.checked_add(count).is_none() {
            return Err(format!("block `({})` overflows", &tail[..end]));
        }
        blocks.push((node, count, per));
        rest = &tail[end + 1..];
    }
    if blocks.iter().all(|&(_, count, per)| count == 0 || per == 0) {
        return Err("no block holds a rank".into());
    }
    let size = size as usize;
    let mut nodes = Vec::with_capacity(size.min(1 << 16));
    'fill: loop {
        for &(node, count, per) in &blocks {
            for n in node..node + count {
                for _ in 0..per {
                    if nodes.len() == size {
                        break 'fill;
                    }
                    nodes.push(n);
                }
            }
        }
    }
    Ok(nodes)
}

/// An initialized PMI-2 session.
#[derive(Debug)]
pub(crate) struct Session {
    chan: LineChannel,
    pub rank: u32,
    pub size: u32,
    pub appnum: u32,
    /// The job's key-value space (`job-getid`).
    pub jobid: String,
    /// `None` when the server does not say.
    pub universe_size: Option<u32>,
    /// A spawn started this job: the server named the spawning job in `fullinit`'s answer
    /// (`spawner-jobid`, as Hydra and Slurm do).
    pub spawned: bool,
    /// The node of each rank, when the server gives `PMI_process_mapping`.
    pub nodes: Option<Vec<u32>>,
}

impl Session {
    /// The start-up exchange: the version handshake, `fullinit` as `rank` (with Slurm's
    /// `PMI_JOBID` when the launcher set one), then the job id and attributes.
    pub(crate) fn init(
        mut chan: LineChannel,
        rank: u32,
        pmi_jobid: Option<&str>,
    ) -> Result<Session, PmiError> {
        let init = Message::new("init")
            .arg("pmi_version", 2)
            .arg("pmi_subversion", 0);
        chan.send(&init.to_line())?;
        let line = chan.recv()?;
        let reply = Message::parse(&line)
            .map_err(|e| PmiError::Malformed(format!("{e}: `{}`", excerpt(&line))))?;
        if reply.cmd != "response_to_init" {
            return Err(PmiError::Malformed(format!(
                "expected `response_to_init` in reply to a PMI-2 init, got `{reply}`"
            )));
        }
        if let Some(rc) = reply.get("rc").filter(|rc| *rc != "0") {
            return Err(PmiError::Refused {
                request: "init (PMI-2)".into(),
                rc: rc.parse().unwrap_or(-1),
                msg: reply.get("msg").unwrap_or("").to_string(),
            });
        }
        if reply.get("pmi_version") != Some("2") {
            return Err(PmiError::Unsupported(format!(
                "the PMI server does not speak PMI-2 (it answered `{reply}`)"
            )));
        }

        let mut full = Command::new("fullinit");
        if let Some(job) = pmi_jobid {
            full = full.arg("pmijobid", job);
        }
        let full = full.arg("pmirank", rank).arg("threaded", "FALSE");
        let reply = call(&mut chan, &full, "fullinit-response")?;
        let told: u32 = int_field(&reply, "rank")?;
        let size: u32 = int_field(&reply, "size")?;
        if told != rank || size == 0 {
            return Err(PmiError::Malformed(format!(
                "fullinit as rank {rank} answered with rank {told} of {size}: `{reply}`"
            )));
        }
        // Slurm answers -1 (it does not number applications): one application, number 0.
        let appnum: i64 = int_field(&reply, "appnum")?;
        let appnum = match appnum {
            -1 => 0,
            n => u32::try_from(n)
                .map_err(|_| PmiError::Malformed(format!("appnum {n} is negative in `{reply}`")))?,
        };

        let spawned = reply.get("spawner-jobid").is_some_and(|j| !j.is_empty());
        let reply = call(&mut chan, &Command::new("job-getid"), "job-getid-response")?;
        let jobid = match reply.get("jobid") {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => return Err(missing(&reply, "jobid")),
        };

        let mut session = Session {
            chan,
            rank,
            size,
            appnum,
            jobid,
            universe_size: None,
            spawned,
            nodes: None,
        };
        if let Some(text) = session.job_attr("universeSize")? {
            let n: i64 = text.parse().map_err(|_| {
                PmiError::Malformed(format!(
                    "job attribute universeSize=`{text}` is not a number"
                ))
            })?;
            session.universe_size = u32::try_from(n).ok().filter(|&n| n > 0);
        }
        if let Some(text) = session.job_attr("PMI_process_mapping")? {
            let nodes = parse_process_mapping(&text, size).map_err(|why| {
                PmiError::Malformed(format!("job attribute PMI_process_mapping=`{text}`: {why}"))
            })?;
            session.nodes = Some(nodes);
        }
        Ok(session)
    }

    /// A job attribute; `None` when the server has none by that name.
    fn job_attr(&mut self, key: &str) -> Result<Option<String>, PmiError> {
        let req = Command::new("info-getjobattr").arg("key", key);
        let reply = call(&mut self.chan, &req, "info-getjobattr-response")?;
        found_value(&reply)
    }

    /// Stores `value` under `key` (visible to others after the next fence).
    pub(crate) fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let req = Command::new("kvs-put").arg("key", key).arg("value", value);
        call(&mut self.chan, &req, "kvs-put-response").map(drop)
    }

    /// Reads the value `src` stored under `key`; `Ok(None)` when there is none.
    pub(crate) fn get(&mut self, src: u32, key: &str) -> Result<Option<String>, PmiError> {
        let req = Command::new("kvs-get")
            .arg("jobid", &self.jobid)
            .arg("srcid", src)
            .arg("key", key);
        let reply = call(&mut self.chan, &req, "kvs-get-response")?;
        found_value(&reply)
    }

    /// Asks the launcher to start `cmds` as a new job (`spawn`, in the order Slurm's and
    /// Hydra's servers read it: the command count and the values for the children first, then
    /// per command its program, process count, arguments and info).
    pub(crate) fn spawn(&mut self, cmds: &[super::spawn::SpawnCommand]) -> Result<(), PmiError> {
        let preput = cmds.first().map_or(&[][..], |c| &c.preput[..]);
        let mut req = Command::new("spawn")
            .arg("ncmds", cmds.len())
            .arg("preputcount", preput.len());
        for (i, (k, v)) in preput.iter().enumerate() {
            req = req
                .arg(&format!("ppkey{i}"), k)
                .arg(&format!("ppval{i}"), v);
        }
        for c in cmds {
            req = req
                .arg("subcmd", &c.command)
                .arg("maxprocs", c.maxprocs)
                .arg("argc", c.args.len());
            for (i, a) in c.args.iter().enumerate() {
                req = req.arg(&format!("argv{i}"), a);
            }
            req = req.arg("infokeycount", c.info.len());
            for (i, (k, v)) in c.info.iter().enumerate() {
                req = req
                    .arg(&format!("infokey{i}"), k)
                    .arg(&format!("infoval{i}"), v);
            }
        }
        call(&mut self.chan, &req, "spawn-response").map(drop)
    }

    /// Publishes `port` under `service` in the launcher's name service.
    pub(crate) fn name_publish(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        let req = Command::new("name-publish")
            .arg("name", service)
            .arg("port", port)
            .arg("infokeycount", 0);
        call(&mut self.chan, &req, "name-publish-response").map(drop)
    }

    /// The port published under `service`; `Ok(None)` when there is none.
    pub(crate) fn name_lookup(&mut self, service: &str) -> Result<Option<String>, PmiError> {
        let req = Command::new("name-lookup")
            .arg("name", service)
            .arg("infokeycount", 0);
        let reply = match call(&mut self.chan, &req, "name-lookup-response") {
            Ok(r) => r,
            Err(PmiError::Refused { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        if reply.get("found") == Some("FALSE") {
            return Ok(None);
        }
        // Hydra answers with `port`, its older releases and Slurm with `value`.
        match reply.get("port").or_else(|| reply.get("value")) {
            Some(p) => Ok(Some(p.to_string())),
            None => Err(missing(&reply, "port")),
        }
    }

    /// Withdraws `service` from the launcher's name service.
    pub(crate) fn name_unpublish(&mut self, service: &str) -> Result<(), PmiError> {
        let req = Command::new("name-unpublish")
            .arg("name", service)
            .arg("infokeycount", 0);
        call(&mut self.chan, &req, "name-unpublish-response").map(drop)
    }

    /// Commits this process's puts and waits for every process of the job to do the same.
    pub(crate) fn fence(&mut self) -> Result<(), PmiError> {
        call(
            &mut self.chan,
            &Command::new("kvs-fence"),
            "kvs-fence-response",
        )
        .map(drop)
    }

    /// Tells the launcher to abort the whole job; no reply is defined.
    ///
    /// Slurm's server splits values at every `;` (it does not undo `;;`), so the message goes
    /// with `;` made `,`.
    pub(crate) fn abort(&mut self, code: i32, msg: &str) -> Result<(), PmiError> {
        let mut req = Command::new("abort")
            .arg("isworld", "TRUE")
            .arg("exitcode", code);
        if !msg.is_empty() {
            req = req.arg("message", msg.replace(';', ","));
        }
        self.chan.send_raw(&req.to_wire()?)
    }

    /// See [`LineChannel::wait_for_close`].
    pub(crate) fn wait_for_close(&mut self, limit: std::time::Duration) {
        self.chan.wait_for_close(limit)
    }

    /// Leaves the job cleanly.
    pub(crate) fn finalize(mut self) -> Result<(), PmiError> {
        call(
            &mut self.chan,
            &Command::new("finalize"),
            "finalize-response",
        )
        .map(drop)
    }
}

/// Receives one command.
fn recv(chan: &mut LineChannel) -> Result<Command, PmiError> {
    let prefix = chan.recv_exact(LEN_DIGITS)?;
    let len = parse_length(&prefix).map_err(|e| PmiError::Malformed(e.to_string()))?;
    let body = chan.recv_exact(len)?;
    Command::parse(&body).map_err(|e| PmiError::Malformed(format!("{e}: `{}`", excerpt(&body))))
}

/// Sends `req` and returns the reply, which must be `expect` with `rc` 0 or none.
fn call(chan: &mut LineChannel, req: &Command, expect: &str) -> Result<Command, PmiError> {
    chan.send_raw(&req.to_wire()?)?;
    let reply = recv(chan)?;
    check_reply(req, expect, reply)
}

fn check_reply(req: &Command, expect: &str, reply: Command) -> Result<Command, PmiError> {
    let parts = Reply {
        cmd: &reply.cmd,
        rc: reply.get("rc"),
        msg: reply.get("errmsg"),
    };
    error::check_reply(&req.cmd, expect, parts, &reply)?;
    Ok(reply)
}

/// `found=TRUE;value=...` or `found=FALSE`.
fn found_value(reply: &Command) -> Result<Option<String>, PmiError> {
    let found = reply.get("found").ok_or_else(|| missing(reply, "found"))?;
    if found.eq_ignore_ascii_case("TRUE") {
        match reply.get("value") {
            Some(v) => Ok(Some(v.to_string())),
            None => Err(missing(reply, "value")),
        }
    } else if found.eq_ignore_ascii_case("FALSE") {
        Ok(None)
    } else {
        Err(PmiError::Malformed(format!(
            "`found={found}` is neither TRUE nor FALSE in `{reply}`"
        )))
    }
}

fn missing(reply: &Command, field: &str) -> PmiError {
    PmiError::Malformed(format!("reply `{reply}` lacks `{field}`"))
}

fn int_field<T: std::str::FromStr>(reply: &Command, field: &str) -> Result<T, PmiError> {
    let raw = reply.get(field).ok_or_else(|| missing(reply, field))?;
    raw.parse()
        .map_err(|_| PmiError::Malformed(format!("`{field}={raw}` is not a number in `{reply}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_and_hydra_replies_parse() {
        // Slurm 22.05's fullinit reply, verbatim but for the numbers.
        let c = Command::parse(
            b"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=3;size=4;\
              appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
        )
        .unwrap();
        assert_eq!(c.cmd, "fullinit-response");
        assert_eq!(
            (c.get("rank"), c.get("size"), c.get("appnum")),
            (Some("3"), Some("4"), Some("-1"))
        );
        // Hydra puts rc last.
        let c =
            Command::parse(b"cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,2,2));rc=0;")
                .unwrap();
        assert_eq!(c.get("value"), Some("(vector,(0,2,2))"));
        // No final `;`, and an empty value.
        let c = Command::parse(b"cmd=kvs-get-response;found=FALSE;errmsg=").unwrap();
        assert_eq!(c.args.len(), 2);
        assert_eq!(c.get("errmsg"), Some(""));
    }

    #[test]
    fn doubled_semicolons_are_literal() {
        let c = Command::parse(b"cmd=x;a=1;;2;b=;;;c=end;;;").unwrap();
        assert_eq!(
            c.args,
            vec![
                ("a".to_string(), "1;2".to_string()),
                ("b".to_string(), ";".to_string()),
                ("c".to_string(), "end;".to_string()),
            ]
        );
        let emitted = Command::new("abort")
            .arg("message", "a;b;;")
            .to_wire()
            .unwrap();
        assert_eq!(emitted, b"27    cmd=abort;message=a;;b;;;;;".to_vec());
    }

    #[test]
    fn what_is_emitted_parses_back() {
        let cases = [
            Command::new("fullinit")
                .arg("pmijobid", "12.0")
                .arg("pmirank", 3)
                .arg("threaded", "FALSE"),
            Command::new("kvs-put")
                .arg("key", "host-0")
                .arg("value", "x6e31"),
            Command::new("abort").arg("message", ";x=y;"),
            Command::new("kvs-fence"),
            Command::new("x").arg("empty", ""),
        ];
        for c in cases {
            let wire = c.to_wire().unwrap();
            let len = parse_length(&wire[..LEN_DIGITS]).unwrap();
            assert_eq!(len, wire.len() - LEN_DIGITS, "{c}");
            assert_eq!(Command::parse(&wire[LEN_DIGITS..]).unwrap(), c);
        }
        assert_eq!(
            Command::new("fullinit")
                .arg("pmijobid", "12.0")
                .arg("pmirank", 3)
                .arg("threaded", "FALSE")
                .to_wire()
                .unwrap(),
            b"52    cmd=fullinit;pmijobid=12.0;pmirank=3;threaded=FALSE;".to_vec()
        );
        assert_eq!(
            Command::new("kvs-fence").to_wire().unwrap(),
            b"14    cmd=kvs-fence;".to_vec()
        );
    }

    #[test]
    fn length_prefixes_of_both_servers() {
        assert_eq!(parse_length(b"42    "), Ok(42)); // Slurm: %-6d
        assert_eq!(parse_length(b"    42"), Ok(42)); // Hydra: %6u
        assert_eq!(parse_length(b"065536"), Ok(65536));
        for bad in [
            &b"      "[..],
            b"0     ",
            b"4 2   ",
            b"-1    ",
            b"99999x",
            b"999999",
            b"\xff    ",
        ] {
            assert!(
                matches!(parse_length(bad), Err(WireError::BadLength(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn malformed_bodies_are_errors() {
        assert_eq!(Command::parse(b""), Err(WireError::NoCmd));
        assert_eq!(Command::parse(b"key=1;cmd=x;"), Err(WireError::NoCmd));
        assert_eq!(Command::parse(b"cmd=;"), Err(WireError::NoCmd));
        assert_eq!(Command::parse(b"cmd=x;novalue"), Err(WireError::BadPair(6)));
        assert_eq!(Command::parse(b"cmd=x;=1;"), Err(WireError::BadPair(6)));
        assert_eq!(Command::parse(b"cmd=x;a b=1;"), Err(WireError::BadPair(7)));
        assert_eq!(Command::parse(b"cmd=x;k=\xff;"), Err(WireError::NotUtf8));
    }

    #[test]
    fn process_mappings_give_each_rank_its_node() {
        let m = |t: &str, n| parse_process_mapping(t, n);
        assert_eq!(m("(vector,(0,2,2))", 4), Ok(vec![0, 0, 1, 1]));
        // Round robin: the vector repeats.
        assert_eq!(m("(vector,(0,2,1))", 5), Ok(vec![0, 1, 0, 1, 0]));
        // Uneven blocks (Slurm's `-n 5 -N 2`: 3 + 2).
        assert_eq!(m("(vector,(0,1,3),(1,1,2))", 5), Ok(vec![0, 0, 0, 1, 1]));
        assert_eq!(m(" (vector, (4,1,2)) ", 2), Ok(vec![4, 4]));
        assert_eq!(m("(vector,(0,1,1))", 0), Ok(vec![]));
        for bad in [
            "",
            "vector,(0,1,1)",
            "(vector,(0,1))",
            "(vector,(0,1,1)",
            "(vector,(0,1,x))",
            "(vector,(0,0,1))",
            "(vector)",
            "(vector,(4294967295,2,1))",
            "(vector;(0,1,1))",
        ] {
            assert!(m(bad, 4).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn replies_are_checked() {
        let req = Command::new("kvs-get");
        let ok = |b: &[u8]| check_reply(&req, "kvs-get-response", Command::parse(b).unwrap());
        let r = ok(b"cmd=kvs-get-response;rc=0;found=TRUE;value=x00;").unwrap();
        assert_eq!(found_value(&r).unwrap().as_deref(), Some("x00"));
        let r = ok(b"cmd=kvs-get-response;rc=0;found=FALSE;").unwrap();
        assert_eq!(found_value(&r).unwrap(), None);
        match found_value(&ok(b"cmd=kvs-get-response;found=maybe;").unwrap()) {
            Err(PmiError::Malformed(m)) => assert!(m.contains("neither TRUE nor FALSE"), "{m}"),
            other => panic!("{other:?}"),
        }
        match found_value(&ok(b"cmd=kvs-get-response;found=TRUE;").unwrap()) {
            Err(PmiError::Malformed(m)) => assert!(m.contains("lacks `value`"), "{m}"),
            other => panic!("{other:?}"),
        }
        match ok(b"cmd=kvs-get-response;rc=3;errmsg=bad key;") {
            Err(PmiError::Refused { rc: 3, msg, .. }) => assert_eq!(msg, "bad key"),
            other => panic!("{other:?}"),
        }
        match ok(b"cmd=kvs-put-response;rc=0;") {
            Err(PmiError::Malformed(m)) => assert!(m.contains("expected `kvs-get-response`")),
            other => panic!("{other:?}"),
        }
        match ok(b"cmd=kvs-get-response;rc=zero;") {
            Err(PmiError::Malformed(m)) => assert!(m.contains("non-numeric rc")),
            other => panic!("{other:?}"),
        }
    }
}
