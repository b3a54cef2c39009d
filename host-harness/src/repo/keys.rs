//! Key files (`keys/<id>`): plain JSON holding scrypt parameters and the
//! master key encrypted with the key derived from the password.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use super::crypto::Key;
use crate::limits;

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
    // restic calibrates to at most 60 MiB, and always with r=8 (64 leaves
    // room for other writers): a huge r with a tiny N would pass the work
    // bound while the lanes' 128·r·p bytes of input and their cache misses
    // cost gigabytes and seconds.
    if log_n > 24
        || memory > 1 << 28
        || file.r > 64
        || file.p > 64
        || file.work() > limits::SCRYPT_WORK_PER_KEY
    {
        return Err(KeyError::Invalid(format!(
            "scrypt parameters N={} r={} p={} ask for more work than any restic calibration \
             (N·r·p at most {}); not tried",
            file.n,
            file.r,
            file.p,
            limits::SCRYPT_WORK_PER_KEY
        )));
    }
    scrypt::Params::new(log_n, file.r, file.p)
        .map_err(|e| KeyError::Invalid(format!("bad scrypt parameters: {e}")))
}

/// One derivation at a time in this process: each already runs on every core
/// it may, and `watch` opening many repositories at once would otherwise hold
/// a table per lane per repository.
static DERIVING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How many of scrypt's `p` independent lanes run at once: one per core, no
/// more than `p`, and no more than [`limits::SCRYPT_MEMORY`] of tables
/// (128·r·N bytes each) allow; at least one.
fn scrypt_lanes(params: &scrypt::Params, cores: usize) -> usize {
    let table = 128u64
        .saturating_mul(u64::from(params.r()))
        .saturating_mul(params.n());
    let by_memory = usize::try_from(limits::SCRYPT_MEMORY / table.max(1)).unwrap_or(usize::MAX);
    cores
        .min(usize::try_from(params.p()).unwrap_or(usize::MAX))
        .min(by_memory)
        .max(1)
}

/// restic's user key: scrypt(password, salt) with the key file's parameters,
/// 64 bytes, its lanes on [`scrypt_lanes`] threads.
fn derive(password: &[u8], salt: &[u8], params: &scrypt::Params) -> Result<[u8; 64], KeyError> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let lanes = scrypt_lanes(params, cores);
    let _one_at_a_time = DERIVING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(lanes)
        .thread_name(|i| format!("scrypt-{i}"))
        .build()
        .map_err(|e| KeyError::Invalid(format!("cannot start scrypt's threads: {e}")))?;
    let mut derived = [0u8; 64];
    pool.install(|| scrypt::scrypt(password, salt, params, &mut derived))
        .map_err(|e| KeyError::Invalid(format!("scrypt failed: {e}")))?;
    Ok(derived)
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
    let derived = derive(password, &salt, &params)?;
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

    /// Work within bounds, but blocks of megabytes: refused before any work.
    #[test]
    fn huge_blocks_are_refused_before_any_work() {
        for file in [
            br#"{"kdf":"scrypt","N":2,"r":1048576,"p":4,"salt":"AA==","data":"AA=="}"#.as_slice(),
            br#"{"kdf":"scrypt","N":2,"r":65536,"p":64,"salt":"AA==","data":"AA=="}"#,
        ] {
            let err = open(file, b"pw").expect_err("too costly");
            assert!(err.to_string().contains("not tried"), "{err}");
        }
    }

    /// RFC 7914, section 12, through [`derive`] (so on as many lanes at once
    /// as this machine gives: the second vector has 16). The fourth vector
    /// needs a 1 GiB table, which [`scrypt_params`] refuses.
    #[test]
    fn derive_matches_rfc_7914() {
        let vectors = [
            (
                "",
                "",
                4,
                1,
                1,
                "77d65762 38657b20 3b19ca42 c18a0497 f16b4844 e3074ae8 dfdffa3f ede21442 fcd0069d ed0948f8 326a753a 0fc81f17 e8d3e0fb 2e0d3628 cf35e20c 38d18906",
            ),
            (
                "password",
                "NaCl",
                10,
                8,
                16,
                "fdbabe1c 9d347200 7856e719 0d01e9fe 7c6ad7cb c8237830 e7737663 4b373162 2eaf30d9 2e22a388 6ff10927 9d9830da c727afb9 4a83ee6d 8360cbdf a2cc0640",
            ),
            (
                "pleaseletmein",
                "SodiumChloride",
                14,
                8,
                1,
                "7023bdcb 3afd7348 461c06cd 81fd38eb fda8fbba 904f8e3e a9b543f6 545da1f2 d5432955 613f0fcf 62d49705 242a9af9 e61e85dc 0d651e40 dfcf017b 45575887",
            ),
        ];
        for (password, salt, log_n, r, p, expected) in vectors {
            let params = scrypt::Params::new(log_n, r, p).expect("valid");
            let derived = derive(password.as_bytes(), salt.as_bytes(), &params).expect("derives");
            assert_eq!(
                hex::encode(derived),
                expected.replace(' ', ""),
                "{password:?}"
            );
        }
    }

    #[test]
    fn lanes_follow_cores_p_and_memory() {
        let restic = scrypt::Params::new(15, 8, 6).expect("valid"); // 32 MiB a table
        assert_eq!(scrypt_lanes(&restic, 2), 2);
        assert_eq!(scrypt_lanes(&restic, 1), 1);
        assert_eq!(scrypt_lanes(&restic, 64), 2, "64 MiB of tables at most");
        let one_lane = scrypt::Params::new(15, 8, 1).expect("valid");
        assert_eq!(scrypt_lanes(&one_lane, 64), 1);
        let small = scrypt::Params::new(14, 8, 6).expect("valid"); // 16 MiB a table
        assert_eq!(scrypt_lanes(&small, 64), 4);
        let huge = scrypt::Params::new(21, 8, 4).expect("valid"); // 256 MiB a table
        assert_eq!(scrypt_lanes(&huge, 64), 1, "always at least one");
    }
}
