//! PMI over TCP: the `PMI_PORT` convention of MPICH's simple PMI, which
//! launchers use for processes they cannot hand a socket to (ranks started
//! on other hosts through a launch agent such as ssh).
//!
//! The launcher sets `PMI_PORT=<host>:<port>` and `PMI_ID=<id>` (stormrun:
//! the id is the rank). The client connects and identifies itself before the
//! ordinary PMI-1 exchange begins; the server answers with the job size and
//! the client's rank:
//!
//! ```text
//! client: cmd=initack pmiid=<id>
//! server: cmd=initack rc=0
//! server: cmd=set size=<size>
//! server: cmd=set rank=<rank>
//! server: cmd=set debug=0
//! client: cmd=init pmi_version=1 pmi_subversion=1      (PMI-1 as over PMI_FD)
//! ```
//!
//! A server that refuses the id answers `cmd=initack rc=-1 msg=<why>` and
//! closes the connection. Without `PMI_ID`, MPICH's client skips the
//! handshake and takes its rank and size from `PMI_RANK`/`PMI_SIZE`; this
//! client does the same, but stormrun's server requires the handshake.
//!
//! **Authentication.** stormrun gives each rank a key of its own
//! ([`KEY_ENV`]; derived from the job's key, see [`crate::auth`]) and
//! requires every connection, over TCP or the inherited socket, to prove it
//! holds the key of the rank it claims before it serves any command. The
//! client adds a nonce to `initack`; the server answers with its own nonce
//! and its proof, and the client proves itself in turn:
//!
//! ```text
//! client: cmd=initack pmiid=<id> nonce=<client nonce>
//! server: cmd=challenge nonce=<server nonce> proof=<server's proof>
//! client: cmd=response proof=<client's proof>
//! server: cmd=initack rc=0 ...                           (as above)
//! ```
//!
//! Both proofs cover both nonces, so a recorded exchange proves nothing on
//! another connection; each side checks the other's, so neither a stranger
//! at the port nor a stranger posing as the server learns anything.

use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::error::PmiError;
use super::transport::LineChannel;
use super::wire::{excerpt, Message};
use crate::auth::{self, Key, Nonce};

/// The environment variable with a rank's PMI key (hexadecimal), set by
/// stormrun for local ranks and by its exec helper for remote ones.
pub const KEY_ENV: &str = "STORMPI_PMI_KEY";

/// The label of ranks' PMI keys under the job's key ([`Key::derive`]).
pub const RANK_KEYS: &str = "pmi rank";

/// How long a client tries to reach the server's address.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client waits for the server's answer to `initack`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Splits `PMI_PORT` into host and port. The host may be a name, an IPv4
/// address, or an IPv6 address in brackets (`[fe80::1]:4000`).
pub(crate) fn parse_port(text: &str) -> Result<(String, u16), PmiError> {
    let bad = |why: &str| PmiError::Env {
        var: "PMI_PORT",
        problem: format!("is `{text}`, not HOST:PORT ({why})"),
    };
    let (host, port) = text.trim().rsplit_once(':').ok_or_else(|| bad("no `:`"))?;
    let host = match host.strip_prefix('[') {
        Some(inner) => inner.strip_suffix(']').ok_or_else(|| bad("unclosed `[`"))?,
        None if host.contains(':') => return Err(bad("an IPv6 address needs brackets")),
        None => host,
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("bad host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok((host.to_string(), p)),
        _ => Err(bad("the port must be a number from 1 to 65535")),
    }
}

/// Connects to the server `PMI_PORT` names, trying each address the host
/// resolves to, each for at most [`CONNECT_TIMEOUT`].
pub(crate) fn connect(text: &str) -> Result<TcpStream, PmiError> {
    let (host, port) = parse_port(text)?;
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| PmiError::Env {
            var: "PMI_PORT",
            problem: format!("is `{text}`, whose host cannot be resolved: {e}"),
        })?
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
            Ok(stream) => {
                // Requests and replies are single short lines: do not let
                // Nagle's algorithm hold them back.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = io::Error::new(e.kind(), format!("{addr}: {e}")),
        }
    }
    Err(PmiError::Io {
        op: "connect to PMI_PORT",
        source: last,
    })
}

/// The client's first line; with a nonce when it will authenticate.
pub(crate) fn initack_request(id: u32, nonce: Option<&Nonce>) -> Message {
    let m = Message::new("initack").arg("pmiid", id);
    match nonce {
        Some(n) => m.arg("nonce", n.to_hex()),
        None => m,
    }
}

/// The server's answer to an accepted `initack`: four lines.
pub(crate) fn initack_reply(rank: u32, size: u32) -> Vec<u8> {
    let mut out = Message::new("initack").arg("rc", 0).to_line();
    out.extend(Message::new("set").arg("size", size).to_line());
    out.extend(Message::new("set").arg("rank", rank).to_line());
    out.extend(Message::new("set").arg("debug", 0).to_line());
    out
}

/// The server's answer to a refused `initack` (the connection is closed
/// after it).
pub(crate) fn initack_refusal(why: &str) -> Vec<u8> {
    Message::new("initack")
        .arg("rc", -1)
        .arg("msg", why.replace(' ', "_"))
        .to_line()
}

/// A client's `initack`: the id it claims and its nonce, if it sent one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Initack {
    /// The `pmiid`.
    pub id: u32,
    /// The client's nonce (an authenticating client).
    pub nonce: Option<Nonce>,
}

/// The client's first line, or why the line is not an `initack`.
pub(crate) fn parse_initack_request(line: &[u8]) -> Result<Initack, String> {
    let msg = Message::parse(line)
        .map_err(|e| format!("sent `{}` ({e}) instead of cmd=initack", excerpt(line)))?;
    if msg.cmd != "initack" {
        return Err(format!(
            "sent `{}` instead of cmd=initack pmiid=N",
            excerpt(line)
        ));
    }
    let id = msg
        .get("pmiid")
        .ok_or_else(|| "sent cmd=initack without pmiid".to_string())?;
    let id = id
        .parse::<u32>()
        .map_err(|_| format!("sent cmd=initack with pmiid `{}`", excerpt(id.as_bytes())))?;
    let nonce = match msg.get("nonce") {
        None => None,
        Some(n) => Some(Nonce::from_hex(n).ok_or_else(|| {
            format!(
                "sent cmd=initack with a malformed nonce `{}`",
                excerpt(n.as_bytes())
            )
        })?),
    };
    Ok(Initack { id, nonce })
}

/// What the proofs of rank `rank`'s exchange cover besides the nonces.
fn context(rank: u32) -> Vec<u8> {
    format!("stormpi pmi initack {rank}").into_bytes()
}

/// The server's side of an authentication between its challenge and the
/// client's response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Challenged {
    /// The rank claimed.
    pub rank: u32,
    client: Nonce,
    server: Nonce,
}

impl Challenged {
    /// Answers the `initack` of a client claiming `rank` with `client` as
    /// its nonce, whose key is `key`: the `challenge` line to send, and the
    /// state that checks the response.
    pub(crate) fn start(key: &Key, rank: u32, client: Nonce) -> io::Result<(Vec<u8>, Challenged)> {
        let server = Nonce::generate()?;
        let proof = key.prove("server", &context(rank), &server, &client);
        let line = Message::new("challenge")
            .arg("nonce", server.to_hex())
            .arg("proof", auth::hex(&proof))
            .to_line();
        Ok((
            line,
            Challenged {
                rank,
                client,
                server,
            },
        ))
    }

    /// Checks the client's `response` line against `key`.
    pub(crate) fn check(&self, key: &Key, line: &[u8]) -> Result<(), String> {
        let msg = Message::parse(line)
            .map_err(|e| format!("sent `{}` ({e}) instead of cmd=response", excerpt(line)))?;
        if msg.cmd != "response" {
            return Err(format!(
                "sent `{}` instead of cmd=response to the challenge",
                excerpt(line)
            ));
        }
        let proof = msg
            .get("proof")
            .and_then(auth::unhex::<{ auth::PROOF_LEN }>)
            .ok_or("sent cmd=response without a well-formed proof")?;
        let ctx = context(self.rank);
        if key.verify(&proof, "client", &ctx, &self.client, &self.server) {
            Ok(())
        } else {
            Err(format!(
                "failed to prove it holds rank {}'s key (wrong key or a replayed answer)",
                self.rank
            ))
        }
    }
}

/// Client side of the handshake: identifies as `id` and returns the
/// (rank, size) the server assigns. The caller bounds the wait with a read
/// timeout on the channel.
pub(crate) fn handshake(
    chan: &mut LineChannel,
    id: u32,
    key: Option<&Key>,
) -> Result<(u32, u32), PmiError> {
    let nonce = key
        .map(|_| Nonce::generate())
        .transpose()
        .map_err(|source| PmiError::Io {
            op: "draw a nonce",
            source,
        })?;
    chan.send(&initack_request(id, nonce.as_ref()).to_line())?;
    let recv = |chan: &mut LineChannel| -> Result<Message, PmiError> {
        let line = chan.recv().map_err(|e| match e {
            PmiError::Io { source, .. }
                if matches!(
                    source.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                PmiError::Io {
                    op: "PMI_PORT handshake",
                    source: io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the server did not answer cmd=initack in time",
                    ),
                }
            }
            other => other,
        })?;
        Message::parse(&line).map_err(|e| {
            PmiError::Malformed(format!(
                "{e} in the initack handshake: `{}`",
                excerpt(&line)
            ))
        })
    };
    let mut ack = recv(chan)?;
    if let (Some(key), Some(own), "challenge") = (key, &nonce, ack.cmd.as_str()) {
        let theirs = ack.get("nonce").and_then(Nonce::from_hex);
        let proof = ack
            .get("proof")
            .and_then(auth::unhex::<{ auth::PROOF_LEN }>);
        let (Some(theirs), Some(proof)) = (theirs, proof) else {
            return Err(PmiError::Malformed(format!("malformed challenge `{ack}`")));
        };
        if !key.verify(&proof, "server", &context(id), &theirs, own) {
            return Err(PmiError::Malformed(
                "the PMI server failed to prove it holds this job's key (not our launcher?)".into(),
            ));
        }
        let mine = key.prove("client", &context(id), own, &theirs);
        chan.send(
            &Message::new("response")
                .arg("proof", auth::hex(&mine))
                .to_line(),
        )?;
        ack = recv(chan)?;
    } else if key.is_some() && ack.cmd == "initack" && ack.get("rc").is_none_or(|rc| rc == "0") {
        return Err(PmiError::Malformed(
            "the PMI server accepted us without proving it holds this job's key (not our \
             launcher?)"
                .into(),
        ));
    }
    if ack.cmd != "initack" {
        return Err(PmiError::Malformed(format!(
            "expected `initack` in reply to cmd=initack, got `{ack}`"
        )));
    }
    // Hydra sends no rc; others send rc=0.
    if let Some(rc) = ack.get("rc") {
        let rc: i64 = rc
            .parse()
            .map_err(|_| PmiError::Malformed(format!("non-numeric rc in `{ack}`")))?;
        if rc != 0 {
            return Err(PmiError::Refused {
                request: "initack".into(),
                rc,
                msg: ack.get("msg").unwrap_or("").to_string(),
            });
        }
    }
    // Three `set` lines follow (MPICH sends size, rank, debug in that order;
    // the order is not relied on).
    let (mut size, mut rank) = (None, None);
    for _ in 0..3 {
        let set = recv(chan)?;
        if set.cmd != "set" {
            return Err(PmiError::Malformed(format!(
                "expected `set` after initack, got `{set}`"
            )));
        }
        let number = |v: &str| -> Result<u32, PmiError> {
            v.parse()
                .map_err(|_| PmiError::Malformed(format!("`{set}` is not a valid number")))
        };
        if let Some(v) = set.get("size") {
            size = Some(number(v)?);
        } else if let Some(v) = set.get("rank") {
            rank = Some(number(v)?);
        } else if set.get("debug").is_none() {
            return Err(PmiError::Malformed(format!(
                "unexpected `{set}` after initack"
            )));
        }
    }
    match (rank, size) {
        (Some(r), Some(s)) if r < s => Ok((r, s)),
        (Some(r), Some(s)) => Err(PmiError::Malformed(format!(
            "the server assigned rank {r} in a job of {s}"
        ))),
        _ => Err(PmiError::Malformed(
            "the server's initack lacks the rank or the size".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmi::transport::Transport;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::thread;

    #[test]
    fn port_text_is_checked() {
        assert_eq!(
            parse_port("10.1.2.1:4000").unwrap(),
            ("10.1.2.1".into(), 4000)
        );
        assert_eq!(parse_port("node7:1").unwrap(), ("node7".into(), 1));
        assert_eq!(parse_port("[fe80::1]:99").unwrap(), ("fe80::1".into(), 99));
        for bad in [
            "",
            "4000",
            "host:",
            ":4000",
            "host:0",
            "host:65536",
            "host:-1",
            "host:40x",
            "fe80::1:99",
            "[fe80::1:99",
            "a b:1",
        ] {
            match parse_port(bad) {
                Err(PmiError::Env {
                    var: "PMI_PORT",
                    problem,
                }) => {
                    assert!(problem.contains("not HOST:PORT"), "{bad}: {problem}")
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn handshake_bytes() {
        assert_eq!(initack_request(3, None).to_line(), b"cmd=initack pmiid=3\n");
        assert_eq!(
            initack_reply(3, 4),
            b"cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n"
        );
        assert_eq!(
            initack_refusal("rank 3 is already connected"),
            b"cmd=initack rc=-1 msg=rank_3_is_already_connected\n"
        );
        assert_eq!(
            parse_initack_request(b"cmd=initack pmiid=12"),
            Ok(Initack {
                id: 12,
                nonce: None
            })
        );
        let n = Nonce([0xab; auth::NONCE_LEN]);
        assert_eq!(
            parse_initack_request(initack_request(7, Some(&n)).to_string().as_bytes()),
            Ok(Initack {
                id: 7,
                nonce: Some(n)
            })
        );
        for bad in [
            &b"cmd=init pmi_version=1"[..],
            b"cmd=initack",
            b"cmd=initack pmiid=-1",
            b"cmd=initack pmiid=x",
            b"cmd=initack pmiid=1 nonce=00",
            b"GET / HTTP/1.1",
        ] {
            assert!(parse_initack_request(bad).is_err(), "{bad:?}");
        }
    }

    /// Runs the client handshake against a server that reads one line and
    /// answers with `reply`; returns the client's result and the line.
    fn against(reply: &'static [u8]) -> (Result<(u32, u32), PmiError>, String) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s);
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            r.get_mut().write_all(reply).unwrap();
            line
        });
        let stream = connect(&addr.to_string()).unwrap();
        let mut chan = LineChannel::new(Transport::Tcp(stream));
        chan.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let result = handshake(&mut chan, 2, None);
        (result, server.join().unwrap())
    }

    #[test]
    fn client_handshake() {
        let (r, line) =
            against(b"cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n");
        assert_eq!(line, "cmd=initack pmiid=2\n");
        assert_eq!(r.unwrap(), (2, 4));
        // Hydra's form: no rc.
        let (r, _) = against(b"cmd=initack\ncmd=set size=3\ncmd=set rank=1\ncmd=set debug=1\n");
        assert_eq!(r.unwrap(), (1, 3));
        match against(b"cmd=initack rc=-1 msg=go_away\n").0 {
            Err(PmiError::Refused { rc: -1, msg, .. }) => assert_eq!(msg, "go_away"),
            other => panic!("{other:?}"),
        }
        let (r, _) = against(b"cmd=initack\ncmd=set size=2\ncmd=set rank=5\ncmd=set debug=0\n");
        assert!(matches!(r, Err(PmiError::Malformed(m)) if m.contains("rank 5")));
        let (r, _) = against(b"cmd=response_to_init rc=0\n");
        assert!(matches!(r, Err(PmiError::Malformed(_))));
        let (r, _) = against(b"cmd=initack\ncmd=set size=x\n");
        assert!(matches!(r, Err(PmiError::Malformed(_))));
        let (r, _) = against(b"cmd=initack\n");
        assert!(matches!(r, Err(PmiError::Closed)), "{r:?}");
    }

    #[test]
    fn silent_server_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stream = connect(&addr.to_string()).unwrap();
        let _held = listener.accept().unwrap();
        let mut chan = LineChannel::new(Transport::Tcp(stream));
        chan.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        match handshake(&mut chan, 0, None) {
            Err(PmiError::Io { source, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::TimedOut)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unreachable_port_is_an_error() {
        // A port nobody listens on: bind, learn it, close.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        match connect(&format!("127.0.0.1:{port}")) {
            Err(PmiError::Io { source, .. }) => {
                assert!(source.to_string().contains("127.0.0.1"), "{source}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            connect("no-such-host.invalid:4000"),
            Err(PmiError::Env { .. })
        ));
    }
}
