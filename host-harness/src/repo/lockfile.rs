//! Lock files (`locks/<id>`): encrypted JSON, raw or zstd-compressed, named by
//! the SHA-256 of the stored bytes.

use serde::Deserialize;
use serde::de::IgnoredAny;
use sha2::{Digest, Sha256};

use super::crypto::Key;
use crate::contract::Lock;
use crate::limits;
use crate::time::parse_rfc3339;

/// A lock file's JSON. restic always writes `time`, `exclusive`, `hostname`,
/// `username` and `pid`, so each is required: no other restic file (a
/// snapshot has `time` and `hostname` too) passes for a lock. `uid`/`gid` are
/// omitted by restic when 0; other unknown fields are ignored.
#[derive(Debug, Deserialize)]
struct LockJson {
    time: String,
    exclusive: bool,
    hostname: String,
    username: String,
    pid: i64,
    #[serde(default)]
    uid: u32,
    #[serde(default)]
    gid: u32,
}

/// The fields that mark another kind of restic file, read from any JSON
/// object whatever else it holds.
#[derive(Debug, Default, Deserialize)]
struct Marks {
    #[serde(default)]
    tree: Option<IgnoredAny>,
    #[serde(default)]
    paths: Option<IgnoredAny>,
    #[serde(default)]
    packs: Option<IgnoredAny>,
    #[serde(default)]
    kdf: Option<IgnoredAny>,
    #[serde(default)]
    salt: Option<IgnoredAny>,
    #[serde(default)]
    chunker_polynomial: Option<IgnoredAny>,
}

impl Marks {
    /// What other restic file JSON with these fields is, if it is one.
    fn other_file(json: &[u8]) -> Option<&'static str> {
        let marks: Marks = serde_json::from_slice(json).ok()?;
        if marks.kdf.is_some() || marks.salt.is_some() {
            Some("a restic key file")
        } else if marks.tree.is_some() || marks.paths.is_some() {
            Some("a restic snapshot")
        } else if marks.packs.is_some() {
            Some("a restic index file")
        } else if marks.chunker_polynomial.is_some() {
            Some("a restic config")
        } else {
            None
        }
    }
}

/// Why a file under `locks/` is not a lock.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// It is another kind of restic file (named in a phrase, with where
    /// restic keeps it): misplaced, not corrupt.
    #[error("{0}")]
    Misplaced(String),
    /// It cannot be read as a lock.
    #[error(transparent)]
    Unreadable(#[from] Unreadable),
}

/// What makes a file under `locks/` unreadable as a lock, each shown as one
/// phrase.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// The file holds no bytes.
    #[error("empty file")]
    Empty,
    /// The SHA-256 of the stored bytes is not the file's name.
    #[error("content does not match its name (SHA-256 is {digest_start}...), damaged or renamed")]
    Renamed {
        /// The first 8 hex digits of the stored bytes' SHA-256.
        digest_start: String,
    },
    /// The MAC does not match, or the file is too short to hold one.
    #[error("cannot decrypt: {0}")]
    Decrypt(super::crypto::OpenError),
    /// The plaintext is empty.
    #[error("decrypts to nothing")]
    Nothing,
    /// The plaintext starts with neither JSON nor the zstd mark.
    #[error("unknown format byte 0x{0:02x}")]
    UnknownFormat(u8),
    /// The zstd frame is damaged.
    #[error("cannot decompress: {0}")]
    Decompress(ruzstd::decoding::errors::FrameDecoderError),
    /// The frame decodes past [`limits::LOCK_JSON`].
    #[error(
        "decompresses to more than the {} bytes a lock can hold",
        limits::LOCK_JSON
    )]
    Bomb,
    /// Bytes follow the one zstd frame restic writes.
    #[error("{0} bytes follow the zstd frame")]
    Trailing(usize),
    /// The JSON is no lock's.
    #[error("not a lock: {0}")]
    NotALock(serde_json::Error),
    /// A name field is longer than [`limits::LOCK_NAME_FIELD`].
    #[error(
        "its {field} is {len} bytes, longer than the {} a lock can hold",
        limits::LOCK_NAME_FIELD
    )]
    LongName {
        /// `hostname` or `username`.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// The time is no RFC 3339 time.
    #[error("bad time: `{}` is not an RFC 3339 time", crate::text::escape(.start))]
    BadTime {
        /// Its first 40 characters.
        start: String,
    },
}

/// `what` found under `locks/`, as a [`DecodeError::Misplaced`] phrase.
fn misplaced(what: &str) -> DecodeError {
    DecodeError::Misplaced(format!("{what}, not a lock (misplaced, not corrupt)"))
}

/// True when `id` can name a restic file: 64 lowercase hex digits. Checked
/// before any id becomes part of a path or URL.
pub fn is_valid_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The first 8 characters of an id, as restic shows them.
pub fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// Decodes the stored bytes of lock `id`, or says in one phrase what is wrong
/// with them, or what other restic file they are (a key file is plain
/// JSON; a snapshot, an index or the config decrypt with the master key).
pub fn decode(id: &str, stored: &[u8], key: &Key) -> Result<Lock, DecodeError> {
    if stored.is_empty() {
        return Err(Unreadable::Empty.into());
    }
    if let Some(what) = Marks::other_file(stored) {
        return Err(misplaced(what));
    }
    let digest = hex::encode(Sha256::digest(stored));
    if digest != id {
        return Err(Unreadable::Renamed {
            digest_start: digest[..8].to_owned(),
        }
        .into());
    }
    let plaintext = key.open(stored).map_err(Unreadable::Decrypt)?;
    let json = decompress(&plaintext)?;
    parse(id, &json)
}

/// `plaintext` (lock JSON, raw or `0x02` + zstd) sealed with `iv` as restic
/// stores a lock file, with its id (the SHA-256 of the stored bytes). The IV
/// must never repeat under one key: [`super::crypto::random_bytes`] for a lock
/// anyone relies on.
pub fn seal(key: &Key, plaintext: &[u8], iv: [u8; 16]) -> (String, Vec<u8>) {
    let stored = key.seal(plaintext, iv);
    (hex::encode(Sha256::digest(&stored)), stored)
}

/// The JSON restic writes for `lock` (its id and storage facts aside):
/// `uid` and `gid` left out when 0, as restic leaves them out. Raw JSON, which
/// restic reads in repositories of either version.
pub fn to_json(lock: &Lock) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Written<'a> {
        time: String,
        exclusive: bool,
        hostname: &'a str,
        username: &'a str,
        pid: i64,
        #[serde(skip_serializing_if = "is_zero")]
        uid: u32,
        #[serde(skip_serializing_if = "is_zero")]
        gid: u32,
    }
    fn is_zero(n: &u32) -> bool {
        *n == 0
    }
    let written = Written {
        time: crate::time::format_rfc3339(lock.time),
        exclusive: lock.exclusive,
        hostname: &lock.hostname,
        username: &lock.username,
        pid: lock.pid,
        uid: lock.uid,
        gid: lock.gid,
    };
    serde_json::to_vec(&written).unwrap_or_default()
}

/// Version 2 repositories compress: `0x02` then a zstd frame. `{` or `[`
/// starts raw JSON.
fn decompress(plaintext: &[u8]) -> Result<Vec<u8>, Unreadable> {
    match plaintext.first() {
        Some(b'{' | b'[') => Ok(plaintext.to_vec()),
        Some(2) => decompress_zstd(&plaintext[1..]),
        Some(&other) => Err(Unreadable::UnknownFormat(other)),
        None => Err(Unreadable::Nothing),
    }
}

/// One zstd frame and nothing after it, decoded to at most
/// [`crate::limits::LOCK_JSON`] bytes. The decoder is told to stop there: a frame may
/// declare a window of up to 128 MiB (restic's own declare 26 MiB for 200
/// bytes of JSON), and a reader on top of it would see no output before a
/// window's worth was decoded, so a 4 KB bomb would cost 128 MiB per lock.
fn decompress_zstd(mut frame: &[u8]) -> Result<Vec<u8>, Unreadable> {
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    let mut decoder = FrameDecoder::new();
    decoder.init(&mut frame).map_err(Unreadable::Decompress)?;
    let finished = decoder
        .decode_blocks(
            &mut frame,
            BlockDecodingStrategy::UptoBytes(crate::limits::LOCK_JSON + 1),
        )
        .map_err(Unreadable::Decompress)?;
    let json = decoder.collect().unwrap_or_default();
    if !finished || json.len() > crate::limits::LOCK_JSON {
        return Err(Unreadable::Bomb);
    }
    if !frame.is_empty() {
        // restic reads every frame; one is all it writes.
        return Err(Unreadable::Trailing(frame.len()));
    }
    Ok(json)
}

/// Parses decoded lock JSON, strictly: every field restic writes, no field
/// of another restic file, names within [`limits::LOCK_NAME_FIELD`] bytes.
pub fn parse(id: &str, json: &[u8]) -> Result<Lock, DecodeError> {
    if let Some(what) = Marks::other_file(json) {
        return Err(misplaced(what));
    }
    Ok(parse_lock(id, json)?)
}

/// [`parse`] of JSON that is no other restic file.
fn parse_lock(id: &str, json: &[u8]) -> Result<Lock, Unreadable> {
    let lock: LockJson = serde_json::from_slice(json).map_err(Unreadable::NotALock)?;
    for (field, value) in [("hostname", &lock.hostname), ("username", &lock.username)] {
        if value.len() > limits::LOCK_NAME_FIELD {
            return Err(Unreadable::LongName {
                field,
                len: value.len(),
            });
        }
    }
    let time = parse_rfc3339(&lock.time).map_err(|_| Unreadable::BadTime {
        start: lock.time.chars().take(40).collect(),
    })?;
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
        stored_at: None,
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
    fn other_restic_files_and_oversized_names_are_not_locks() {
        let id = "a".repeat(64);
        let snapshot = br#"{"time":"2020-01-02T03:04:05Z","tree":"ab","paths":["/d"],"hostname":"vm","username":"root","uid":0,"gid":0}"#;
        let misplaced = |json: &[u8]| match parse(&id, json) {
            Err(DecodeError::Misplaced(what)) => what,
            other => panic!("not misplaced: {other:?}"),
        };
        assert!(misplaced(snapshot).starts_with("a restic snapshot"));
        let disguised = br#"{"time":"2020-01-02T03:04:05Z","exclusive":false,"hostname":"vm","username":"root","pid":1,"tree":"ab"}"#;
        assert!(misplaced(disguised).starts_with("a restic snapshot"));
        let key = br#"{"created":"2020-01-02T03:04:05Z","username":"u","hostname":"h","kdf":"scrypt","N":32768,"r":8,"p":4,"salt":"","data":""}"#;
        assert!(misplaced(key).starts_with("a restic key file"));
        assert!(misplaced(br#"{"packs":[],"supersedes":[]}"#).starts_with("a restic index"));
        assert!(
            misplaced(br#"{"version":2,"id":"x","chunker_polynomial":"y"}"#).contains("config")
        );
        // A key file is stored as plain JSON: misplaced before any hash or
        // MAC check.
        let key_id = hex::encode(Sha256::digest(key));
        assert!(matches!(
            decode(&key_id, key, &super::tests::key()),
            Err(DecodeError::Misplaced(_))
        ));
        // Encrypted with the master key: an index or a snapshot decrypts.
        let (index_id, index) = stored(br#"{"packs":[{"id":"ab","blobs":[]}]}"#);
        assert!(matches!(
            decode(&index_id, &index, &super::tests::key()),
            Err(DecodeError::Misplaced(_))
        ));
        let long = format!(
            r#"{{"time":"2020-01-02T03:04:05Z","exclusive":false,"hostname":"{}","username":"root","pid":1}}"#,
            "h".repeat(256)
        );
        let err = parse(&id, long.as_bytes())
            .expect_err("long hostname")
            .to_string();
        assert!(err.contains("hostname is 256 bytes"), "{err}");
        let time =
            br#"{"time":"\nremoved","exclusive":false,"hostname":"h","username":"u","pid":1}"#;
        let err = parse(&id, time).expect_err("bad time").to_string();
        assert!(!err.contains('\n'), "{err}");
    }

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

    /// A zstd frame by hand: a 128 MiB window, then `blocks` RLE blocks of
    /// 128 KiB of spaces (4 bytes each), the last one marked last.
    fn rle_bomb(blocks: usize) -> Vec<u8> {
        let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88];
        for i in 0..blocks {
            let last = u32::from(i + 1 == blocks);
            let header = last | (1 << 1) | ((128 * 1024) << 3);
            frame.extend(&header.to_le_bytes()[..3]);
            frame.push(b' ');
        }
        frame
    }

    /// A small frame that inflates past what a lock can hold (a
    /// decompression bomb) is refused once 64 KiB are out, without decoding
    /// the rest; a cut frame, and bytes after the frame, are refused too.
    #[test]
    fn zstd_frames_are_bounded_whole_and_alone() {
        let mut bomb = vec![2];
        bomb.extend(rle_bomb(1100)); // 137 MiB from 4.4 KB
        let (id, stored_bomb) = stored(&bomb);
        let err = decode(&id, &stored_bomb, &key())
            .expect_err("refused")
            .to_string();
        assert!(err.contains("more than the 65536 bytes"), "{err}");

        let mut small = vec![2];
        small.extend(rle_bomb(1)); // 128 KiB of spaces: over the bound too
        let (id, stored_small) = stored(&small);
        assert!(decode(&id, &stored_small, &key()).is_err());

        let frame = zstd::bulk::compress(JSON, 3).expect("compress");
        let mut cut = vec![2];
        cut.extend(&frame[..frame.len() - 4]);
        let (id, stored_cut) = stored(&cut);
        let err = decode(&id, &stored_cut, &key())
            .expect_err("refused")
            .to_string();
        assert!(err.contains("cannot decompress"), "{err}");

        let mut two = vec![2];
        two.extend(&frame);
        two.extend(zstd::bulk::compress(b"garbage", 3).expect("compress"));
        let (id, stored_two) = stored(&two);
        let err = decode(&id, &stored_two, &key())
            .expect_err("refused")
            .to_string();
        assert!(err.contains("follow the zstd frame"), "{err}");
    }

    #[test]
    fn names_every_problem() {
        let (id, raw) = stored(JSON);
        let problem = |id: &str, bytes: &[u8]| {
            decode(id, bytes, &key())
                .expect_err("must fail")
                .to_string()
        };
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
        let (id, bad) = stored(
            br#"{"time":"yesterday","exclusive":false,"hostname":"h","username":"u","pid":1}"#,
        );
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
