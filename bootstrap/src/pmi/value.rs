//! How binary values are stored in PMI's text key-value space.
//!
//! PMI values are short space-free strings, so bytes travel as lowercase hex.
//! The value stored under a key starts with a tag:
//!
//! * `x<hex>` — the whole value (an empty value is just `x`);
//! * `c<n>` — the value did not fit the server's `vallen_max`; it is split
//!   into `n` hex chunks stored under `<key>.0` .. `<key>.<n-1>`.
//!
//! The tag makes an empty value representable (PMI cannot store an empty
//! string) and lets a reader tell both forms apart without extra round trips.

use super::error::PmiError;

/// The `put`s needed to store one value: `(wire key, wire value)` pairs,
/// chunks first and the head record last, so that a reader who sees the head
/// can rely on the chunks being there.
pub(crate) fn encode(key: &str, value: &[u8], max_chars: usize) -> Vec<(String, String)> {
    let hex = to_hex(value);
    // One tag character plus the hex must fit.
    if hex.len() < max_chars {
        return vec![(key.to_string(), format!("x{hex}"))];
    }
    let chunk = max_chars & !1; // whole bytes per chunk keeps chunks decodable alone
    let mut puts: Vec<(String, String)> = hex
        .as_bytes()
        .chunks(chunk)
        .enumerate()
        .map(|(i, c)| (chunk_key(key, i), String::from_utf8_lossy(c).into_owned()))
        .collect();
    puts.push((key.to_string(), format!("c{}", puts.len())));
    puts
}

/// The longest wire key [`encode`] produces for `key` and a value of
/// `value_len` bytes.
pub(crate) fn longest_key(key: &str, value_len: usize, max_chars: usize) -> usize {
    let hex_len = 2 * value_len;
    if hex_len < max_chars {
        key.len()
    } else {
        let chunks = hex_len.div_ceil(max_chars & !1);
        chunk_key(key, chunks - 1).len()
    }
}

fn chunk_key(key: &str, index: usize) -> String {
    format!("{key}.{index}")
}

/// What the head record under a key says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// The complete value.
    Inline(Vec<u8>),
    /// The value is in this many chunks.
    Chunked(usize),
}

/// Upper bound on chunks accepted from the wire, so that a corrupt head
/// cannot make us issue millions of requests (1 Mi chunks of ~1 KiB is far
/// beyond any modex record).
const MAX_CHUNKS: usize = 1 << 20;

/// Decodes a head record found under `key`.
pub(crate) fn decode_head(key: &str, stored: &str) -> Result<Head, PmiError> {
    let corrupt = |detail: String| PmiError::CorruptValue {
        key: key.to_string(),
        detail,
    };
    if let Some(hex) = stored.strip_prefix('x') {
        let mut out = Vec::with_capacity(hex.len() / 2);
        from_hex(hex, &mut out).map_err(corrupt)?;
        Ok(Head::Inline(out))
    } else if let Some(n) = stored.strip_prefix('c') {
        match n.parse::<usize>() {
            Ok(n) if (1..=MAX_CHUNKS).contains(&n) => Ok(Head::Chunked(n)),
            _ => Err(corrupt(format!("bad chunk count `{n}`"))),
        }
    } else {
        Err(corrupt(format!(
            "unknown encoding tag in `{}`",
            super::wire::excerpt(stored.as_bytes())
        )))
    }
}

/// The wire key of chunk `index` of the value under `key`.
pub(crate) fn chunk_wire_key(key: &str, index: usize) -> String {
    chunk_key(key, index)
}

/// Appends the bytes of one hex chunk read from under `key` to `out`.
pub(crate) fn decode_chunk(key: &str, hex: &str, out: &mut Vec<u8>) -> Result<(), PmiError> {
    from_hex(hex, out).map_err(|detail| PmiError::CorruptValue {
        key: key.to_string(),
        detail,
    })
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn from_hex(hex: &str, out: &mut Vec<u8>) -> Result<(), String> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(format!("odd hex length {}", bytes.len()));
    }
    for pair in bytes.chunks(2) {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
            _ => return Err(format!("non-hex characters `{}`", pair.escape_ascii())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_inline() {
        assert_eq!(encode("k-0", b"", 100), vec![("k-0".into(), "x".into())]);
        assert_eq!(
            encode("k-0", &[0x00, 0xab, 0xff], 100),
            vec![("k-0".into(), "x00abff".into())]
        );
        assert_eq!(decode_head("k-0", "x").unwrap(), Head::Inline(vec![]));
        assert_eq!(
            decode_head("k-0", "x00ABff").unwrap(),
            Head::Inline(vec![0, 0xab, 0xff])
        );
    }

    #[test]
    fn large_values_are_chunked_and_reassemble() {
        let value: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let puts = encode("big-3", &value, 101);
        // 2000 hex chars in chunks of 100, then the head record.
        assert_eq!(puts.len(), 21);
        assert_eq!(puts[0].0, "big-3.0");
        assert_eq!(puts[19].0, "big-3.19");
        assert_eq!(puts[20], ("big-3".into(), "c20".into()));
        assert!(puts.iter().all(|(_, v)| v.len() <= 101));
        assert_eq!(longest_key("big-3", 1000, 101), "big-3.19".len());

        let n = match decode_head("big-3", &puts[20].1).unwrap() {
            Head::Chunked(n) => n,
            other => panic!("{other:?}"),
        };
        let mut out = Vec::new();
        for (i, (k, v)) in puts.iter().take(n).enumerate() {
            assert_eq!(*k, chunk_wire_key("big-3", i));
            decode_chunk(k, v, &mut out).unwrap();
        }
        assert_eq!(out, value);
    }

    #[test]
    fn boundary_between_inline_and_chunked() {
        // 1 tag char + 2*49 hex = 99 fits in 99; 50 bytes does not.
        assert_eq!(encode("k", &[7; 49], 99).len(), 1);
        assert_eq!(encode("k", &[7; 50], 99).len(), 3);
    }

    #[test]
    fn corrupt_values_are_errors() {
        for bad in [
            "",
            "y12",
            "x1",
            "x0g",
            "c",
            "c0",
            "c-1",
            "cx",
            "c99999999999",
        ] {
            assert!(
                matches!(decode_head("k", bad), Err(PmiError::CorruptValue { .. })),
                "{bad:?} accepted"
            );
        }
        let mut out = Vec::new();
        assert!(decode_chunk("k.0", "abc", &mut out).is_err());
        assert!(decode_chunk("k.0", "zz", &mut out).is_err());
    }
}
