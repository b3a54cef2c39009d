//! Why an operator's object gives no repository: each cause a variant,
//! said as the reason its Event and log give (`Unusable::why`). Never
//! holds a value read from a Secret.

use super::super::access::AccessRefused;
use super::super::api::ReferenceError;

/// Why one object's repository cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A Secret or ConfigMap it names, or a key of it, gives no value.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// It names what its namespace may not have lockwarden read.
    #[error(transparent)]
    Access(#[from] AccessRefused),
    /// A field its operator needs is not set: the sentence names it.
    #[error("{0}")]
    Unset(&'static str),
    /// An object it names does not exist (`0`: its kind and name, as shown).
    #[error("its {0} does not exist")]
    Gone(String),
    /// What it names (a Secret, a credentials file, its backend) holds no
    /// `what`.
    #[error("its {holder} has no {what}")]
    Lacks {
        /// What was looked in, as shown.
        holder: String,
        /// What is not there, as shown.
        what: String,
    },
    /// Its storage is a kind discovery does not read, said as a sentence.
    #[error("{0}")]
    Unread(&'static str),
    /// Its `what` (its repository, its BackupStorage) is on `scheme`,
    /// which discovery does not read.
    #[error("its {what} is on {scheme}, which discovery does not read")]
    OnScheme {
        /// What is on it.
        what: &'static str,
        /// The scheme or provider, as shown.
        scheme: String,
    },
    /// A K8up backend with neither `s3` nor `azure`: `has` says what it has.
    #[error("it has {has}; discovery reads only its s3 and azure backends")]
    Backend {
        /// Its backends (`spec.backend.gcs, ...`), or that none is known.
        has: String,
    },
    /// A Velero `resticIdentifier` on a scheme discovery does not read.
    #[error(
        "its spec.resticIdentifier is a {scheme}: repository; discovery reads only s3: and \
         azure: ones{}",
        gcs_note(.scheme)
    )]
    Identifier {
        /// Its scheme, escaped.
        scheme: String,
    },
    /// Its TLS options name files inside the backup pod (`0`: the fields).
    #[error(
        "its {} {} inside the backup pod, which lockwarden cannot read",
        .0.join(", "),
        name_files(.0)
    )]
    PodFiles(Vec<String>),
    /// Its field `0`, a reference to a Secret's key, names none.
    #[error("its {0} names no Secret and key")]
    NoReference(String),
    /// The CA bundle its field `0` gives is not base64.
    #[error("its {0} is not base64")]
    NotBase64(String),
    /// The CA bundle it gives is refused (the message names its field).
    #[error("{0}")]
    Ca(String),
    /// Its storage's credentials are not all static ones.
    #[error(
        "no static credentials for its {scheme} repository (missing {}); lockwarden does not \
         reach another's repository with an identity of its own",
        .missing.join(", ")
    )]
    NoCredentials {
        /// The repository's scheme.
        scheme: &'static str,
        /// The variables (or choices of them) not given.
        missing: Vec<&'static str>,
    },
}

/// Why Velero's GCS repositories are not read, after their `scheme`.
fn gcs_note(scheme: &str) -> &'static str {
    if scheme == "gs" {
        " (GCS credentials are a file)"
    } else {
        ""
    }
}

/// The verb after the `fields` that name files.
fn name_files(fields: &[String]) -> &'static str {
    if fields.len() == 1 {
        "names a file"
    } else {
        "name files"
    }
}

#[cfg(test)]
mod tests {
    use super::Refusal;

    /// Each computed message, word for word.
    #[test]
    fn each_refusal_reads_as_before() {
        let cases = [
            (
                Refusal::Identifier {
                    scheme: "gs".into(),
                },
                "its spec.resticIdentifier is a gs: repository; discovery reads only s3: and \
                 azure: ones (GCS credentials are a file)",
            ),
            (
                Refusal::Identifier {
                    scheme: "b2".into(),
                },
                "its spec.resticIdentifier is a b2: repository; discovery reads only s3: and \
                 azure: ones",
            ),
            (
                Refusal::PodFiles(vec!["spec.backend.tlsOptions.caCert".into()]),
                "its spec.backend.tlsOptions.caCert names a file inside the backup pod, which \
                 lockwarden cannot read",
            ),
            (
                Refusal::NoCredentials {
                    scheme: "s3",
                    missing: vec!["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
                },
                "no static credentials for its s3 repository (missing AWS_ACCESS_KEY_ID, \
                 AWS_SECRET_ACCESS_KEY); lockwarden does not reach another's repository with an \
                 identity of its own",
            ),
            (
                Refusal::OnScheme {
                    what: "BackupStorage",
                    scheme: "gcs".into(),
                },
                "its BackupStorage is on gcs, which discovery does not read",
            ),
            (
                Refusal::Lacks {
                    holder: "Secret repo".into(),
                    what: "RESTIC_PASSWORD".into(),
                },
                "its Secret repo has no RESTIC_PASSWORD",
            ),
            (
                Refusal::Gone("BackupStorageLocation default".into()),
                "its BackupStorageLocation default does not exist",
            ),
        ];
        for (refusal, said) in cases {
            assert_eq!(refusal.to_string(), said);
        }
    }
}
