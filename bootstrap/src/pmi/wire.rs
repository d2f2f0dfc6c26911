//! The PMI-1 "simple" wire format: one command per line,
//! `cmd=<name>[ <key>=<value>]...\n`, in both directions.
//!
//! Keys are runs of `[A-Za-z0-9_/-]`. A value runs to the next space; newer
//! MPICH escapes a space or backslash inside a value with a backslash, so we
//! accept that on input and produce it on output. Everything here works on one
//! line without its terminating `\n`; framing belongs to the caller.

use std::fmt;

/// Longest line either side accepts. Real commands are far shorter (Hydra's
/// largest is a `put` of about 1.4 KiB); the cap only bounds memory when a
/// peer sends garbage without newlines.
pub const MAX_LINE: usize = 64 * 1024;

/// One parsed PMI-1 command or reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The value of the leading `cmd=` token, e.g. `put` or `get_result`.
    pub cmd: String,
    /// The remaining `key=value` tokens in wire order. A bare `key` token
    /// without `=` is kept with an empty value.
    pub args: Vec<(String, String)>,
}

/// Why a line is not a PMI-1 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The line is longer than [`MAX_LINE`].
    TooLong(usize),
    /// The line is not valid UTF-8.
    NotUtf8,
    /// The line does not begin with `cmd=<name>`.
    NoCmd,
    /// A byte that cannot start or continue a key, at this byte offset.
    BadKey(usize),
    /// `key=` followed by nothing.
    EmptyValue(String),
    /// A line break inside the line (a line ends at its `\n`; no value can hold one).
    LineBreak,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::TooLong(n) => write!(f, "line of {n} bytes exceeds {MAX_LINE}"),
            WireError::NotUtf8 => f.write_str("line is not valid UTF-8"),
            WireError::NoCmd => f.write_str("line does not start with cmd=<name>"),
            WireError::BadKey(at) => write!(f, "invalid key character at byte {at}"),
            WireError::EmptyValue(k) => write!(f, "key `{k}` has `=` but no value"),
            WireError::LineBreak => f.write_str("line break inside the line"),
        }
    }
}

impl std::error::Error for WireError {}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'/'
}

impl Message {
    /// A message with no arguments yet.
    pub fn new(cmd: &str) -> Message {
        Message {
            cmd: cmd.to_string(),
            args: Vec::new(),
        }
    }

    /// Appends `key=value` (builder style).
    pub fn arg(mut self, key: &str, value: impl ToString) -> Message {
        self.args.push((key.to_string(), value.to_string()));
        self
    }

    /// The value of the first token named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Parses one line (without its `\n`).
    pub fn parse(line: &[u8]) -> Result<Message, WireError> {
        if line.len() > MAX_LINE {
            return Err(WireError::TooLong(line.len()));
        }
        if line.iter().any(|&b| b == b'\n' || b == b'\r') {
            return Err(WireError::LineBreak);
        }
        let text = std::str::from_utf8(line).map_err(|_| WireError::NotUtf8)?;
        if !text.starts_with("cmd=") {
            return Err(WireError::NoCmd);
        }
        let bytes = text.as_bytes();
        let mut tokens: Vec<(String, String)> = Vec::new();
        let mut i = 0;
        loop {
            while i < bytes.len() && bytes[i] == b' ' {
                i += 1;
            }
            if i == bytes.len() {
                break;
            }
            let key_start = i;
            while i < bytes.len() && is_key_byte(bytes[i]) {
                i += 1;
            }
            if i == key_start || (i < bytes.len() && bytes[i] != b'=' && bytes[i] != b' ') {
                return Err(WireError::BadKey(i));
            }
            let key = &text[key_start..i];
            let mut value = String::new();
            if i < bytes.len() && bytes[i] == b'=' {
                i += 1;
                let value_start = i;
                while i < bytes.len() && bytes[i] != b' ' {
                    // A backslash protects the next byte (a space or another
                    // backslash); a trailing backslash is taken literally.
                    if bytes[i] == b'\\' && i + 1 < bytes.len() {
                        i += 1;
                    }
                    i += 1;
                }
                if i == value_start {
                    return Err(WireError::EmptyValue(key.to_string()));
                }
                value = unescape(&text[value_start..i]);
            }
            tokens.push((key.to_string(), value));
        }
        let (first_key, cmd) = tokens.remove(0);
        if first_key != "cmd" || cmd.is_empty() {
            return Err(WireError::NoCmd);
        }
        Ok(Message { cmd, args: tokens })
    }

    /// Formats the message as one line including the trailing `\n`.
    pub fn to_line(&self) -> Vec<u8> {
        let mut out = String::with_capacity(16 + self.args.len() * 16);
        out.push_str("cmd=");
        escape_into(&self.cmd, &mut out);
        for (k, v) in &self.args {
            out.push(' ');
            out.push_str(k);
            // An empty value goes as the bare key the parser reads it from (`key=` with
            // nothing after it is not a token).
            if !v.is_empty() {
                out.push('=');
                escape_into(v, &mut out);
            }
        }
        out.push('\n');
        out.into_bytes()
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = self.to_line();
        f.write_str(String::from_utf8_lossy(&line[..line.len() - 1]).as_ref())
    }
}

fn unescape(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(next) => out.push(next),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Escapes a value so that it survives as one token. A line break cannot be
/// escaped in this format (the line would end), so it becomes a space.
fn escape_into(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            ' ' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push_str("\\ "),
            _ => out.push(c),
        }
    }
}

/// Splits the first complete line (without `\n`) off the front of `buf`.
pub fn take_line(buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let end = buf.iter().position(|&b| b == b'\n')?;
    let mut line: Vec<u8> = buf.drain(..=end).collect();
    line.pop();
    Some(line)
}

/// A short, printable rendering of untrusted bytes for log messages.
pub fn excerpt(bytes: &[u8]) -> String {
    const MAX: usize = 80;
    let shown = &bytes[..bytes.len().min(MAX)];
    let mut s: String = shown.escape_ascii().to_string();
    if bytes.len() > MAX {
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hydra_replies() {
        let m = Message::parse(b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024").unwrap();
        assert_eq!(m.cmd, "maxes");
        assert_eq!(m.get("kvsname_max"), Some("256"));
        assert_eq!(m.get("keylen_max"), Some("64"));
        assert_eq!(m.get("vallen_max"), Some("1024"));
        assert_eq!(m.get("missing"), None);

        let m = Message::parse(b"cmd=get_result rc=0 msg=success value=x6869").unwrap();
        assert_eq!(m.cmd, "get_result");
        assert_eq!(m.get("value"), Some("x6869"));

        let m = Message::parse(b"cmd=barrier_out").unwrap();
        assert_eq!(m.cmd, "barrier_out");
        assert!(m.args.is_empty());
    }

    #[test]
    fn parses_client_commands() {
        let m = Message::parse(b"cmd=init pmi_version=1 pmi_subversion=1").unwrap();
        assert_eq!(
            m,
            Message::new("init")
                .arg("pmi_version", 1)
                .arg("pmi_subversion", 1)
        );
        let m = Message::parse(b"cmd=put kvsname=kvs_1 key=a-0 value=k=v=w").unwrap();
        assert_eq!(m.get("value"), Some("k=v=w"));
        // Extra spaces between tokens and a bare flag token are tolerated.
        let m = Message::parse(b"cmd=abort  exitcode=7 flag").unwrap();
        assert_eq!(m.get("exitcode"), Some("7"));
        assert_eq!(m.get("flag"), Some(""));
    }

    #[test]
    fn what_is_parsed_is_written_back_the_same() {
        for line in [
            &b"cmd=abort  exitcode=7 flag"[..],
            b"cmd=put kvsname=k key=a value=x\\ y",
            b"cmd=get_result rc=0 msg= value=1",
            b"cmd=x a b c=d",
            // Found by fuzzing (fuzz/ pmi_line): a line break inside a line.
            b"cmd=c\n",
            b"cmd=put key=a value=x\ry",
        ] {
            let Ok(m) = Message::parse(line) else {
                continue;
            };
            let written = m.to_line();
            let back = Message::parse(&written[..written.len() - 1]);
            assert_eq!(back.as_ref(), Ok(&m), "{}", String::from_utf8_lossy(line));
        }
        let bare = Message::new("x").arg("flag", "");
        assert_eq!(bare.to_line(), b"cmd=x flag\n".to_vec());
    }

    #[test]
    fn escapes_round_trip() {
        let m = Message::new("abort")
            .arg("exitcode", 3)
            .arg("message", "bad thing \\ here");
        let line = m.to_line();
        assert_eq!(
            line,
            b"cmd=abort exitcode=3 message=bad\\ thing\\ \\\\\\ here\n".to_vec()
        );
        let back = Message::parse(&line[..line.len() - 1]).unwrap();
        assert_eq!(back, m);
        // Newlines cannot travel; they become spaces rather than breaking framing.
        let line = Message::new("abort").arg("message", "a\nb").to_line();
        assert_eq!(line, b"cmd=abort message=a\\ b\n".to_vec());
    }

    #[test]
    fn rejects_malformed_lines() {
        assert_eq!(Message::parse(b""), Err(WireError::NoCmd));
        assert_eq!(Message::parse(b"hello"), Err(WireError::NoCmd));
        assert_eq!(
            Message::parse(b"cmd="),
            Err(WireError::EmptyValue("cmd".into()))
        );
        assert_eq!(Message::parse(b" cmd=init"), Err(WireError::NoCmd));
        assert_eq!(
            Message::parse(b"cmd=put key="),
            Err(WireError::EmptyValue("key".into()))
        );
        assert_eq!(Message::parse(b"cmd=put k@y=1"), Err(WireError::BadKey(9)));
        assert_eq!(Message::parse(b"cmd=put =1"), Err(WireError::BadKey(8)));
        assert_eq!(Message::parse(b"cmd=put \xff=1"), Err(WireError::NotUtf8));
        assert_eq!(Message::parse(b"cmd=put key=\xc3"), Err(WireError::NotUtf8));
        let long = vec![b'a'; MAX_LINE + 1];
        assert_eq!(Message::parse(&long), Err(WireError::TooLong(MAX_LINE + 1)));
    }

    #[test]
    fn take_line_splits_frames() {
        let mut buf = b"cmd=a\ncmd=b\npartial".to_vec();
        assert_eq!(take_line(&mut buf).unwrap(), b"cmd=a");
        assert_eq!(take_line(&mut buf).unwrap(), b"cmd=b");
        assert_eq!(take_line(&mut buf), None);
        assert_eq!(buf, b"partial");
    }

    #[test]
    fn excerpt_is_printable_and_short() {
        assert_eq!(excerpt(b"a\x00b\n"), "a\\x00b\\n");
        assert_eq!(excerpt(&[b'z'; 100]).len(), 83);
    }
}
