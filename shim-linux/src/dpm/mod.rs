//! MPI's ports on Linux: `MPI_Open_port` listens on a TCP socket and names it.
//!
//! **Port names.** `stormpi-port:tcp:<IPv4>:<port>:<secret>` — the listening address and 32
//! random bytes (64 hex digits) from the kernel's random source. The name is the capability: a
//! side that connects must later prove it holds the secret (as the tcp BTL's peers prove the
//! job's), so a port found by scanning is of no use. [`PortName::parse`] reads untrusted text and
//! never panics.
//!
//! **Address.** The first interface the tcp BTL would use by default (every interface that is up
//! except loopback, or loopback when nothing else is), so a port is reachable wherever the
//! job's own TCP traffic is; `STORMPI_PORT_ADDRESS` names another IPv4 address to listen on.
//!
//! **Meeting.** [`LinuxPorts::accept_at`] waits at an open port for a side that proves its secret,
//! and [`connect`] goes to one; both give a [`rendezvous::Channel`] (see that module).
//!
//! **Table.** At most [`MAX_PORTS`] ports are open at once per process; `MPI_Close_port` of a
//! name this process did not open (or closed already) is `MPI_ERR_PORT`.

pub mod rendezvous;

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::Mutex;
use std::time::Duration;

use stormpi_bootstrap::auth::Key;
use stormpi_core::dpm::{LinkId, Ports};
use stormpi_core::error::{Error, ErrorClass, Reason, Result};

/// Most ports one process holds open at once.
pub const MAX_PORTS: usize = 64;

/// What opens `MPI_Comm_join`'s exchange on the socket.
const JOIN_MAGIC: &[u8; 8] = b"STJOIN01";

/// What every port name starts with.
const PREFIX: &str = "stormpi-port:tcp:";

/// The environment variable that names the address ports listen on.
pub const ADDRESS_ENV: &str = "STORMPI_PORT_ADDRESS";

/// A port's name: where it listens and the secret a connecting side proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortName {
    /// The listening address.
    pub addr: SocketAddrV4,
    /// The port's secret.
    pub secret: [u8; 32],
}

/// Why a text is not a port name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortNameError {
    /// It does not start with `stormpi-port:tcp:`.
    NotOurs,
    /// The address or port number does not parse.
    BadAddress,
    /// The secret is not 64 hex digits.
    BadSecret,
}

impl PortName {
    /// The name as text.
    pub fn format(&self) -> String {
        format!(
            "{PREFIX}{}:{}:{}",
            self.addr.ip(),
            self.addr.port(),
            stormpi_bootstrap::auth::hex(&self.secret)
        )
    }

    /// Parses a port name.
    pub fn parse(text: &str) -> core::result::Result<PortName, PortNameError> {
        let rest = text.strip_prefix(PREFIX).ok_or(PortNameError::NotOurs)?;
        let (addr, secret) = rest.rsplit_once(':').ok_or(PortNameError::BadAddress)?;
        let (ip, port) = addr.split_once(':').ok_or(PortNameError::BadAddress)?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| PortNameError::BadAddress)?;
        let port: u16 = port.parse().map_err(|_| PortNameError::BadAddress)?;
        if port == 0 {
            return Err(PortNameError::BadAddress);
        }
        let secret =
            stormpi_bootstrap::auth::unhex::<32>(secret).ok_or(PortNameError::BadSecret)?;
        Ok(PortName {
            addr: SocketAddrV4::new(ip, port),
            secret,
        })
    }
}

/// An open port: its name and listening socket (closed when dropped).
#[derive(Debug)]
struct OpenPort {
    name: String,
    listener: TcpListener,
    secret: Key,
}

/// Most links (met ports) one process holds at once.
pub const MAX_LINKS: usize = 64;

/// The ports of this process, and the links made at them.
#[derive(Debug)]
pub struct LinuxPorts {
    open: Mutex<Vec<OpenPort>>,
    links: Mutex<Vec<Option<rendezvous::Channel>>>,
}

/// The one table of the process.
pub static PORTS: LinuxPorts = LinuxPorts {
    open: Mutex::new(Vec::new()),
    links: Mutex::new(Vec::new()),
};

/// The error of a failed meeting at a port.
fn met_error(what: &str, e: &rendezvous::RendezvousError) -> Error {
    eprintln!("stormpi: {what}: {e}");
    match e {
        rendezvous::RendezvousError::BadProof | rendezvous::RendezvousError::NotOurs => port_error(
            ErrorClass::Port,
            "the other side could not prove the port's secret",
        ),
        rendezvous::RendezvousError::Timeout => port_error(
            ErrorClass::Port,
            "nobody came to the port in time (dpm_timeout)",
        ),
        _ => port_error(ErrorClass::Other, "the link to the other job failed"),
    }
}

fn port_error(class: ErrorClass, what: &'static str) -> Error {
    Error::new(class, Reason::BadArgument { what })
}

/// The address ports listen on: [`ADDRESS_ENV`], else the tcp BTL's first default interface.
fn listen_address() -> Result<Ipv4Addr> {
    if let Ok(text) = std::env::var(ADDRESS_ENV) {
        return text.trim().parse().map_err(|_| {
            eprintln!("stormpi: {ADDRESS_ENV}=`{text}` is not an IPv4 address");
            port_error(
                ErrorClass::Port,
                "STORMPI_PORT_ADDRESS is not an IPv4 address",
            )
        });
    }
    let all = crate::tcp::iface::system().map_err(|e| {
        eprintln!("stormpi: MPI_Open_port: cannot list network interfaces: {e}");
        port_error(ErrorClass::Other, "cannot list network interfaces")
    })?;
    let chosen = crate::tcp::iface::select(&all, "", "").unwrap_or_default();
    Ok(chosen.first().map_or(Ipv4Addr::LOCALHOST, |i| i.addr))
}

impl LinuxPorts {
    /// Opens a port on `ip` (port number chosen by the kernel).
    fn open_on(&self, ip: Ipv4Addr) -> Result<String> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= MAX_PORTS {
            return Err(Error::exhausted(
                "open ports",
                MAX_PORTS as u32,
                "(compile-time MAX_PORTS; close ports with MPI_Close_port)",
            ));
        }
        let listener = TcpListener::bind(SocketAddrV4::new(ip, 0)).map_err(|e| {
            eprintln!("stormpi: MPI_Open_port: cannot listen on {ip}: {e}");
            port_error(ErrorClass::Other, "cannot listen on the port's address")
        })?;
        let addr = match listener.local_addr() {
            Ok(std::net::SocketAddr::V4(a)) => a,
            _ => {
                return Err(port_error(
                    ErrorClass::Other,
                    "the port has no IPv4 address",
                ))
            }
        };
        let secret = Key::generate().map_err(|e| {
            eprintln!("stormpi: MPI_Open_port: no random bytes for the port's secret: {e}");
            port_error(ErrorClass::Other, "no random bytes for the port's secret")
        })?;
        let name = PortName {
            addr,
            secret: *secret.as_bytes(),
        }
        .format();
        open.push(OpenPort {
            name: name.clone(),
            listener,
            secret,
        });
        Ok(name)
    }

    /// Waits at the open port `name` for a side that proves the port's secret, at most
    /// `timeout`. The table is not held while waiting.
    pub fn accept_at(
        &self,
        name: &str,
        timeout: Duration,
    ) -> core::result::Result<rendezvous::Channel, rendezvous::RendezvousError> {
        let (listener, secret) = {
            let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            let port = open
                .iter()
                .find(|p| p.name == name)
                .ok_or(rendezvous::RendezvousError::NotOurs)?;
            (port.listener.try_clone()?, port.secret.clone())
        };
        rendezvous::accept(&listener, &secret, timeout)
    }

    /// Files a link; its id.
    fn file(&self, ch: rendezvous::Channel) -> Result<LinkId> {
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = links.iter().position(Option::is_none) {
            links[i] = Some(ch);
            return Ok(LinkId(i as u32));
        }
        if links.len() >= MAX_LINKS {
            return Err(Error::exhausted(
                "links to other jobs",
                MAX_LINKS as u32,
                "(compile-time MAX_LINKS)",
            ));
        }
        links.push(Some(ch));
        Ok(LinkId(links.len() as u32 - 1))
    }

    /// Runs `f` on link `id`.
    fn with_link<T>(
        &self,
        id: LinkId,
        f: impl FnOnce(&mut rendezvous::Channel) -> core::result::Result<T, rendezvous::RendezvousError>,
    ) -> Result<T> {
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        let ch = links
            .get_mut(id.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(port_error(
                ErrorClass::Intern,
                "no such link to another job",
            ))?;
        f(ch).map_err(|e| met_error("the link to the other job", &e))
    }
}

/// Goes to the port `name` (opened by another process) and proves its secret, at most `timeout`.
pub fn connect(
    name: &PortName,
    timeout: Duration,
) -> core::result::Result<rendezvous::Channel, rendezvous::RendezvousError> {
    rendezvous::connect(name.addr, &Key::from_bytes(name.secret), timeout)
}

impl Ports for LinuxPorts {
    fn open(&self, out: &mut [u8]) -> Result<usize> {
        let name = self.open_on(listen_address()?)?;
        let n = name.len();
        if n > out.len() {
            // Cannot happen for an IPv4 name (at most 103 bytes); refuse rather than cut.
            return Err(port_error(ErrorClass::Intern, "a port name is too long"));
        }
        out[..n].copy_from_slice(name.as_bytes());
        Ok(n)
    }

    fn accept(&self, name: &[u8], timeout_ms: u64) -> Result<(LinkId, [u8; 32])> {
        let name = core::str::from_utf8(name)
            .map_err(|_| port_error(ErrorClass::Port, "a port name is not valid UTF-8"))?;
        let secret = {
            let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            let port = open.iter().find(|p| p.name == name).ok_or(port_error(
                ErrorClass::Port,
                "no port of that name is open in this process",
            ))?;
            *port.secret.as_bytes()
        };
        let ch = self
            .accept_at(name, Duration::from_millis(timeout_ms))
            .map_err(|e| met_error("MPI_Comm_accept", &e))?;
        Ok((self.file(ch)?, secret))
    }

    fn connect(&self, name: &[u8], timeout_ms: u64) -> Result<(LinkId, [u8; 32])> {
        let parsed = core::str::from_utf8(name)
            .ok()
            .and_then(|n| PortName::parse(n).ok())
            .ok_or(port_error(ErrorClass::Port, "not a stormpi port name"))?;
        let ch = connect(&parsed, Duration::from_millis(timeout_ms))
            .map_err(|e| met_error("MPI_Comm_connect", &e))?;
        Ok((self.file(ch)?, parsed.secret))
    }

    fn join(&self, fd: i32, timeout_ms: u64) -> Result<(LinkId, [u8; 32], bool)> {
        use std::os::fd::FromRawFd;
        // SAFETY: dup of a descriptor number the caller passed; failure is checked.
        let own = unsafe { libc::dup(fd) };
        if own < 0 {
            return Err(Error::bad_arg(
                "MPI_Comm_join: fd is not an open descriptor",
            ));
        }
        // SAFETY: `own` is a fresh descriptor this process owns from here on; a non-socket
        // fails at the first send or receive.
        let stream = unsafe { std::net::TcpStream::from_raw_fd(own) };
        let _ = stream.set_nonblocking(false);
        let mut ch = rendezvous::Channel::over(stream);
        let mine = Key::generate().map_err(|e| {
            eprintln!("stormpi: MPI_Comm_join: no random bytes: {e}");
            port_error(ErrorClass::Other, "no random bytes for the link's secret")
        })?;
        let mut hello = JOIN_MAGIC.to_vec();
        hello.extend_from_slice(mine.as_bytes());
        let t = Duration::from_millis(timeout_ms);
        let theirs = ch
            .send(&hello)
            .and_then(|()| ch.recv(hello.len(), t))
            .map_err(|e| met_error("MPI_Comm_join", &e))?;
        if theirs.len() != hello.len() || &theirs[..8] != JOIN_MAGIC {
            return Err(port_error(
                ErrorClass::Arg,
                "MPI_Comm_join: the other end of the socket is not joining",
            ));
        }
        let (a, b) = (mine.as_bytes(), &theirs[8..]);
        if a[..] == b[..] {
            return Err(port_error(
                ErrorClass::Arg,
                "MPI_Comm_join: both ends drew the same bytes",
            ));
        }
        // The link's secret is both halves together; the higher half accepts.
        let mut secret = [0u8; 32];
        for i in 0..32 {
            secret[i] = a[i] ^ b[i];
        }
        let accepting = a[..] > b[..];
        Ok((self.file(ch)?, secret, accepting))
    }

    fn send(&self, link: LinkId, msg: &[u8]) -> Result<()> {
        self.with_link(link, |ch| ch.send(msg))
    }

    fn recv(&self, link: LinkId, out: &mut [u8], timeout_ms: u64) -> Result<usize> {
        let msg = self.with_link(link, |ch| {
            ch.recv(out.len(), Duration::from_millis(timeout_ms))
        })?;
        out[..msg.len()].copy_from_slice(&msg);
        Ok(msg.len())
    }

    fn end(&self, link: LinkId) {
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = links.get_mut(link.0 as usize) {
            *l = None;
        }
    }

    fn close(&self, name: &[u8]) -> Result<()> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        match open.iter().position(|p| p.name.as_bytes() == name) {
            Some(i) => {
                open.swap_remove(i);
                Ok(())
            }
            None => Err(port_error(
                ErrorClass::Port,
                "no port of that name is open in this process",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    #[test]
    fn port_names_round_trip_and_bad_ones_are_refused() {
        let name = PortName {
            addr: SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 4567),
            secret: [0xab; 32],
        };
        let text = name.format();
        assert_eq!(
            text,
            format!("stormpi-port:tcp:10.1.2.3:4567:{}", "ab".repeat(32))
        );
        assert_eq!(PortName::parse(&text), Ok(name));
        let secret = "ab".repeat(32);
        for (bad, why) in [
            ("tcp://10.1.2.3:4567", PortNameError::NotOurs),
            ("", PortNameError::NotOurs),
            ("stormpi-port:tcp:", PortNameError::BadAddress),
            (
                &format!("stormpi-port:tcp:10.1.2:4567:{secret}"),
                PortNameError::BadAddress,
            ),
            (
                &format!("stormpi-port:tcp:10.1.2.3:0:{secret}"),
                PortNameError::BadAddress,
            ),
            (
                &format!("stormpi-port:tcp:10.1.2.3:99999:{secret}"),
                PortNameError::BadAddress,
            ),
            (
                "stormpi-port:tcp:10.1.2.3:4567:abcd",
                PortNameError::BadSecret,
            ),
            (
                &format!("stormpi-port:tcp:10.1.2.3:4567:{}zz", &secret[2..]),
                PortNameError::BadSecret,
            ),
        ] {
            assert_eq!(PortName::parse(bad), Err(why), "{bad}");
        }
    }

    #[test]
    fn an_open_port_listens_until_closed() {
        let ports = LinuxPorts {
            open: Mutex::new(Vec::new()),
            links: Mutex::new(Vec::new()),
        };
        let a = ports.open_on(Ipv4Addr::LOCALHOST).unwrap();
        let b = ports.open_on(Ipv4Addr::LOCALHOST).unwrap();
        assert_ne!(a, b, "two ports share a name");
        let pa = PortName::parse(&a).unwrap();
        assert_ne!(pa.secret, PortName::parse(&b).unwrap().secret);
        TcpStream::connect(pa.addr).expect("an open port accepts connections");
        ports.close(a.as_bytes()).unwrap();
        assert_eq!(
            ports.close(a.as_bytes()).map_err(|e| e.class),
            Err(ErrorClass::Port)
        );
        assert!(
            TcpStream::connect(pa.addr).is_err(),
            "a closed port still accepts connections"
        );
        ports.close(b.as_bytes()).unwrap();
    }

    #[test]
    fn a_port_is_met_by_its_name() {
        let ports: &'static LinuxPorts = Box::leak(Box::new(LinuxPorts {
            open: Mutex::new(Vec::new()),
            links: Mutex::new(Vec::new()),
        }));
        let name = ports.open_on(Ipv4Addr::LOCALHOST).unwrap();
        let parsed = PortName::parse(&name).unwrap();
        let t = Duration::from_secs(10);
        let n2 = name.clone();
        let acceptor = std::thread::spawn(move || {
            let mut ch = ports.accept_at(&n2, t).unwrap();
            ch.recv(8, t).unwrap()
        });
        connect(&parsed, t).unwrap().send(b"hello").unwrap();
        assert_eq!(acceptor.join().unwrap(), b"hello");
        ports.close(name.as_bytes()).unwrap();
        assert!(ports.accept_at(&name, t).is_err(), "a closed port was met");
    }

    #[test]
    fn the_table_is_bounded() {
        let ports = LinuxPorts {
            open: Mutex::new(Vec::new()),
            links: Mutex::new(Vec::new()),
        };
        let names: Vec<String> = (0..MAX_PORTS)
            .map(|_| ports.open_on(Ipv4Addr::LOCALHOST).unwrap())
            .collect();
        assert_eq!(
            ports.open_on(Ipv4Addr::LOCALHOST).map_err(|e| e.class),
            Err(ErrorClass::NoMem)
        );
        for n in &names {
            ports.close(n.as_bytes()).unwrap();
        }
    }
}
