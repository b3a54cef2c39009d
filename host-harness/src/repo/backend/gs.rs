//! `gs:` repositories (Google Cloud Storage), named and configured as
//! restic names them.
//!
//! Credentials, as restic: `GOOGLE_ACCESS_TOKEN` (an OAuth token used as
//! is), else `GOOGLE_APPLICATION_CREDENTIALS` (a service account's key
//! file, or a user's credentials), else Google's application default
//! credentials (gcloud's file, then the metadata server that GKE's
//! workload identity answers). `GOOGLE_PROJECT_ID` is not needed to read or
//! delete. A service-account file may name `gcs_base_url` (and
//! `disable_oauth`) to point at an emulator.

use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};

use super::cloud;
use super::{BackendError, Scheme, Target};

/// `gs:bucket:/path`.
pub const SCHEME: Scheme = Scheme {
    name: "gs",
    redact: crate::repo::backend::location_text::redact_userinfo,
    parse: |location| parse(location).map(|_| location.to_owned()),
    open: |target: &Target<'_>| {
        let (bucket, prefix) =
            parse(target.location).map_err(|e| BackendError::Other(e.to_string()))?;
        cloud::tls_ready()?;
        let built = builder(&bucket, target)?.build();
        cloud::open(SCHEME.name, built, &bucket, prefix, target)
    },
    modifies: true,
};

fn parse(
    location: &str,
) -> Result<(String, String), crate::repo::backend::location_text::LocationError> {
    let rest = location.strip_prefix("gs:").unwrap_or(location);
    cloud::bucket_and_prefix(rest, "gs")
}

/// Where gcloud keeps the application default credentials, under `$HOME`
/// (the GCS client reads them when no credentials are given).
const GCLOUD_CREDENTIALS: &str = ".config/gcloud/application_default_credentials.json";

fn builder(bucket: &str, target: &Target<'_>) -> Result<GoogleCloudStorageBuilder, BackendError> {
    let from_env = |key: &str| target.variables.get(key);
    let mut builder = GoogleCloudStorageBuilder::new()
        .with_bucket_name(bucket)
        .with_client_options(cloud::client_options(target.timeout))
        .with_retry(cloud::retry_config(target.timeout))
        .with_http_connector(cloud::http::Connector::of(target.variables));
    if let Some(token) = from_env("GOOGLE_ACCESS_TOKEN") {
        builder = builder.with_config(GoogleConfigKey::BearerToken, token);
    } else if let Some(file) = from_env("GOOGLE_APPLICATION_CREDENTIALS") {
        let credentials = credentials_kind(&file)?;
        builder = if credentials.kind.as_deref() == Some("authorized_user") {
            builder.with_application_credentials(file)
        } else {
            // An emulator named by the file is reached over plain HTTP.
            let emulator = credentials
                .gcs_base_url
                .is_some_and(|url| url.starts_with("http://"));
            builder.with_service_account_path(file).with_client_options(
                cloud::client_options(target.timeout).with_allow_http(emulator),
            )
        };
    } else if let Some(home) = std::env::var_os("HOME").filter(|_| !target.variables.is_prefixed())
    {
        // The client reads this file while it is built, outside any
        // deadline, when it exists (as it tests it: links followed).
        let gcloud = std::path::Path::new(&home).join(GCLOUD_CREDENTIALS);
        if gcloud.exists() {
            cloud::check_credentials_file(&gcloud, "gcloud's application default credentials")?;
        }
    }
    Ok(builder)
}

/// What lockwarden looks at in a credentials file.
#[derive(serde::Deserialize)]
struct Credentials {
    /// `service_account` or `authorized_user`.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Where the storage API is, for an emulator.
    gcs_base_url: Option<String>,
}

/// The type and base URL of a credentials file.
fn credentials_kind(file: &str) -> Result<Credentials, BackendError> {
    let bytes = crate::files::read_regular_file(
        std::path::Path::new(file),
        crate::limits::CREDENTIALS_FILE,
    )
    .map_err(|e| {
        BackendError::Other(format!(
            "cannot read GOOGLE_APPLICATION_CREDENTIALS ({}): {e}",
            crate::text::escape(file)
        ))
    })?;
    serde_json::from_slice(&bytes).map_err(|_| {
        BackendError::Other(format!(
            "GOOGLE_APPLICATION_CREDENTIALS ({}) is not a JSON credentials file",
            crate::text::escape(file)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_read_as_restic_reads_them() {
        assert_eq!(
            parse("gs:bucket:/a/b/").expect("valid"),
            ("bucket".into(), "a/b".into())
        );
        assert_eq!(
            parse("gs:bucket:").expect("root"),
            ("bucket".into(), String::new())
        );
        for bad in ["gs:bucket", "gs::/x", "gs:bu/cket:/x", "gs:b\tx:/p"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
