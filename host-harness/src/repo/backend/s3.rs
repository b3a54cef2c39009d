//! `s3:` repositories (AWS S3 and S3-compatible stores: MinIO, Ceph,
//! Wasabi, B2's S3 API), named and configured as restic names them.
//!
//! Credentials, in restic's order: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`; then the shared
//! credentials file (`AWS_SHARED_CREDENTIALS_FILE` or `~/.aws/credentials`,
//! profile `AWS_PROFILE` or `default`); then what AWS offers a workload
//! (web identity tokens as EKS gives pods, ECS task roles, instance
//! metadata); no other `AWS_*` variable is read. Region: `AWS_DEFAULT_REGION` (or `AWS_REGION`), else the one
//! an `s3.<region>.amazonaws.com` endpoint names, else `us-east-1`.

use std::path::PathBuf;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};

use super::cloud;
use super::{BackendError, Scheme, Target, Variables};
use crate::repo::backend::location_text::LocationError;

/// `s3:host/bucket/prefix`, `s3:https://host[:port]/bucket/prefix`,
/// `s3:http://...`, `s3://host/bucket/prefix`.
pub const SCHEME: Scheme = Scheme {
    name: "s3",
    redact: crate::repo::backend::location_text::redact_userinfo,
    parse: |location| S3Location::parse(location).map(|_| location.to_owned()),
    open: |target: &Target<'_>| {
        let location =
            S3Location::parse(target.location).map_err(|e| BackendError::Other(e.to_string()))?;
        cloud::tls_ready()?;
        let built = location.builder(target)?.build();
        cloud::open(
            SCHEME.name,
            built,
            &location.bucket,
            location.prefix,
            target,
        )
    },
    modifies: true,
};

/// An `s3:` location taken apart.
#[derive(Debug, PartialEq, Eq)]
struct S3Location {
    /// `host[:port]`.
    endpoint: String,
    /// Plain HTTP (an `s3:http://` location).
    http: bool,
    bucket: String,
    /// The repository's path in the bucket ([`cloud::clean_prefix`]).
    prefix: String,
}

impl S3Location {
    fn parse(location: &str) -> Result<S3Location, LocationError> {
        let invalid = |why: &str| LocationError::Invalid(format!("s3: {why}"));
        let (rest, http) = if let Some(url) = location.strip_prefix("s3:http://") {
            (url, true)
        } else if let Some(url) = location.strip_prefix("s3:https://") {
            (url, false)
        } else if let Some(rest) = location.strip_prefix("s3://") {
            (rest, false)
        } else if let Some(rest) = location.strip_prefix("s3:") {
            (rest, false)
        } else {
            return Err(invalid("not an s3: location"));
        };
        let (endpoint, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        if endpoint.is_empty() || endpoint.contains('@') {
            return Err(invalid(
                "the host is missing or holds user information; write s3:host/bucket/path and give credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            ));
        }
        if bucket.is_empty() {
            return Err(invalid("the bucket name is missing (s3:host/bucket/path)"));
        }
        let bad = |c: char| c.is_control() || c.is_whitespace() || matches!(c, '#' | '?');
        if endpoint.chars().any(bad) {
            return Err(invalid(
                "the host holds a space, `#`, `?` or control character",
            ));
        }
        cloud::check_bucket(bucket, "s3")?;
        Ok(S3Location {
            endpoint: endpoint.to_owned(),
            http,
            bucket: bucket.to_owned(),
            prefix: cloud::clean_prefix(prefix)?,
        })
    }

    /// The region an AWS endpoint names (`s3.eu-west-1.amazonaws.com`,
    /// `s3-eu-west-1.amazonaws.com`, `s3.dualstack.eu-west-1...`).
    fn region_of_endpoint(&self) -> Option<&str> {
        let host = self.endpoint.split(':').next()?;
        let head = host.strip_suffix(".amazonaws.com")?;
        let region = head
            .rsplit('.')
            .next()?
            .trim_start_matches("s3-")
            .trim_start_matches("s3");
        (!region.is_empty() && region != "dualstack").then_some(region)
    }

    fn is_aws(&self) -> bool {
        self.endpoint
            .split(':')
            .next()
            .is_some_and(|host| host.ends_with(".amazonaws.com"))
    }

    /// The client, configured from restic's variables and the location.
    fn builder(&self, target: &Target<'_>) -> Result<AmazonS3Builder, BackendError> {
        let from_env = |key: &str| target.variables.get(key);
        for variable in TOKEN_FILE_VARIABLES {
            if let Some(file) = from_env(variable) {
                cloud::check_credentials_file(std::path::Path::new(&file), variable)?;
            }
        }
        let mut builder = AmazonS3Builder::new();
        for (variable, key) in CREDENTIAL_VARIABLES {
            if let Some(value) = from_env(variable) {
                builder = builder.with_config(key, value);
            }
        }
        let shared = match from_env("AWS_ACCESS_KEY_ID") {
            Some(_) => None,
            None => shared_credentials(target.variables)?,
        };
        if let Some((id, secret, token)) = shared {
            builder = builder
                .with_access_key_id(id)
                .with_secret_access_key(secret);
            if let Some(token) = token {
                builder = builder.with_token(token);
            }
        }
        let region = from_env("AWS_DEFAULT_REGION")
            .or_else(|| from_env("AWS_REGION"))
            .or_else(|| self.region_of_endpoint().map(str::to_owned))
            .unwrap_or_else(|| "us-east-1".to_owned());
        // Like restic (minio-go), buckets on AWS are addressed by host name,
        // elsewhere (MinIO, Ceph, ...) by path.
        let scheme = if self.http { "http" } else { "https" };
        let endpoint = if self.is_aws() {
            format!("{scheme}://{}.{}", self.bucket, self.endpoint)
        } else {
            format!("{scheme}://{}", self.endpoint)
        };
        Ok(builder
            .with_config(AmazonS3ConfigKey::Endpoint, endpoint.clone())
            .with_config(AmazonS3ConfigKey::S3Endpoint, endpoint)
            .with_bucket_name(&self.bucket)
            .with_region(region)
            .with_virtual_hosted_style_request(self.is_aws())
            .with_allow_http(self.http)
            .with_client_options(cloud::client_options(target.timeout).with_allow_http(self.http))
            .with_retry(cloud::retry_config(target.timeout))
            .with_http_connector(cloud::http::Connector::of(target.variables))
            // One lock is deleted at a time: a plain `DELETE /key`, which
            // every S3-compatible store has, not DeleteObjects, whose answer
            // object_store trusts to name only the keys it was asked for
            // (a hostile one made it panic).
            .with_disable_bulk_delete(true))
    }
}

/// The variables of AWS's credential chain that are read, and nothing else
/// of `AWS_*` (an endpoint or signing setting meant for another tool must
/// not redirect lockwarden): static keys, then what a workload is given
/// (EKS web identity, ECS container credentials); instance metadata needs
/// no variable.
const CREDENTIAL_VARIABLES: [(&str, AmazonS3ConfigKey); 10] = [
    ("AWS_ACCESS_KEY_ID", AmazonS3ConfigKey::AccessKeyId),
    ("AWS_SECRET_ACCESS_KEY", AmazonS3ConfigKey::SecretAccessKey),
    ("AWS_SESSION_TOKEN", AmazonS3ConfigKey::Token),
    (
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        AmazonS3ConfigKey::WebIdentityTokenFile,
    ),
    ("AWS_ROLE_ARN", AmazonS3ConfigKey::RoleArn),
    ("AWS_ROLE_SESSION_NAME", AmazonS3ConfigKey::RoleSessionName),
    ("AWS_ENDPOINT_URL_STS", AmazonS3ConfigKey::StsEndpoint),
    (
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        AmazonS3ConfigKey::ContainerCredentialsRelativeUri,
    ),
    (
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        AmazonS3ConfigKey::ContainerCredentialsFullUri,
    ),
    (
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        AmazonS3ConfigKey::ContainerAuthorizationTokenFile,
    ),
];

/// The variables of [`CREDENTIAL_VARIABLES`] that name a file the client
/// reads itself, whenever it fetches credentials
/// ([`cloud::check_credentials_file`]).
const TOKEN_FILE_VARIABLES: [&str; 2] = [
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
];

/// The access key, secret and session token of the profile `AWS_PROFILE`
/// (or `default`) in the shared credentials file, if there is one.
fn shared_credentials(
    variables: &Variables,
) -> Result<Option<(String, String, Option<String>)>, BackendError> {
    let file = match variables.get("AWS_SHARED_CREDENTIALS_FILE") {
        Some(file) => PathBuf::from(file),
        // A prefixed repository names its own file, or has none.
        None if variables.is_prefixed() => return Ok(None),
        None => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".aws/credentials"),
            None => return Ok(None),
        },
    };
    let bytes = match crate::files::read_regular_file(&file, crate::limits::CREDENTIALS_FILE) {
        Ok(bytes) => bytes,
        Err(crate::files::ReadError::NotFound) => return Ok(None),
        Err(e) => {
            return Err(BackendError::Other(format!(
                "cannot read the AWS credentials file {}: {e}",
                crate::text::escape(&file.display().to_string())
            )));
        }
    };
    let profile = variables
        .get("AWS_PROFILE")
        .unwrap_or_else(|| "default".to_owned());
    Ok(profile_keys(&String::from_utf8_lossy(&bytes), &profile))
}

/// The keys of `[profile]` in an INI credentials file.
pub(crate) fn profile_keys(text: &str, profile: &str) -> Option<(String, String, Option<String>)> {
    let (mut id, mut secret, mut token) = (None, None, None);
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == profile;
            continue;
        }
        let Some((key, value)) = line.split_once('=').filter(|_| inside) else {
            continue;
        };
        let value = Some(value.trim().to_owned());
        match key.trim() {
            "aws_access_key_id" => id = value,
            "aws_secret_access_key" => secret = value,
            "aws_session_token" => token = value,
            _ => {}
        }
    }
    Some((id?, secret?, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> S3Location {
        S3Location::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn locations_are_read_as_restic_reads_them() {
        let aws = parsed("s3:s3.amazonaws.com/bucket/some/prefix/");
        assert_eq!(aws.endpoint, "s3.amazonaws.com");
        assert_eq!(aws.bucket, "bucket");
        assert_eq!(aws.prefix, "some/prefix");
        assert!(!aws.http && aws.is_aws());
        let minio = parsed("s3:http://127.0.0.1:9000/restic");
        assert_eq!(
            minio,
            S3Location {
                endpoint: "127.0.0.1:9000".into(),
                http: true,
                bucket: "restic".into(),
                prefix: String::new(),
            }
        );
        assert!(!parsed("s3:https://minio.example:9000/b/p").http);
        assert_eq!(parsed("s3://host/b/p").bucket, "b");
    }

    #[test]
    fn malformed_locations_are_refused_without_quoting_them() {
        for bad in [
            "s3:",
            "s3:host",
            "s3:host/",
            "s3:http://",
            "s3:http://key:secret@host/bucket",
            "s3:host/bu\u{1b}cket",
            // On AWS the bucket becomes part of the host name: a `#` there
            // sends the signed request (and the session token) to another
            // host, here evil.example.
            "s3:s3.amazonaws.com/evil.example#/repo",
            "s3:http://minio:9000/b?x=/repo",
            "s3:http://minio:9000#/b/repo",
        ] {
            let err = S3Location::parse(bad).expect_err(bad);
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }

    #[test]
    fn the_region_comes_from_an_aws_endpoint() {
        let region = |e: &str| {
            parsed(&format!("s3:{e}/b"))
                .region_of_endpoint()
                .map(str::to_owned)
        };
        assert_eq!(
            region("s3.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            region("s3-us-west-2.amazonaws.com").as_deref(),
            Some("us-west-2")
        );
        assert_eq!(region("s3.amazonaws.com"), None);
        assert_eq!(region("minio:9000"), None);
    }

    #[test]
    fn profiles_are_read_from_the_credentials_file() {
        let file = "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key=s1\n\n[work]\naws_access_key_id=AKIAWORK\naws_secret_access_key = s2\naws_session_token = t2\n";
        assert_eq!(
            profile_keys(file, "work"),
            Some(("AKIAWORK".into(), "s2".into(), Some("t2".into())))
        );
        assert_eq!(
            profile_keys(file, "default"),
            Some(("AKIADEFAULT".into(), "s1".into(), None))
        );
        assert_eq!(profile_keys(file, "missing"), None);
    }
}
