//! The name service behind `MPI_Publish_name`, `MPI_Lookup_name` and `MPI_Unpublish_name`:
//! service names mapped to port names, held by the launcher so that every process it started
//! sees the same table.
//!
//! The table is bounded ([`MAX_NAMES`] entries, names and ports shorter than the PMI value
//! limit), so a process that publishes in a loop cannot grow the launcher without end. A name
//! is published once: publishing it again is refused until it is unpublished (MPI leaves this
//! to the implementation; refusing keeps one answer per name, as MPICH's Hydra does).

use std::collections::HashMap;
use std::fmt;

/// Most services published at once.
pub const MAX_NAMES: usize = 1024;

/// Longest service or port name on the wire, in bytes: MPI's `MPI_MAX_PORT_NAME` less the NUL,
/// every byte possibly [encoded](encode) as three.
pub const MAX_NAME_LEN: usize = 3 * 255;

/// A service or port name as it travels in a PMI value: `%`, space, backslash, `=`, `;` and
/// control bytes as `%XX`. Launchers differ in what a value may hold (Hydra's PMI-1 cuts a
/// value at a space even when escaped, PMI-2 servers split at `;`), so the client sends only
/// bytes every one of them passes, and decodes what it looks up.
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '%' | ' ' | '\\' | '=' | ';') || c.is_ascii_control() {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The name [`encode`] made `wire` from; `None` if `wire` is not in that encoding.
pub fn decode(wire: &str) -> Option<String> {
    let mut out = Vec::with_capacity(wire.len());
    let mut bytes = wire.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            let text = std::str::from_utf8(&hex).ok()?;
            out.push(u8::from_str_radix(text, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// Why a name-service request was refused. Each has a fixed spelling on the PMI wire (the
/// `msg` of the reply), which the client reads back into the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameFault {
    /// `publish` of a service that is published already.
    AlreadyPublished,
    /// `lookup` or `unpublish` of a service that is not published.
    NotPublished,
    /// The table holds [`MAX_NAMES`] services.
    Full,
    /// An empty name, or one longer than [`MAX_NAME_LEN`].
    BadName,
}

impl NameFault {
    /// The reply's `msg` for this fault.
    pub fn wire(self) -> &'static str {
        match self {
            NameFault::AlreadyPublished => "service_already_published",
            NameFault::NotPublished => "service_not_published",
            NameFault::Full => "too_many_published_services",
            NameFault::BadName => "bad_service_or_port_name",
        }
    }

    /// The fault a reply's `msg` names, if it is one of ours.
    pub fn from_wire(msg: &str) -> Option<NameFault> {
        [
            NameFault::AlreadyPublished,
            NameFault::NotPublished,
            NameFault::Full,
            NameFault::BadName,
        ]
        .into_iter()
        .find(|f| f.wire() == msg)
    }
}

impl fmt::Display for NameFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameFault::AlreadyPublished => "the service is published already",
            NameFault::NotPublished => "no service of that name is published",
            NameFault::Full => "the launcher holds too many published services",
            NameFault::BadName => "the service or port name is empty or too long",
        })
    }
}

/// Published services and their port names.
#[derive(Debug, Default)]
pub struct Names {
    table: HashMap<String, String>,
}

fn check(name: &str) -> Result<(), NameFault> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(NameFault::BadName);
    }
    Ok(())
}

impl Names {
    /// Publishes `port` under `service`.
    pub fn publish(&mut self, service: &str, port: &str) -> Result<(), NameFault> {
        check(service)?;
        check(port)?;
        if self.table.contains_key(service) {
            return Err(NameFault::AlreadyPublished);
        }
        if self.table.len() >= MAX_NAMES {
            return Err(NameFault::Full);
        }
        self.table.insert(service.to_string(), port.to_string());
        Ok(())
    }

    /// The port published under `service`.
    pub fn lookup(&self, service: &str) -> Result<&str, NameFault> {
        self.table
            .get(service)
            .map(String::as_str)
            .ok_or(NameFault::NotPublished)
    }

    /// Withdraws `service`.
    pub fn unpublish(&mut self, service: &str) -> Result<(), NameFault> {
        self.table
            .remove(service)
            .map(drop)
            .ok_or(NameFault::NotPublished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_lookup_unpublish_round_trip() {
        let mut n = Names::default();
        n.publish("ocean", "tcp://1.2.3.4:5#s").unwrap();
        assert_eq!(n.lookup("ocean"), Ok("tcp://1.2.3.4:5#s"));
        assert_eq!(
            n.publish("ocean", "other"),
            Err(NameFault::AlreadyPublished)
        );
        n.unpublish("ocean").unwrap();
        assert_eq!(n.lookup("ocean"), Err(NameFault::NotPublished));
        assert_eq!(n.unpublish("ocean"), Err(NameFault::NotPublished));
        n.publish("ocean", "again").unwrap();
        assert_eq!(n.lookup("ocean"), Ok("again"));
    }

    #[test]
    fn bad_names_and_a_full_table_are_refused() {
        let mut n = Names::default();
        assert_eq!(n.publish("", "p"), Err(NameFault::BadName));
        assert_eq!(n.publish("s", ""), Err(NameFault::BadName));
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert_eq!(n.publish(&long, "p"), Err(NameFault::BadName));
        for i in 0..MAX_NAMES {
            n.publish(&format!("s{i}"), "p").unwrap();
        }
        assert_eq!(n.publish("one-more", "p"), Err(NameFault::Full));
    }

    #[test]
    fn names_encode_to_plain_bytes_and_back() {
        let name = "tcp://1.2.3.4:5 a\\b=c;d%e\tf#ü";
        let wire = encode(name);
        assert_eq!(wire, "tcp://1.2.3.4:5%20a%5Cb%3Dc%3Bd%25e%09f#ü");
        assert_eq!(decode(&wire).as_deref(), Some(name));
        assert_eq!(decode("plain"), Some("plain".into()));
        assert_eq!(decode("bad%2"), None);
        assert_eq!(decode("bad%zz"), None);
    }

    #[test]
    fn faults_round_trip_through_their_wire_spelling() {
        for f in [
            NameFault::AlreadyPublished,
            NameFault::NotPublished,
            NameFault::Full,
            NameFault::BadName,
        ] {
            assert_eq!(NameFault::from_wire(f.wire()), Some(f));
        }
        assert_eq!(NameFault::from_wire("key_not_found"), None);
    }
}
