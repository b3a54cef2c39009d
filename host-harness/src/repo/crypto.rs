//! restic's authenticated encryption: `IV (16) || AES-256-CTR ciphertext ||
//! Poly1305-AES MAC (16)`, the MAC over the ciphertext only, keyed by
//! `r || AES-128_k(IV)`. The same for key data, config and lock files.

use aes::cipher::{BlockEncrypt, KeyInit, KeyIvInit, StreamCipher};
use poly1305::Poly1305;
use subtle::ConstantTimeEq;

type Aes256Ctr = ctr::Ctr128BE<aes::Aes256>;

/// Bytes added to every encrypted blob: the IV and the MAC.
pub const OVERHEAD: usize = 32;

/// Why a blob could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Shorter than an IV and a MAC.
    #[error("too short to be encrypted ({0} bytes)")]
    TooShort(usize),
    /// The IV is all zeros, which restic never writes.
    #[error("all-zero IV")]
    ZeroIv,
    /// The MAC does not match: wrong key, or damaged data.
    #[error("MAC check failed (wrong key, or damaged file)")]
    Mac,
}

/// A restic encryption key: AES-256 for confidentiality, Poly1305-AES (k, r)
/// for integrity. Lives in memory only.
#[derive(Clone)]
pub struct Key {
    encrypt: [u8; 32],
    mac_k: [u8; 16],
    mac_r: [u8; 16],
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from its three parts.
    pub fn new(encrypt: [u8; 32], mac_k: [u8; 16], mac_r: [u8; 16]) -> Key {
        Key {
            encrypt,
            mac_k,
            mac_r,
        }
    }

    /// The 64 bytes scrypt derives from a password: AES key, MAC k, MAC r.
    pub fn from_derived(bytes: &[u8; 64]) -> Key {
        let mut key = Key::new([0; 32], [0; 16], [0; 16]);
        key.encrypt.copy_from_slice(&bytes[..32]);
        key.mac_k.copy_from_slice(&bytes[32..48]);
        key.mac_r.copy_from_slice(&bytes[48..]);
        key
    }

    /// Checks the MAC (in constant time), then decrypts.
    pub fn open(&self, blob: &[u8]) -> Result<Vec<u8>, OpenError> {
        if blob.len() < OVERHEAD {
            return Err(OpenError::TooShort(blob.len()));
        }
        let (iv, rest) = blob.split_at(16);
        let (ciphertext, mac) = rest.split_at(rest.len() - 16);
        let iv: [u8; 16] = iv.try_into().map_err(|_| OpenError::TooShort(blob.len()))?;
        if iv == [0; 16] {
            return Err(OpenError::ZeroIv);
        }
        if !bool::from(self.mac(&iv, ciphertext).ct_eq(mac)) {
            return Err(OpenError::Mac);
        }
        let mut plaintext = ciphertext.to_vec();
        Aes256Ctr::new(&self.encrypt.into(), &iv.into()).apply_keystream(&mut plaintext);
        Ok(plaintext)
    }

    /// Encrypts `plaintext` with `iv` (which must be random and never reused)
    /// into restic's stored form.
    pub fn seal(&self, plaintext: &[u8], iv: [u8; 16]) -> Vec<u8> {
        let mut out = Vec::with_capacity(plaintext.len() + OVERHEAD);
        out.extend_from_slice(&iv);
        let mut ciphertext = plaintext.to_vec();
        Aes256Ctr::new(&self.encrypt.into(), &iv.into()).apply_keystream(&mut ciphertext);
        let mac = self.mac(&iv, &ciphertext);
        out.extend_from_slice(&ciphertext);
        out.extend_from_slice(&mac);
        out
    }

    /// Poly1305-AES: one-time key `r || AES-128_k(iv)` (Poly1305 clamps r).
    fn mac(&self, iv: &[u8; 16], ciphertext: &[u8]) -> [u8; 16] {
        let mut s = aes::Block::from(*iv);
        aes::Aes128::new(&self.mac_k.into()).encrypt_block(&mut s);
        let mut one_time = [0u8; 32];
        one_time[..16].copy_from_slice(&self.mac_r);
        one_time[16..].copy_from_slice(&s);
        Poly1305::new(&one_time.into())
            .compute_unpadded(ciphertext)
            .into()
    }
}

/// Fresh random bytes from the operating system, for what a restic
/// repository keeps (the IV of `hold`'s lock). Fails only when the system has
/// no random numbers.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| format!("the system gave no random numbers: {e}"))?;
    Ok(bytes)
}

/// Bytes unique within this process (a hash of a counter and the pid), for
/// IVs, salts and ids written by tools that make test repositories: the
/// in-memory backend and the tests' lock writer. Not random, so never for
/// anything real ([`random_bytes`] is).
pub fn unique_bytes<const N: usize>() -> [u8; N] {
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let digest = Sha256::digest(format!("lockwarden test bytes {n} {}", std::process::id()));
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = digest[i % digest.len()] ^ (i / digest.len()) as u8;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::new([7; 32], [9; 16], [3; 16])
    }

    #[test]
    fn seal_then_open_round_trips() {
        let blob = key().seal(b"{\"time\":\"x\"}", [1; 16]);
        assert_eq!(blob.len(), 12 + OVERHEAD);
        assert_eq!(key().open(&blob).expect("opens"), b"{\"time\":\"x\"}");
    }

    #[test]
    fn damage_wrong_keys_and_short_blobs_are_refused() {
        let blob = key().seal(b"hello", [1; 16]);
        for i in [0, 16, blob.len() - 1] {
            let mut damaged = blob.clone();
            damaged[i] ^= 1;
            assert_eq!(key().open(&damaged), Err(OpenError::Mac), "byte {i}");
        }
        let other = Key::new([7; 32], [9; 16], [4; 16]);
        assert_eq!(other.open(&blob), Err(OpenError::Mac));
        assert_eq!(key().open(&blob[..31]), Err(OpenError::TooShort(31)));
        assert_eq!(
            key().open(&key().seal(b"x", [0; 16])),
            Err(OpenError::ZeroIv)
        );
    }
}
