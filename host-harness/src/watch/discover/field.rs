//! Reading one field of an operator's object (JSON as the API serves it).

use serde_json::Value;

/// The string at `pointer` in `object`, if there is a non-empty one.
pub fn text<'v>(object: &'v Value, pointer: &str) -> Option<&'v str> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}
