//! What a tenant can point lockwarden at. A discovered repository's location
//! and the variables that name a host come from an object any tenant may
//! create, so they are taken only in the plain forms restic is handed from
//! an operator's object: a host a reader sees as it is reached, restic's own
//! paths under it, nothing that moves a request elsewhere (a query or a
//! fragment swallows the paths lockwarden appends; `user@` tricks, encoded
//! characters, numeric host shorthands and `..` segments make the host or
//! path differ from what a reader sees). Everything else is refused before
//! any request is made. The rules are documented in docs/kubernetes.md,
//! "What a tenant can point lockwarden at".

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Which rule a discovered location or one of its variables breaks, never
/// quoting either (the location may hold a password).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LocationRefused {
    /// The location itself breaks a rule, said as what it has.
    #[error("its repository location {0}")]
    Location(&'static str),
    /// A variable that names a host (or goes into one) is not plain.
    #[error("its {name} is not {what}")]
    Variable {
        /// The variable.
        name: &'static str,
        /// What it must be.
        what: &'static str,
    },
}

/// Whether `location`, with the storage `variables` of its object, meets
/// the rules; `Err` says which it breaks, never quoting either (the
/// location may hold a password). The scheme was checked before
/// (`operators::credentials`): only `s3`, `azure`, `gs` and `rest` reach here.
pub(super) fn check(
    location: &str,
    variables: &BTreeMap<String, String>,
) -> Result<(), LocationRefused> {
    checked(location).map_err(LocationRefused::Location)?;
    hosts_in(variables)
}

/// The rules of the location itself, each failure said as what it has.
fn checked(location: &str) -> Result<(), &'static str> {
    if !location.chars().all(|c| c.is_ascii_graphic()) {
        return Err("holds a space, a control character or a non-ASCII character");
    }
    if location.contains('\\') {
        return Err("holds a `\\`, which some parsers read as `/`");
    }
    if location.contains(['?', '#']) {
        return Err("has a query (`?`) or a fragment (`#`), which would replace restic's paths");
    }
    let (scheme, rest) = location.split_once(':').unwrap_or((location, ""));
    match scheme {
        "rest" => rest_url(rest),
        "s3" => s3(rest),
        "azure" | "gs" => {
            let (bucket, path) = rest.split_once(':').ok_or("has no bucket:/path")?;
            bucket_name(bucket)?;
            path_segments(path)
        }
        _ => Err("is on a scheme discovery does not read"),
    }
}

/// `http(s)://[user[:password]@]host[:port][/path]`: restic's own user
/// information (the rest-server's account, sent to that host alone) is
/// taken, once, with `@` in it percent-encoded.
fn rest_url(url: &str) -> Result<(), &'static str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("is not rest:http(s)://host/path")?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let endpoint = match authority.split_once('@') {
        Some((userinfo, endpoint)) => {
            if endpoint.contains('@') {
                return Err("has more than one `@` before its path (write an `@` as %40)");
            }
            user_information(userinfo)?;
            endpoint
        }
        None => authority,
    };
    host_and_port(endpoint)?;
    path_segments(path)
}

/// `s3:host[:port]/bucket/path`, `s3:http(s)://...`, `s3://...`: no user
/// information (the keys come from the object's Secret).
fn s3(rest: &str) -> Result<(), &'static str> {
    let rest = ["http://", "https://", "//"]
        .iter()
        .find_map(|prefix| rest.strip_prefix(prefix))
        .unwrap_or(rest);
    if rest.contains('@') {
        return Err("has an `@`; an s3: location names no user");
    }
    let (endpoint, path) = rest.split_once('/').unwrap_or((rest, ""));
    host_and_port(endpoint)?;
    let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
    bucket_name(bucket)?;
    path_segments(prefix)
}

/// A user and an optional password of URL characters, escapes valid.
fn user_information(userinfo: &str) -> Result<(), &'static str> {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=%:".contains(c);
    if user.is_empty() || !userinfo.chars().all(allowed) {
        return Err("has user information that is not a plain user[:password]");
    }
    decoded(user)?;
    decoded(password).map(drop)
}

/// `host[:port]` or `[ipv6][:port]`.
fn host_and_port(endpoint: &str) -> Result<(), &'static str> {
    let (host, port) = match endpoint.strip_prefix('[') {
        Some(literal) => {
            let (address, after) = literal.split_once(']').ok_or("has an unclosed `[`")?;
            address
                .parse::<Ipv6Addr>()
                .map_err(|_| "has a bracketed host that is not an IPv6 address")?;
            let port = match after {
                "" => None,
                after => Some(after.strip_prefix(':').ok_or("has text after its host")?),
            };
            (None, port)
        }
        None => match endpoint.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(endpoint), None),
        },
    };
    if let Some(port) = port {
        let digits =
            !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
        if !digits || !port.parse::<u16>().is_ok_and(|p| p > 0) {
            return Err("has a port that is not a number from 1 to 65535");
        }
    }
    host.map_or(Ok(()), host_name)
}

/// A DNS name (letters, digits and `-` in dot-separated labels, an optional
/// final dot) or a dotted-quad IPv4 address as it is written canonically:
/// a name whose last label starts with a digit is taken for an address,
/// as URL parsers do, and `127.1`, `0x7f.1`, `2130706433` or `010.0.0.1`
/// (which resolvers read as addresses a reader would not guess) are refused.
fn host_name(host: &str) -> Result<(), &'static str> {
    let name = host.strip_suffix('.').unwrap_or(host);
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label) {
        return Err("has a host that is not a DNS name or an IP address");
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    if last.starts_with(|c: char| c.is_ascii_digit())
        && name.parse::<Ipv4Addr>().map(|a| a.to_string()).as_deref() != Ok(name)
    {
        return Err("has a numeric host that is not a plain dotted-quad IPv4 address");
    }
    Ok(())
}

/// A bucket or container name: letters, digits, `.`, `-` and `_`.
fn bucket_name(bucket: &str) -> Result<(), &'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if bucket.is_empty() || !bucket.chars().all(allowed) || bucket == "." || bucket == ".." {
        return Err("has a bucket name that is not letters, digits, `.`, `-` and `_`");
    }
    Ok(())
}

/// A path of URL path characters whose segments, decoded, are never `.` or
/// `..` and hold no `/`, `\` or control character.
fn path_segments(path: &str) -> Result<(), &'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@%/".contains(c);
    if !path.chars().all(allowed) {
        return Err("has a path with characters a URL path does not hold");
    }
    for segment in path.split('/') {
        let segment = decoded(segment)?;
        if segment == "." || segment == ".." {
            return Err("has a `.` or `..` path segment (plain or percent-encoded)");
        }
        if segment
            .chars()
            .any(|c| matches!(c, '/' | '\\') || c.is_control())
        {
            return Err("has a percent-encoded `/`, `\\` or control character in its path");
        }
    }
    Ok(())
}

/// `text` with its `%XX` escapes decoded; every `%` must start one.
fn decoded(text: &str) -> Result<String, &'static str> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        let byte = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or("has a `%` that starts no %XX escape")?;
        out.push(byte);
        i += 3;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The variables that name a host or go into one: Azure's account and
/// endpoint suffix (`https://<account>.blob.<suffix>`), and the AWS region
/// (signed into every request).
fn hosts_in(variables: &BTreeMap<String, String>) -> Result<(), LocationRefused> {
    let bad = |name, what| Err(LocationRefused::Variable { name, what });
    if let Some(account) = variables.get("AZURE_ACCOUNT_NAME") {
        let plain = account
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !plain || !(3..=24).contains(&account.len()) {
            return bad("AZURE_ACCOUNT_NAME", "3 to 24 lowercase letters and digits");
        }
    }
    if let Some(suffix) = variables.get("AZURE_ENDPOINT_SUFFIX")
        && host_name(suffix).is_err()
    {
        return bad("AZURE_ENDPOINT_SUFFIX", "a DNS name");
    }
    for name in ["AWS_DEFAULT_REGION", "AWS_REGION"] {
        let Some(region) = variables.get(name) else {
            continue;
        };
        let plain = region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !plain || region.len() > 64 {
            return bad(name, "a region name (letters, digits, `-` and `_`)");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(location: &str) -> String {
        check(location, &BTreeMap::new())
            .expect_err(location)
            .to_string()
    }

    #[test]
    fn operators_locations_are_taken() {
        for location in [
            "rest:http://rest-server.backup.svc:8000/tenant-a",
            "rest:https://alice:p%40ss%2Fw0rd@backup.example/repos/a/",
            "rest:http://10.0.0.7:8000/",
            "rest:http://[fd00::7]:8000/r",
            "rest:http://[::1]/r",
            "rest:http://svc.cluster.local./r,key=v",
            "s3:s3.eu-west-1.amazonaws.com/bucket/restic/ns",
            "s3:http://minio.velero.svc:9000/velero/restic/default",
            "s3:https://127.0.0.1:9000/b",
            "s3://ceph-rgw:7480/b/p",
            "azure:backups:/cluster/one",
            "azure:backups:",
            "gs:bucket:/a/b/",
        ] {
            assert_eq!(check(location, &BTreeMap::new()), Ok(()), "{location}");
        }
    }

    /// Each refusal says its rule and never quotes the location.
    #[test]
    fn locations_that_aim_elsewhere_are_refused() {
        let cases = [
            ("rest:http://127.0.0.1:9/secret/path?x=1", "query"),
            ("rest:http://svc/a#/frag", "fragment"),
            ("s3:http://minio:9000/b/p?x=/", "query"),
            (
                "rest:http://u:p@internal@evil.example/",
                "more than one `@`",
            ),
            ("rest:http://@evil.example/", "user information"),
            ("rest:http://u:p%zz@h/", "%XX"),
            ("s3:http://key:secret@minio/b", "`@`"),
            ("rest:ftp://h/r", "http(s)"),
            ("rest:file:///etc", "http(s)"),
            ("s3:ftp://h/b", "port"),
            ("rest:http://h:0/r", "port"),
            ("rest:http://h:65536/r", "port"),
            ("rest:http://h:+80/r", "port"),
            ("rest:http://h:/r", "port"),
            ("rest:http://127.1/r", "dotted-quad"),
            ("rest:http://2130706433/r", "dotted-quad"),
            ("rest:http://0x7f.0.0.1/r", "dotted-quad"),
            ("rest:http://010.0.0.1/r", "dotted-quad"),
            ("rest:http://%31%32%37.0.0.1/r", "DNS name"),
            ("rest:http://h_1.svc/r", "DNS name"),
            ("rest:http://[fe80::1%25eth0]/r", "IPv6"),
            ("rest:http://évil.example/r", "non-ASCII"),
            ("rest:http://h/a b", "space"),
            ("rest:http://h/r\n", "control"),
            ("rest:http://h/\u{202e}r", "non-ASCII"),
            ("rest:http://h\\@evil/r", "`\\`"),
            ("rest:http://h/a/../admin", "`..`"),
            ("rest:http://h/a/%2e%2E/admin", "`..`"),
            ("rest:http://h/a/%2E/b", "`.`"),
            ("rest:http://h/a%2fb", "`/`"),
            ("rest:http://h/a%00b", "control"),
            ("rest:http://h/a%5c..", "`\\`"),
            ("rest:http://h/a\"b", "URL path"),
            ("s3:minio/../b", "bucket"),
            ("s3:minio/b/../../x", "`..`"),
            ("azure:c:/a/%2e%2e", "`..`"),
            ("gs:b#:/x", "fragment"),
        ];
        for (location, rule) in cases {
            let why = refused(location);
            assert!(why.contains(rule), "{location}: {why}");
            assert!(why.starts_with("its repository location "), "{why}");
            for secret in ["secret", "evil", "internal", "admin"] {
                assert!(!why.contains(secret), "{location}: {why}");
            }
        }
    }

    #[test]
    fn each_refusal_says_its_rule_word_for_word() {
        assert_eq!(
            refused("rest:http://h/a b"),
            "its repository location holds a space, a control character or a non-ASCII character"
        );
        let region = BTreeMap::from([("AWS_REGION".to_owned(), "a b".to_owned())]);
        assert_eq!(
            check("s3:minio/b", &region).map_err(|e| e.to_string()),
            Err("its AWS_REGION is not a region name (letters, digits, `-` and `_`)".to_owned())
        );
    }

    #[test]
    fn variables_that_name_a_host_are_plain() {
        let with = |name: &str, value: &str| {
            check(
                "azure:c:/p",
                &BTreeMap::from([(name.to_owned(), value.to_owned())]),
            )
        };
        assert_eq!(with("AZURE_ACCOUNT_NAME", "devstoreaccount1"), Ok(()));
        assert_eq!(
            with("AZURE_ENDPOINT_SUFFIX", "core.chinacloudapi.cn"),
            Ok(())
        );
        assert_eq!(with("AWS_DEFAULT_REGION", "eu-west-1"), Ok(()));
        for (name, value) in [
            ("AZURE_ACCOUNT_NAME", "evil.example/x"),
            ("AZURE_ACCOUNT_NAME", "ab"),
            ("AZURE_ENDPOINT_SUFFIX", "evil.example/path?"),
            ("AZURE_ENDPOINT_SUFFIX", "evil.example:444"),
            ("AWS_REGION", "us-east-1\r\nX-Injected: 1"),
        ] {
            let why = with(name, value).expect_err(value);
            assert!(
                matches!(why, LocationRefused::Variable { name: said, .. } if said == name),
                "{why}"
            );
            let why = why.to_string();
            assert!(why.contains(name) && !why.contains("evil"), "{why}");
        }
    }
}
