//! Lock files (`locks/<id>`): encrypted JSON, raw or zstd-compressed, named by
//! the SHA-256 of the stored bytes.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::crypto::Key;
use crate::contract::Lock;
use crate::time::parse_rfc3339;

/// The largest decompressed lock we accept; real ones are about 150 bytes.
const MAX_LOCK_JSON: usize = 64 * 1024;

/// A lock file's JSON. `uid`/`gid` are omitted by restic when 0; unknown
/// fields are ignored.
#[derive(Debug, Deserialize)]
struct LockJson {
    time: String,
    #[serde(default)]
    exclusive: bool,
    #[serde(default)]
    hostname: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    pid: i64,
    #[serde(default)]
    uid: u32,
    #[serde(default)]
    gid: u32,
}

/// True when `id` can name a restic file: 64 lowercase hex digits. Checked
/// before any id becomes part of a path or URL.
pub fn is_valid_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Decodes the stored bytes of lock `id`, or says in one phrase what is wrong
/// with them.
pub fn decode(id: &str, stored: &[u8], key: &Key) -> Result<Lock, String> {
    if stored.is_empty() {
        return Err("empty file".into());
    }
    let digest = hex::encode(Sha256::digest(stored));
    if digest != id {
        return Err(format!(
            "content does not match its name (SHA-256 is {}...), damaged or renamed",
            &digest[..8]
        ));
    }
    let plaintext = key
        .open(stored)
        .map_err(|e| format!("cannot decrypt: {e}"))?;
    let json = decompress(&plaintext)?;
    parse(id, &json)
}

/// Version 2 repositories compress: `0x02` then a zstd frame. `{` or `[`
/// starts raw JSON.
fn decompress(plaintext: &[u8]) -> Result<Vec<u8>, String> {
    match plaintext.first() {
        Some(b'{' | b'[') => Ok(plaintext.to_vec()),
        Some(2) => zstd::bulk::decompress(&plaintext[1..], MAX_LOCK_JSON)
            .map_err(|e| format!("cannot decompress: {e}")),
        Some(other) => Err(format!("unknown format byte 0x{other:02x}")),
        None => Err("decrypts to nothing".into()),
    }
}

/// Parses decoded lock JSON.
pub fn parse(id: &str, json: &[u8]) -> Result<Lock, String> {
    let lock: LockJson = serde_json::from_slice(json).map_err(|e| format!("not a lock: {e}"))?;
    let time = parse_rfc3339(&lock.time).map_err(|e| format!("bad time: {e}"))?;
    Ok(Lock {
        id: id.to_owned(),
        time,
        exclusive: lock.exclusive,
        hostname: lock.hostname,
        username: lock.username,
        pid: lock.pid,
        uid: lock.uid,
        gid: lock.gid,
        first_seen: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::new([1; 32], [2; 16], [3; 16])
    }

    fn stored(plaintext: &[u8]) -> (String, Vec<u8>) {
        let bytes = key().seal(plaintext, [9; 16]);
        (hex::encode(Sha256::digest(&bytes)), bytes)
    }

    const JSON: &[u8] = br#"{"time":"2026-11-30T16:24:15.617863762+01:00","exclusive":true,"hostname":"vm","username":"root","pid":17800,"extra":1}"#;

    #[test]
    fn decodes_raw_and_zstd_locks_with_defaults() {
        let (id, raw) = stored(JSON);
        let lock = decode(&id, &raw, &key()).expect("raw decodes");
        assert_eq!(
            (lock.exclusive, lock.pid, lock.uid, lock.gid),
            (true, 17800, 0, 0)
        );
        assert_eq!(
            lock.time,
            parse_rfc3339("2026-11-30T15:24:15.617863762Z").expect("t")
        );

        let mut compressed = vec![2];
        compressed.extend(zstd::bulk::compress(JSON, 3).expect("compress"));
        let (id, z) = stored(&compressed);
        assert_eq!(
            decode(&id, &z, &key()).expect("zstd decodes").hostname,
            "vm"
        );
    }

    #[test]
    fn names_every_problem() {
        let (id, raw) = stored(JSON);
        let problem = |id: &str, bytes: &[u8]| decode(id, bytes, &key()).expect_err("must fail");
        assert_eq!(problem(&id, b""), "empty file");
        assert!(problem(&"0".repeat(64), &raw).contains("does not match its name"));
        let foreign = Key::new([5; 32], [6; 16], [7; 16]);
        let other = foreign.seal(JSON, [9; 16]);
        let other_id = hex::encode(Sha256::digest(&other));
        assert!(problem(&other_id, &other).contains("MAC check failed"));
        let (id, bad) = stored(b"{\"time\": 5}");
        assert!(problem(&id, &bad).starts_with("not a lock"));
        let (id, bad) = stored(b"\x07junk");
        assert_eq!(problem(&id, &bad), "unknown format byte 0x07");
        let (id, bad) = stored(br#"{"time":"yesterday"}"#);
        assert!(problem(&id, &bad).starts_with("bad time"));
    }

    #[test]
    fn ids_are_64_lowercase_hex() {
        assert!(is_valid_id(&"a1".repeat(32)));
        for bad in [
            "",
            "../config",
            &"A1".repeat(32),
            &"a1".repeat(31),
            &format!("{}/x", "a".repeat(62)),
        ] {
            assert!(!is_valid_id(bad), "{bad}");
        }
    }
}
