//! `azure:` repositories (Azure Blob Storage), named and configured as
//! restic names them.
//!
//! `AZURE_ACCOUNT_NAME` names the account; credentials, as restic:
//! `AZURE_ACCOUNT_KEY`, else `AZURE_ACCOUNT_SAS` (a SAS token), else what
//! Azure gives a workload (AKS workload identity: `AZURE_CLIENT_ID`,
//! `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`; a service principal's
//! `AZURE_CLIENT_SECRET`; managed identity). `AZURE_ENDPOINT_SUFFIX`
//! replaces `core.windows.net` (sovereign clouds). For Azurite,
//! `AZURE_STORAGE_USE_EMULATOR=true` and `AZURITE_BLOB_STORAGE_URL`.

use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

use super::cloud;
use super::{BackendError, Scheme, Target};

/// `azure:container:/path`.
pub const SCHEME: Scheme = Scheme {
    name: "azure",
    redact: crate::repo::backend::location_text::redact_userinfo,
    parse: |location| parse(location).map(|_| location.to_owned()),
    open: |target: &Target<'_>| {
        let (container, prefix) =
            parse(target.location).map_err(|e| BackendError::Other(e.to_string()))?;
        cloud::tls_ready()?;
        let built = builder(&container, target)?.build();
        cloud::open(SCHEME.name, built, &container, prefix, target)
    },
    modifies: true,
};

fn parse(
    location: &str,
) -> Result<(String, String), crate::repo::backend::location_text::LocationError> {
    let rest = location.strip_prefix("azure:").unwrap_or(location);
    cloud::bucket_and_prefix(rest, "azure")
}

/// The variables of Azure's workload credential chain that are read.
const WORKLOAD_VARIABLES: [(&str, AzureConfigKey); 4] = [
    ("AZURE_CLIENT_ID", AzureConfigKey::ClientId),
    ("AZURE_CLIENT_SECRET", AzureConfigKey::ClientSecret),
    ("AZURE_TENANT_ID", AzureConfigKey::AuthorityId),
    (
        "AZURE_FEDERATED_TOKEN_FILE",
        AzureConfigKey::FederatedTokenFile,
    ),
];

fn builder(container: &str, target: &Target<'_>) -> Result<MicrosoftAzureBuilder, BackendError> {
    let from_env = |key: &str| target.variables.get(key);
    let account = from_env("AZURE_ACCOUNT_NAME").ok_or_else(|| {
        BackendError::Other(format!(
            "cannot use {}: AZURE_ACCOUNT_NAME is not set (the storage account's name)",
            target.shown
        ))
    })?;
    let emulator = from_env("AZURE_STORAGE_USE_EMULATOR").is_some_and(|v| v == "true" || v == "1");
    let mut builder = MicrosoftAzureBuilder::new()
        .with_account(&account)
        .with_container_name(container)
        .with_use_emulator(emulator)
        .with_client_options(cloud::client_options(target.timeout).with_allow_http(emulator))
        .with_retry(cloud::retry_config(target.timeout))
        .with_http_connector(cloud::http::Connector::of(target.variables));
    if let Some(suffix) = from_env("AZURE_ENDPOINT_SUFFIX").filter(|_| !emulator) {
        builder = builder.with_endpoint(format!("https://{account}.blob.{suffix}"));
    }
    if let Some(key) = from_env("AZURE_ACCOUNT_KEY") {
        // The client's own complaint about a bad key quotes a character of
        // it: checked here, said without it.
        use base64::Engine as _;
        if base64::engine::general_purpose::STANDARD
            .decode(&key)
            .is_err()
        {
            return Err(BackendError::Other(format!(
                "cannot use {}: AZURE_ACCOUNT_KEY is not a base64 account key",
                target.shown
            )));
        }
        builder = builder.with_access_key(key);
    } else if let Some(sas) = from_env("AZURE_ACCOUNT_SAS") {
        builder = builder.with_config(AzureConfigKey::SasKey, sas.trim_start_matches('?'));
    } else {
        for (variable, key) in WORKLOAD_VARIABLES {
            if let Some(value) = from_env(variable) {
                if key == AzureConfigKey::FederatedTokenFile {
                    cloud::check_credentials_file(std::path::Path::new(&value), variable)?;
                }
                builder = builder.with_config(key, value);
            }
        }
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_read_as_restic_reads_them() {
        assert_eq!(
            parse("azure:backups:/cluster/one").expect("valid"),
            ("backups".into(), "cluster/one".into())
        );
        assert!(parse("azure:backups").is_err());
    }
}
