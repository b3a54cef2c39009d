//! Key files (`keys/<id>`): plain JSON holding scrypt parameters and the
//! master key encrypted with the key derived from the password.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use super::crypto::Key;

/// restic tries at most this many key files.
pub const MAX_KEYS: usize = 20;

/// A key file as restic writes it. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
struct KeyFile {
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
/// could have written (and what this machine can afford: 128 * r * N bytes).
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
    if log_n > 24 || memory > 1 << 30 || file.p > 64 {
        return Err(KeyError::Invalid(format!(
            "scrypt parameters N={} r={} p={} are beyond any restic calibration",
            file.n, file.r, file.p
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

/// Opens one key file with `password`, returning the repository's master key.
pub fn open(key_file: &[u8], password: &[u8]) -> Result<Key, KeyError> {
    let file: KeyFile = serde_json::from_slice(key_file)
        .map_err(|e| KeyError::Invalid(format!("not a restic key file: {e}")))?;
    let params = scrypt_params(&file)?;
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
    let master: MasterKeyJson = serde_json::from_slice(&plaintext)
        .map_err(|e| KeyError::Invalid(format!("master key is not valid JSON: {e}")))?;
    Ok(Key::new(
        base64_bytes("encrypt", &master.encrypt)?,
        base64_bytes("mac.k", &master.mac.k)?,
        base64_bytes("mac.r", &master.mac.r)?,
    ))
}
