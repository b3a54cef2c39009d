//! The WebAssembly OCI artifact layout (CNCF TAG Runtime's "Wasm OCI
//! Artifact", as `wkg`, wasmCloud and Spin write and read it): an OCI image
//! manifest whose config is a small JSON document naming the component's
//! world, and whose one layer is the component itself.
//!
//! The config lists the component's imports and exports by the names in its
//! binary, read with wasmparser (which wasmtime already brings) rather than
//! by decoding its whole WIT world.

use oci_client::client::{Config, ImageLayer};
use serde::Serialize;
use wasmparser::{Parser, Payload};

/// The manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer's media type: the component.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The config document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig {
    /// When it was pushed (RFC 3339).
    created: String,
    author: Option<String>,
    /// Always `wasm`.
    architecture: &'static str,
    /// `wasip2` for a component.
    os: &'static str,
    /// The layer's digest.
    layer_digests: Vec<String>,
    component: Component,
}

/// Why a component cannot be described for pushing.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The bytes are no valid component.
    #[error("not a valid component: {0}")]
    Invalid(wasmparser::BinaryReaderError),
    /// An import of the component cannot be read.
    #[error("bad import: {0}")]
    Import(wasmparser::BinaryReaderError),
    /// An export of the component cannot be read.
    #[error("bad export: {0}")]
    Export(wasmparser::BinaryReaderError),
    /// The config cannot be written as JSON.
    #[error("{0}")]
    Config(serde_json::Error),
}

/// The component's world, by the names of its top-level imports and exports.
#[derive(Debug, Serialize)]
struct Component {
    exports: Vec<String>,
    imports: Vec<String>,
    /// The world it targets, when known (never, here).
    target: Option<String>,
}

impl Component {
    /// Reads the names of `component`'s own imports and exports (not those
    /// of the modules and components nested in it).
    fn read(component: &[u8]) -> Result<Component, ArtifactError> {
        let mut found = Component {
            exports: Vec::new(),
            imports: Vec::new(),
            target: None,
        };
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(component) {
            match payload.map_err(ArtifactError::Invalid)? {
                Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
                Payload::End(_) if depth > 0 => depth -= 1,
                Payload::ComponentImportSection(imports) if depth == 0 => {
                    for import in imports {
                        let import = import.map_err(ArtifactError::Import)?;
                        found.imports.push(import.name.name.to_owned());
                    }
                }
                Payload::ComponentExportSection(exports) if depth == 0 => {
                    for export in exports {
                        let export = export.map_err(ArtifactError::Export)?;
                        found.exports.push(export.name.name.to_owned());
                    }
                }
                _ => {}
            }
        }
        Ok(found)
    }
}

/// The config and the layer for pushing `component`.
pub fn config_and_layer(component: &[u8]) -> Result<(Config, ImageLayer), ArtifactError> {
    let config = WasmConfig {
        created: jiff::Timestamp::now().to_string(),
        author: None,
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![super::sha256_digest(component)],
        component: Component::read(component)?,
    };
    let config = serde_json::to_vec(&config).map_err(ArtifactError::Config)?;
    Ok((
        Config {
            data: config.into(),
            media_type: CONFIG_MEDIA_TYPE.to_owned(),
            annotations: None,
        },
        ImageLayer {
            data: component.to_vec().into(),
            media_type: LAYER_MEDIA_TYPE.to_owned(),
            annotations: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default policy's world, as wkg would list it.
    #[test]
    fn the_default_policy_imports_and_exports_its_interfaces() {
        let component = std::fs::read(env!("LOCKWARDEN_DEFAULT_POLICY")).expect("built policy");
        let found = Component::read(&component).expect("reads");
        let export = format!("lockwarden:policy/policy@{}", lockwarden_wit::VERSION);
        assert_eq!(found.exports, [export]);
        let liveness = format!("lockwarden:policy/liveness@{}", lockwarden_wit::VERSION);
        assert!(found.imports.contains(&liveness), "{:?}", found.imports);
        assert!(
            found.imports.iter().all(|i| !i.starts_with("wasi:sockets")),
            "{:?}",
            found.imports
        );
    }

    #[test]
    fn a_core_module_has_no_world_and_garbage_is_refused() {
        let module = [0, b'a', b's', b'm', 1, 0, 0, 0];
        let found = Component::read(&module).expect("an empty module parses");
        assert!(found.imports.is_empty() && found.exports.is_empty());
        assert!(Component::read(b"\0asm\x0d\0\x01\0\xff\xff").is_err());
    }
}
