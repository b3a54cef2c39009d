//! An answer of the API as JSON, however deeply a tenant nested its
//! objects: any object may hold free-form JSON the API server keeps as
//! written (`metadata.managedFields[].fieldsV1`, a field a CRD leaves
//! unchecked), and serde_json refuses more than 128 levels, which would
//! fail a whole list (every namespace) for one tenant's object.
//!
//! The API server stores nothing nested deeper than Go's `encoding/json`
//! reads, 10,000 levels: up to that, an answer is parsed on a thread with
//! a stack for it, and every subtree deeper than [`KEPT_DEPTH`] is
//! replaced by `null` there (nothing lockwarden reads is nested more than
//! a few levels), so what leaves this module is shallow. Deeper is no
//! answer the API server gives, and fails.

use serde::Deserialize;
use serde_json::Value;

/// The deepest nesting an API server's answer can hold.
const API_DEPTH: usize = 10_000;
/// Deeper subtrees are replaced by `null`.
const KEPT_DEPTH: usize = 64;
/// The nesting serde_json parses on any thread.
const PLAIN_DEPTH: usize = 100;
/// The parsing thread's stack, for [`API_DEPTH`] levels (about 1 KiB each
/// in serde_json's recursion, with room to spare).
const STACK: usize = 64 << 20;

/// Why an answer is no JSON lockwarden reads.
#[derive(Debug, thiserror::Error)]
pub enum DeepJsonError {
    /// Nested deeper than any API server stores.
    #[error("the answer is nested deeper than the {API_DEPTH} levels an API server stores")]
    TooDeep,
    /// Not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The thread that parses deep answers could not start.
    #[error("cannot start a thread to read the answer: {0}")]
    Thread(std::io::Error),
    /// The thread that parsed it panicked.
    #[error("reading the answer panicked")]
    Panicked,
}

/// `text` as JSON, its subtrees deeper than [`KEPT_DEPTH`] replaced by
/// `null`.
pub fn parse(text: &str) -> Result<Value, DeepJsonError> {
    let depth = depth(text);
    if depth > API_DEPTH {
        return Err(DeepJsonError::TooDeep);
    }
    if depth <= PLAIN_DEPTH {
        let mut value: Value = serde_json::from_str(text)?;
        prune(&mut value, 0);
        return Ok(value);
    }
    std::thread::scope(|scope| {
        let parser = std::thread::Builder::new()
            .name("deep-json".into())
            .stack_size(STACK)
            .spawn_scoped(scope, || {
                let mut de = serde_json::Deserializer::from_str(text);
                de.disable_recursion_limit();
                let mut value = Value::deserialize(&mut de)?;
                de.end()?;
                // The deep subtrees are dropped here, on this stack.
                prune(&mut value, 0);
                Ok(value)
            })
            .map_err(DeepJsonError::Thread)?;
        parser.join().map_err(|_| DeepJsonError::Panicked)?
    })
}

/// The deepest nesting of arrays and objects in `text`, as its brackets
/// outside strings say (malformed text is left for the parser to refuse).
fn depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Replaces every subtree of `value` (at `level`) deeper than
/// [`KEPT_DEPTH`] by `null`.
fn prune(value: &mut Value, level: usize) {
    if level >= KEPT_DEPTH {
        if value.is_array() || value.is_object() {
            *value = Value::Null;
        }
        return;
    }
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| prune(v, level + 1)),
        Value::Object(map) => map.values_mut().for_each(|v| prune(v, level + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn a_deep_field_is_cut_and_the_rest_kept() {
        let text = format!(
            r#"{{"items": [{{"metadata": {{"name": "a\"[[[", "fields": {}}}}}]}}"#,
            nested(9_000)
        );
        let value = parse(&text).expect("parses");
        assert_eq!(value["items"][0]["metadata"]["name"], "a\"[[[");
        let mut inner = &value["items"][0]["metadata"]["fields"];
        let mut levels = 0;
        while let Some(first) = inner.get(0) {
            inner = first;
            levels += 1;
        }
        assert_eq!(inner, &Value::Null);
        assert_eq!(levels, KEPT_DEPTH - 4);
    }

    #[test]
    fn what_no_api_server_gives_fails() {
        let too_deep = parse(&nested(API_DEPTH + 1)).expect_err("too deep");
        assert!(matches!(too_deep, DeepJsonError::TooDeep), "{too_deep}");
        assert_eq!(
            too_deep.to_string(),
            "the answer is nested deeper than the 10000 levels an API server stores"
        );
        assert!(parse(&nested(API_DEPTH)).is_ok());
        let broken = parse("{\"a\": [1, 2").expect_err("not JSON");
        assert!(matches!(broken, DeepJsonError::Json(_)), "{broken}");
        assert_eq!(depth(r#"{"a": "[[[[\\"}"#), 1);
    }
}
