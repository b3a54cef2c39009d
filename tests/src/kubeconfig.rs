//! kubeconfig files for the tests' Kubernetes API servers
//! ([`crate::kube_apiserver`], [`crate::kube_emulator`]), as kubectl
//! writes them.

use std::path::{Path, PathBuf};

use base64::Engine as _;

/// One cluster and the bearer token to reach it with.
#[derive(Debug, Clone, Copy)]
pub struct Kubeconfig<'a> {
    /// The name of the cluster, the user and the context alike.
    pub name: &'a str,
    /// The API server's URL.
    pub server: &'a str,
    /// The PEM of the CA that signed the server's certificate, when it
    /// speaks TLS.
    pub ca_pem: Option<&'a str>,
    /// The user's bearer token.
    pub token: &'a str,
}

impl Kubeconfig<'_> {
    /// The file's text: the cluster, the user, a context of both
    /// (namespace `default`) and that context as the current one.
    pub fn text(&self) -> String {
        let Kubeconfig {
            name,
            server,
            ca_pem,
            token,
        } = *self;
        let ca = ca_pem.map_or(String::new(), |pem| {
            let data = base64::engine::general_purpose::STANDARD.encode(pem);
            format!("    certificate-authority-data: {data}\n")
        });
        format!(
            "apiVersion: v1\n\
             clusters:\n\
             - cluster:\n{ca}    server: {server}\n  name: {name}\n\
             contexts:\n\
             - context:\n    cluster: {name}\n    namespace: default\n    user: {name}\n  name: {name}\n\
             current-context: {name}\n\
             kind: Config\n\
             preferences: {{}}\n\
             users:\n\
             - name: {name}\n  user:\n    token: {token}\n"
        )
    }

    /// Writes [`text`](Self::text) to `dir/kubeconfig` and returns its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, self.text())
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_named_only_when_there_is_one() {
        let plain = Kubeconfig {
            name: "c",
            server: "http://127.0.0.1:1",
            ca_pem: None,
            token: "t0ken",
        };
        let text = plain.text();
        assert!(
            text.contains("- cluster:\n    server: http://127.0.0.1:1\n  name: c\n"),
            "{text}"
        );
        assert!(text.contains("current-context: c\n"), "{text}");
        assert!(text.contains("    token: t0ken\n"), "{text}");
        assert!(!text.contains("certificate-authority"), "{text}");
        let tls = Kubeconfig {
            ca_pem: Some("PEM"),
            ..plain
        };
        let text = tls.text();
        assert!(
            text.contains("    certificate-authority-data: UEVN\n    server: http://127.0.0.1:1\n"),
            "{text}"
        );
    }
}
