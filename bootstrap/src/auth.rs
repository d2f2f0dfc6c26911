//! Proof of membership in a job: a secret key that only the launcher and the ranks it started
//! hold, and challenge–response with HMAC-SHA-256 over fresh nonces from both sides.
//!
//! A peer never sends the key, only a proof computed over both nonces of the exchange, so a
//! captured exchange proves nothing the next time (the other side's nonce differs), and an
//! eavesdropper learns nothing it could present. Each side proves itself with its own role
//! label, so a proof cannot be reflected back at its author.
//!
//! Keys derive from one job key ([`Key::derive`]): stormrun gives each rank only the key for its
//! rank, so a rank can prove who it is but cannot speak as another rank.

use std::fmt;
use std::io;

use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a key.
pub const KEY_LEN: usize = 32;
/// Bytes of a nonce.
pub const NONCE_LEN: usize = 16;
/// Bytes of a proof (an HMAC-SHA-256 tag).
pub const PROOF_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// A secret key. Its `Debug` form does not show the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

/// A fresh random value that one side contributes to an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nonce(pub [u8; NONCE_LEN]);

/// What one side sends to show it holds a key.
pub type Proof = [u8; PROOF_LEN];

impl Key {
    /// A new key from the kernel's random source.
    pub fn generate() -> io::Result<Key> {
        let mut k = [0; KEY_LEN];
        random(&mut k)?;
        Ok(Key(k))
    }

    /// The key with these bytes.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Key {
        Key(bytes)
    }

    /// The key's bytes (to hand to the members of a job through a channel they trust).
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// The key for member `index` of the set `label` names (e.g. a rank's PMI key): knowing
    /// it tells nothing about this key or another member's.
    pub fn derive(&self, label: &str, index: u32) -> Key {
        Key(self.mac(&[b"derive", label.as_bytes(), &index.to_be_bytes()]))
    }

    /// The key in hexadecimal, for an environment variable or a line on a pipe.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Reads a key written by [`Key::to_hex`].
    pub fn from_hex(text: &str) -> Option<Key> {
        unhex(text.trim()).map(Key)
    }

    /// The proof that the side playing `role` in the exchange over `context` and the two
    /// nonces (its own first) holds this key.
    pub fn prove(&self, role: &str, context: &[u8], own: &Nonce, other: &Nonce) -> Proof {
        self.mac(&[role.as_bytes(), context, &own.0, &other.0])
    }

    /// Whether `proof` is what [`Key::prove`] gives for the same arguments, compared in time
    /// independent of where they differ.
    pub fn verify(
        &self,
        proof: &[u8],
        role: &str,
        context: &[u8],
        own: &Nonce,
        other: &Nonce,
    ) -> bool {
        let mut m = self.hmac();
        feed(&mut m, &[role.as_bytes(), context, &own.0, &other.0]);
        m.verify_slice(proof).is_ok()
    }

    fn hmac(&self) -> HmacSha256 {
        // HMAC pads a short key with zeros to the hash's block; padding it here gives the same
        // MAC through the constructor that cannot fail.
        let mut block = [0u8; 64];
        block[..KEY_LEN].copy_from_slice(&self.0);
        <HmacSha256 as KeyInit>::new(&block.into())
    }

    fn mac(&self, parts: &[&[u8]]) -> [u8; PROOF_LEN] {
        let mut m = self.hmac();
        feed(&mut m, parts);
        m.finalize().into_bytes().into()
    }
}

/// Each part with its length first, so that no two lists of parts feed the same bytes.
fn feed(m: &mut HmacSha256, parts: &[&[u8]]) {
    for p in parts {
        m.update(&(p.len() as u32).to_be_bytes());
        m.update(p);
    }
}

impl Nonce {
    /// A new nonce from the kernel's random source.
    pub fn generate() -> io::Result<Nonce> {
        let mut n = [0; NONCE_LEN];
        random(&mut n)?;
        Ok(Nonce(n))
    }

    /// The nonce in hexadecimal.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Reads a nonce written by [`Nonce::to_hex`].
    pub fn from_hex(text: &str) -> Option<Nonce> {
        unhex(text).map(Nonce)
    }
}

/// Lower-case hexadecimal of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// The `N` bytes that `text` (exactly `2N` hexadecimal digits) writes.
pub fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let t = text.as_bytes();
    if t.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(t[2 * i])? << 4 | digit(t[2 * i + 1])?;
    }
    Some(out)
}

/// Fills `buf` with random bytes from the kernel.
pub fn random(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is writable for its length.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_the_same_key_role_context_and_nonces() {
        let k = Key::from_bytes([7; KEY_LEN]);
        let (a, b) = (Nonce([1; NONCE_LEN]), Nonce([2; NONCE_LEN]));
        let p = k.prove("client", b"rank 3", &a, &b);
        assert!(k.verify(&p, "client", b"rank 3", &a, &b));
        assert!(!k.verify(&p, "server", b"rank 3", &a, &b));
        assert!(!k.verify(&p, "client", b"rank 4", &a, &b));
        assert!(!k.verify(&p, "client", b"rank 3", &b, &a));
        assert!(!k.verify(&p[..31], "client", b"rank 3", &a, &b));
        let other = Key::from_bytes([8; KEY_LEN]);
        assert!(!other.verify(&p, "client", b"rank 3", &a, &b));
        // Parts are delimited: moving a byte from one part to the next changes the proof.
        assert_ne!(
            k.prove("client", b"rank 3", &a, &b),
            k.prove("clien", b"trank 3", &a, &b)
        );
    }

    #[test]
    fn padded_key_gives_the_standard_hmac() {
        let k = Key::from_bytes(core::array::from_fn(|i| i as u8));
        let mut m = <HmacSha256 as Mac>::new_from_slice(&k.0).unwrap();
        feed(&mut m, &[b"x"]);
        assert_eq!(k.mac(&[b"x"]), <[u8; 32]>::from(m.finalize().into_bytes()));
    }

    #[test]
    fn derived_keys_differ_by_member() {
        let k = Key::from_bytes([9; KEY_LEN]);
        assert_ne!(k.derive("pmi rank", 0), k.derive("pmi rank", 1));
        assert_ne!(k.derive("pmi rank", 0), k.derive("tcp", 0));
        assert_eq!(k.derive("pmi rank", 5), k.derive("pmi rank", 5));
        assert_ne!(k.derive("pmi rank", 0), k);
    }

    #[test]
    fn hex_round_trips_and_refuses_garbage() {
        let k = Key::generate().unwrap();
        assert_eq!(Key::from_hex(&k.to_hex()), Some(k.clone()));
        assert_eq!(format!("{k:?}"), "Key(..)");
        let n = Nonce::generate().unwrap();
        assert_eq!(Nonce::from_hex(&n.to_hex()), Some(n));
        assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
        assert_eq!(unhex::<2>("0fA0"), Some([0x0f, 0xa0]));
        for bad in ["", "0", "0fa", "0fa0a", "zz00", "0f a"] {
            assert_eq!(unhex::<2>(bad), None, "{bad}");
        }
        assert_ne!(Nonce::generate().unwrap(), Nonce::generate().unwrap());
    }
}
