//! Text from outside (hostnames, usernames, a policy's reasons and logs, a
//! command's error) made safe for a terminal or a log line: control
//! characters and the Unicode controls that reorder text are escaped, so no
//! input can forge a line, move the cursor or disguise what it says.

use std::borrow::Cow;

/// `text` with every control character written as an escape (`\n`, `\t`,
/// `\u{1b}`), and a backslash doubled, so that a literal `\n` in a hostname
/// cannot pass for an escaped newline. Other printable text, Unicode
/// included, is unchanged.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Cuts `text` to at most `max` bytes at a character boundary and ends it
/// with `…` when anything was cut.
pub fn cut(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        // The escape character itself, so that an escape cannot be faked.
        || c == '\\'
        // Bidirectional marks, overrides and isolates; line and paragraph
        // separators.
        || matches!(
            c,
            '\u{200e}'
                | '\u{200f}'
                | '\u{061c}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_a_character_boundary() {
        let mut long = "héllo".repeat(3);
        cut(&mut long, 2);
        assert_eq!(long, "h…");
        let mut short = "ok".to_owned();
        cut(&mut short, 2);
        assert_eq!(short, "ok");
    }

    #[test]
    fn escapes_controls_only() {
        assert_eq!(escape("vm-1 héllo"), "vm-1 héllo");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(
            escape("evil\nremoved deadbeef\r\u{1b}[2J"),
            "evil\\nremoved deadbeef\\r\\u{1b}[2J"
        );
        assert_eq!(escape("a\u{202e}b\u{7f}"), "a\\u{202e}b\\u{7f}");
        // A literal backslash-n stays distinguishable from a newline.
        assert_eq!(escape("a\\nb\u{200f}"), "a\\\\nb\\u{200f}");
    }
}
