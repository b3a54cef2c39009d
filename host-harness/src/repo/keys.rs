//! Key files (`keys/<id>`): plain JSON holding scrypt parameters and the
//! master key encrypted with the key derived from the password.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use super::crypto::Key;
use crate::limits;

/// restic tries at most this many key files.
pub const MAX_KEYS: usize = 20;

/// A key file as restic writes it. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
pub struct KeyFile {
    kdf: String,
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
    salt: String,
    data: String,
}

/// The master key as stored inside a key file's `data`.
#[derive(Deserialize)]
struct MasterKeyJson {
    mac: MacJson,
    encrypt: String,
}

#[derive(Deserialize)]
struct MacJson {
    k: String,
    r: String,
}

/// Why a key file did not yield the master key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The password derives a key that does not open this file.
    #[error("wrong password for this key")]
    WrongPassword,
    /// The file is not a restic key file we can use.
    #[error("{0}")]
    Invalid(String),
}

/// scrypt's cost: N must be a power of two; N, r and p within what restic
/// could have written and what this machine can afford: 128·r·N bytes of
/// memory, and N·r·p within [`limits::SCRYPT_WORK_PER_KEY`].
fn scrypt_params(file: &KeyFile) -> Result<scrypt::Params, KeyError> {
    if file.kdf != "scrypt" {
        return Err(KeyError::Invalid(format!("unsupported kdf `{}`", file.kdf)));
    }
    if !file.n.is_power_of_two() || file.n < 2 {
        return Err(KeyError::Invalid(format!(
            "scrypt N={} is not a power of two",
            file.n
        )));
    }
    let log_n = u8::try_from(file.n.trailing_zeros()).unwrap_or(u8::MAX);
    let memory = 128u64 * u64::from(file.r) * file.n;
    // restic calibrates to at most 60 MiB.
    if log_n > 24 || memory > 1 << 28 || file.p > 64 || file.work() > limits::SCRYPT_WORK_PER_KEY {
        return Err(KeyError::Invalid(format!(
            "scrypt parameters N={} r={} p={} ask for more work than any restic calibration \
             (N·r·p at most {}); not tried",
            file.n,
            file.r,
            file.p,
            limits::SCRYPT_WORK_PER_KEY
        )));
    }
    scrypt::Params::new(log_n, file.r, file.p, 64)
        .map_err(|e| KeyError::Invalid(format!("bad scrypt parameters: {e}")))
}

fn base64_bytes<const N: usize>(field: &str, text: &str) -> Result<[u8; N], KeyError> {
    let bytes = BASE64
        .decode(text)
        .map_err(|e| KeyError::Invalid(format!("field `{field}` is not base64: {e}")))?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        KeyError::Invalid(format!("field `{field}` has {} bytes, not {N}", b.len()))
    })
}

impl KeyFile {
    /// Parses a key file; deriving nothing yet.
    pub fn parse(bytes: &[u8]) -> Result<KeyFile, KeyError> {
        serde_json::from_slice(bytes)
            .map_err(|e| KeyError::Invalid(format!("not a restic key file: {e}")))
    }

    /// The scrypt work this key asks for, as N·r·p.
    pub fn work(&self) -> u64 {
        self.n
            .saturating_mul(u64::from(self.r))
            .saturating_mul(u64::from(self.p))
    }

    /// Derives the user key from `password` and opens the master key.
    pub fn open(&self, password: &[u8]) -> Result<Key, KeyError> {
        open_parsed(self, password)
    }
}

/// Opens one key file with `password`, returning the repository's master key.
pub fn open(key_file: &[u8], password: &[u8]) -> Result<Key, KeyError> {
    KeyFile::parse(key_file)?.open(password)
}

fn open_parsed(file: &KeyFile, password: &[u8]) -> Result<Key, KeyError> {
    let params = scrypt_params(file)?;
    let salt = BASE64
        .decode(&file.salt)
        .map_err(|e| KeyError::Invalid(format!("field `salt` is not base64: {e}")))?;
    let data = BASE64
        .decode(&file.data)
        .map_err(|e| KeyError::Invalid(format!("field `data` is not base64: {e}")))?;
    let mut derived = [0u8; 64];
    scrypt::scrypt(password, &salt, &params, &mut derived)
        .map_err(|e| KeyError::Invalid(format!("scrypt failed: {e}")))?;
    let user_key = Key::from_derived(&derived);
    let plaintext = user_key.open(&data).map_err(|_| KeyError::WrongPassword)?;
    master_key(&plaintext)
}

/// The master key from the JSON a key file's `data` decrypts to.
pub(crate) fn master_key(plaintext: &[u8]) -> Result<Key, KeyError> {
    let master: MasterKeyJson = serde_json::from_slice(plaintext)
        .map_err(|e| KeyError::Invalid(format!("master key is not valid JSON: {e}")))?;
    Ok(Key::new(
        base64_bytes("encrypt", &master.encrypt)?,
        base64_bytes("mac.k", &master.mac.k)?,
        base64_bytes("mac.r", &master.mac.r)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costly_parameters_are_refused_before_any_work() {
        let file = br#"{"kdf":"scrypt","N":1048576,"r":8,"p":64,"salt":"AA==","data":"AA=="}"#;
        // Refused by the parameter check, which runs before scrypt.
        let err = open(file, b"pw").expect_err("too costly");
        assert!(err.to_string().contains("not tried"), "{err}");
        assert_eq!(KeyFile::parse(file).expect("parses").work(), 1 << 29);
    }
}
