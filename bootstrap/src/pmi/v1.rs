//! Client side of PMI-1 (the "simple" protocol of MPICH and Hydra): one
//! request line, one reply line, strictly alternating. Values are plain text
//! here; encoding binary data is the caller's business.

use super::error::{self, PmiError, Reply};
use super::transport::{LineChannel, Transport};
use super::wire::{excerpt, Message};

/// Limits the server announced in its `maxes` reply. Each counts the C
/// string's terminating NUL, so usable lengths are one less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Maxes {
    pub kvsname_max: usize,
    pub keylen_max: usize,
    pub vallen_max: usize,
}

/// An initialized PMI-1 session.
#[derive(Debug)]
pub(crate) struct Session {
    chan: LineChannel,
    pub kvsname: String,
    pub maxes: Maxes,
    pub appnum: u32,
    /// `None` when the server does not know (Hydra answers -1).
    pub universe_size: Option<u32>,
}

impl Session {
    /// Performs the PMI-1 start-up exchange: `init`, then asks for the limits,
    /// the key-value space name, the application number and universe size.
    pub(crate) fn init(transport: Transport) -> Result<Session, PmiError> {
        Self::init_on(LineChannel::new(transport))
    }

    /// [`init`](Self::init) over a channel that has already been used (for
    /// the `PMI_PORT` handshake, whose replies it may have buffered).
    pub(crate) fn init_on(mut chan: LineChannel) -> Result<Session, PmiError> {
        let init = Message::new("init")
            .arg("pmi_version", 1)
            .arg("pmi_subversion", 1);
        let reply = call(&mut chan, &init, "response_to_init")?;
        match reply.get("pmi_version") {
            Some("1") => {}
            other => {
                return Err(PmiError::Malformed(format!(
                    "server answered init with pmi_version {other:?}, expected 1"
                )))
            }
        }

        let reply = call(&mut chan, &Message::new("get_maxes"), "maxes")?;
        let maxes = Maxes {
            kvsname_max: int_field(&reply, "kvsname_max")?,
            keylen_max: int_field(&reply, "keylen_max")?,
            vallen_max: int_field(&reply, "vallen_max")?,
        };
        // Below these a key or a chunk of a value would not fit at all.
        if maxes.keylen_max < 16 || maxes.vallen_max < 16 {
            return Err(PmiError::Malformed(format!(
                "server limits too small to use: {maxes:?}"
            )));
        }

        let reply = call(&mut chan, &Message::new("get_my_kvsname"), "my_kvsname")?;
        let kvsname = match reply.get("kvsname") {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => return Err(missing(&reply, "kvsname")),
        };

        let reply = call(&mut chan, &Message::new("get_appnum"), "appnum")?;
        let appnum: i64 = int_field(&reply, "appnum")?;
        // Slurm's servers (PMI-1 and PMI-2) answer -1: they do not number applications, so
        // there is one, number 0.
        let appnum = match appnum {
            -1 => 0,
            n => u32::try_from(n)
                .map_err(|_| PmiError::Malformed(format!("appnum {n} is negative")))?,
        };

        let reply = call(
            &mut chan,
            &Message::new("get_universe_size"),
            "universe_size",
        )?;
        let universe: i64 = int_field(&reply, "size")?;
        let universe_size = u32::try_from(universe).ok().filter(|&n| n > 0);

        Ok(Session {
            chan,
            kvsname,
            maxes,
            appnum,
            universe_size,
        })
    }

    /// Stores `value` under `key` in our key-value space.
    pub(crate) fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let req = Message::new("put")
            .arg("kvsname", &self.kvsname)
            .arg("key", key)
            .arg("value", value);
        call(&mut self.chan, &req, "put_result").map(drop)
    }

    /// Reads the value under `key`; `Ok(None)` when the server has none.
    pub(crate) fn get(&mut self, key: &str) -> Result<Option<String>, PmiError> {
        let req = Message::new("get")
            .arg("kvsname", &self.kvsname)
            .arg("key", key);
        match call(&mut self.chan, &req, "get_result") {
            Ok(reply) => match reply.get("value") {
                Some(v) => Ok(Some(v.to_string())),
                None => Err(missing(&reply, "value")),
            },
            // PMI-1 has no distinct code for "no such key": every server
            // answers a failed get with rc=-1 and a message.
            Err(PmiError::Refused { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits until every process of the job has entered the barrier. In
    /// PMI-1 this is also the commit point for puts.
    pub(crate) fn barrier(&mut self) -> Result<(), PmiError> {
        call(&mut self.chan, &Message::new("barrier_in"), "barrier_out").map(drop)
    }

    /// Publishes `port` under `service` in the launcher's name service.
    pub(crate) fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        let req = Message::new("publish_name")
            .arg("service", service)
            .arg("port", port);
        call(&mut self.chan, &req, "publish_result").map(drop)
    }

    /// The port published under `service`; a refusal is the server's to explain (its `msg`).
    pub(crate) fn lookup_name(&mut self, service: &str) -> Result<String, PmiError> {
        let req = Message::new("lookup_name").arg("service", service);
        let reply = call(&mut self.chan, &req, "lookup_result")?;
        match reply.get("port") {
            Some(p) => Ok(p.to_string()),
            None => Err(missing(&reply, "port")),
        }
    }

    /// Withdraws `service` from the launcher's name service.
    pub(crate) fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        let req = Message::new("unpublish_name").arg("service", service);
        call(&mut self.chan, &req, "unpublish_result").map(drop)
    }

    /// Asks the launcher to start `cmds` as a new job (MPICH's multi-line `mcmd=spawn` blocks,
    /// one reply after the last).
    pub(crate) fn spawn(&mut self, cmds: &[super::spawn::SpawnCommand]) -> Result<(), PmiError> {
        let wire = super::spawn::encode(cmds).map_err(PmiError::Malformed)?;
        self.chan.send_raw(&wire)?;
        let line = self.chan.recv()?;
        let reply = Message::parse(&line)
            .map_err(|e| PmiError::Malformed(format!("{e}: `{}`", excerpt(&line))))?;
        check_reply(&Message::new("spawn"), "spawn_result", reply).map(drop)
    }

    /// Tells the launcher to abort the job; no reply is defined.
    pub(crate) fn abort(&mut self, code: i32, msg: &str) -> Result<(), PmiError> {
        let mut req = Message::new("abort").arg("exitcode", code);
        if !msg.is_empty() {
            req = req.arg("message", msg);
        }
        self.chan.send(&req.to_line())
    }

    /// See [`LineChannel::wait_for_close`].
    pub(crate) fn wait_for_close(&mut self, limit: std::time::Duration) {
        self.chan.wait_for_close(limit)
    }

    /// Leaves the job cleanly.
    pub(crate) fn finalize(mut self) -> Result<(), PmiError> {
        call(&mut self.chan, &Message::new("finalize"), "finalize_ack").map(drop)
    }
}

/// Sends `req` and returns the reply, which must be `expect` with rc 0 (or no
/// rc at all, as in several of Hydra's replies).
fn call(chan: &mut LineChannel, req: &Message, expect: &str) -> Result<Message, PmiError> {
    chan.send(&req.to_line())?;
    let line = chan.recv()?;
    let reply = Message::parse(&line)
        .map_err(|e| PmiError::Malformed(format!("{e}: `{}`", excerpt(&line))))?;
    check_reply(req, expect, reply)
}

fn check_reply(req: &Message, expect: &str, reply: Message) -> Result<Message, PmiError> {
    let parts = Reply {
        cmd: &reply.cmd,
        rc: reply.get("rc"),
        msg: reply.get("msg"),
    };
    error::check_reply(&req.cmd, expect, parts, &reply)?;
    Ok(reply)
}

fn missing(reply: &Message, field: &str) -> PmiError {
    PmiError::Malformed(format!("reply `{reply}` lacks `{field}`"))
}

fn int_field<T: std::str::FromStr>(reply: &Message, field: &str) -> Result<T, PmiError> {
    let raw = reply.get(field).ok_or_else(|| missing(reply, field))?;
    raw.parse()
        .map_err(|_| PmiError::Malformed(format!("`{field}={raw}` is not a number in `{reply}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Message {
        Message::parse(line.as_bytes()).unwrap()
    }

    #[test]
    fn accepts_expected_reply() {
        let req = Message::new("put");
        let r = check_reply(&req, "put_result", reply("cmd=put_result rc=0 msg=success"));
        assert!(r.is_ok());
        let r = check_reply(&req, "barrier_out", reply("cmd=barrier_out"));
        assert!(r.is_ok());
    }

    #[test]
    fn rejects_wrong_reply() {
        let req = Message::new("get");
        match check_reply(&req, "get_result", reply("cmd=put_result rc=0")) {
            Err(PmiError::Malformed(m)) => assert!(m.contains("expected `get_result`"), "{m}"),
            other => panic!("{other:?}"),
        }
        match check_reply(&req, "get_result", reply("cmd=get_result rc=zero")) {
            Err(PmiError::Malformed(m)) => assert!(m.contains("non-numeric rc"), "{m}"),
            other => panic!("{other:?}"),
        }
        match check_reply(&req, "get_result", reply("cmd=get_result rc=-1 msg=nope")) {
            Err(PmiError::Refused { rc: -1, msg, .. }) => assert_eq!(msg, "nope"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn int_fields_are_checked() {
        let r = reply("cmd=maxes kvsname_max=256 keylen_max=x");
        assert_eq!(int_field::<usize>(&r, "kvsname_max").unwrap(), 256);
        assert!(matches!(
            int_field::<usize>(&r, "keylen_max"),
            Err(PmiError::Malformed(_))
        ));
        assert!(matches!(
            int_field::<usize>(&r, "vallen_max"),
            Err(PmiError::Malformed(_))
        ));
    }
}
