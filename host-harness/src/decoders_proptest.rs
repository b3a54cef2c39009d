//! Property tests of every decoder of outside input: whatever the bytes,
//! none panics, none returns more than its bounds allow, and none echoes a
//! secret. `make test` runs them with proptest's default budget (256 cases
//! each); `make fuzz` raises `PROPTEST_CASES`.

use proptest::prelude::*;
use sha2::{Digest, Sha256};

use crate::evidence::pod_list;
use crate::limits;
use crate::oci::{OciReference, wasm_layer};
use crate::repo::backend::parse_listing;
use crate::repo::crypto::Key;
use crate::repo::{keys, lockfile};
use crate::request::RecordedRequest;
use crate::watch::config::WatchConfig;
use crate::watch::repository::Defaults;

fn key() -> Key {
    Key::new([1; 32], [2; 16], [3; 16])
}

/// Lock JSON shaped like restic's, each field present or not, with hostile
/// values where a value can be hostile.
fn lock_json() -> impl Strategy<Value = String> {
    let text = prop_oneof![
        "[ -~]{0,20}",
        "\\PC{0,300}",
        Just("\n\u{1b}[2J\u{202e}".to_owned())
    ];
    (
        proptest::option::of(prop_oneof![
            Just("2026-11-30T12:00:00Z".to_owned()),
            "[0-9T:.Z+-]{0,40}"
        ]),
        proptest::option::of(any::<bool>()),
        proptest::option::of(text.clone()),
        proptest::option::of(text),
        proptest::option::of(any::<i64>()),
        proptest::option::of(prop_oneof![
            Just("tree"),
            Just("paths"),
            Just("kdf"),
            Just("x")
        ]),
    )
        .prop_map(|(time, exclusive, hostname, username, pid, extra)| {
            let mut fields = Vec::new();
            if let Some(t) = time {
                fields.push(format!("\"time\":{}", serde_json::json!(t)));
            }
            if let Some(e) = exclusive {
                fields.push(format!("\"exclusive\":{e}"));
            }
            if let Some(h) = hostname {
                fields.push(format!("\"hostname\":{}", serde_json::json!(h)));
            }
            if let Some(u) = username {
                fields.push(format!("\"username\":{}", serde_json::json!(u)));
            }
            if let Some(p) = pid {
                fields.push(format!("\"pid\":{p}"));
            }
            if let Some(name) = extra {
                fields.push(format!("\"{name}\":1"));
            }
            format!("{{{}}}", fields.join(","))
        })
}

proptest! {
    #[test]
    fn lock_json_is_accepted_only_whole_and_bounded(json in lock_json()) {
        let id = "a".repeat(64);
        if let Ok(lock) = lockfile::parse(&id, json.as_bytes()) {
            for field in ["\"time\"", "\"exclusive\"", "\"hostname\"", "\"username\"", "\"pid\""] {
                prop_assert!(json.contains(field), "accepted without {field}: {json}");
            }
            prop_assert!(!json.contains("\"tree\"") && !json.contains("\"kdf\""));
            prop_assert!(lock.hostname.len() <= limits::LOCK_NAME_FIELD);
            prop_assert!(lock.username.len() <= limits::LOCK_NAME_FIELD);
        }
    }

    #[test]
    fn lock_files_of_any_bytes_decode_or_are_named_unreadable(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let named = hex::encode(Sha256::digest(&bytes));
        let _ = lockfile::decode(&named, &bytes, &key());
        let _ = lockfile::parse(&named, &bytes);
    }

    #[test]
    fn sealed_plaintexts_and_zstd_frames_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        format in prop_oneof![Just(None), Just(Some(2u8)), Just(Some(b'{')), any::<u8>().prop_map(Some)],
    ) {
        let mut plaintext: Vec<u8> = format.into_iter().collect();
        plaintext.extend(&body);
        let stored = key().seal(&plaintext, [9; 16]);
        let id = hex::encode(Sha256::digest(&stored));
        if let Err(problem) = lockfile::decode(&id, &stored, &key()) {
            prop_assert!(problem.to_string().len() < 1000, "{problem}");
        }
    }

    #[test]
    fn encrypted_blobs_of_any_bytes_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        prop_assert!(key().open(&bytes).is_err());
    }

    #[test]
    fn key_files_never_cost_more_than_the_bound(
        log_n in 1u32..40,
        r in 0u32..100,
        p in 0u32..100,
        salt in "[A-Za-z0-9+/=]{0,12}",
        data in "[A-Za-z0-9+/=]{0,12}",
    ) {
        let n = 1u64 << log_n;
        let text = format!(r#"{{"kdf":"scrypt","N":{n},"r":{r},"p":{p},"salt":"{salt}","data":"{data}"}}"#);
        let work = n * u64::from(r) * u64::from(p);
        // Only cheap keys are allowed to run scrypt in a test.
        prop_assume!(work > limits::SCRYPT_WORK_PER_KEY || work <= 1 << 12);
        let result = keys::open(text.as_bytes(), b"pw");
        prop_assert!(result.is_err());
        if work > limits::SCRYPT_WORK_PER_KEY {
            let err = result.err().map(|e| e.to_string()).unwrap_or_default();
            prop_assert!(err.contains("scrypt") || err.contains("power of two"), "{err}");
        }
    }

    #[test]
    fn key_files_of_any_bytes_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        prop_assert!(keys::open(&bytes, b"pw").is_err());
    }

    #[test]
    fn rest_listings_keep_only_ids(body in prop_oneof![
        "\\PC{0,200}",
        proptest::collection::vec("[0-9a-f]{60,66}|\\.\\./config|", 0..20)
            .prop_map(|names| serde_json::json!(names).to_string()),
        proptest::collection::vec(("[0-9a-f]{63,65}", any::<u64>()), 0..20)
            .prop_map(|e| serde_json::json!(e.into_iter().map(|(n, s)| serde_json::json!({"name": n, "size": s})).collect::<Vec<_>>()).to_string()),
    ], v2 in any::<bool>()) {
        if let Ok(files) = parse_listing(body.as_bytes(), v2, "locks/") {
            prop_assert!(files.iter().all(|f| lockfile::is_valid_id(&f.name)));
        }
    }

    #[test]
    fn oci_manifests_of_any_shape_never_panic(body in prop_oneof![
        "\\PC{0,300}",
        (any::<i64>(), "[a-z/.+]{0,40}").prop_map(|(size, media)| format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"application/vnd.wasm.config.v0+json","digest":"sha256:{d}","size":2}},"layers":[{{"mediaType":"{media}","digest":"sha256:{d}","size":{size}}}]}}"#,
            d = "0".repeat(64)
        )),
    ]) {
        let reference = OciReference::parse("oci://127.0.0.1:5000/p:1")
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Ok(layer) = wasm_layer(&reference, body.as_bytes()) {
            prop_assert!(u64::try_from(layer.size).is_ok_and(|s| s <= limits::POLICY));
        }
    }

    #[test]
    fn watch_configs_never_quote_a_secret(junk in "\\PC{0,40}", cut in 0usize..200) {
        let text = format!(
            "[[repository]]\nname = \"a\"\nrepository = \"/r\"\npassword_command = \"echo SECRET-MARKER\"\n{junk}\n"
        );
        let mut end = cut.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if let Err(e) = WatchConfig::parse(&text[..end], &Defaults::default()) {
            prop_assert!(!e.to_string().contains("SECRET-MARKER"), "{e}");
        }
    }

    #[test]
    fn recorded_requests_and_inventories_never_panic(text in "\\PC{0,300}") {
        let _ = RecordedRequest::from_json(&text).map(RecordedRequest::prepare);
        let _ = pod_list::parse(&text);
    }

    #[test]
    fn escaped_text_holds_no_control_character(text in "\\PC*|[\\x00-\\x1f\\x7f\u{202a}-\u{202e}a-z]{0,40}") {
        let escaped = crate::text::escape(&text);
        let bidi = '\u{202a}'..='\u{202e}';
        let clean = !escaped.chars().any(|c| c.is_control() || bidi.contains(&c));
        prop_assert!(clean, "{}", escaped);
    }

    #[test]
    fn durations_parse_as_go_does(whole in 0u64..100_000, frac in proptest::option::of("[0-9]{1,12}"), unit in 0usize..6) {
        let (name, scale) = [("ns", 1u128), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000)][unit];
        let text = match &frac { Some(f) => format!("{whole}.{f}{name}"), None => format!("{whole}{name}") };
        // Go: whole·scale plus the fraction's value in units, truncated to ns.
        let mut want = u128::from(whole) * scale;
        if let Some(f) = &frac {
            let digits = u32::try_from(f.len()).unwrap_or(u32::MAX);
            let value: u128 = f.parse().unwrap_or(0);
            want += value * scale / 10u128.pow(digits);
        }
        prop_assert_eq!(lockwarden_duration::parse(&text).map(i128::from), i64::try_from(want).ok().map(i128::from));
    }
}
