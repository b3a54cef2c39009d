//! Durations as restic users spell them: Go's `time.ParseDuration` form, which
//! they know from `--retry-lock` (`90s`, `30m`, `1.5h`, `1h30m`).
//!
//! Shared by the host (command-line options, the watch configuration) and the
//! default policy (its settings), so that both accept exactly one grammar.
//! Hand-written rather than a crate: the grammar must be exactly Go's
//! (humantime accepts months and years, which have no fixed length), and the
//! policy component should carry no date library.

// No std: the policy component links only core and alloc (no WASI).
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::{borrow::ToOwned, format, string::String};

/// Nanoseconds in one second.
pub const SECOND: i64 = 1_000_000_000;
/// Nanoseconds in one minute.
pub const MINUTE: i64 = 60 * SECOND;
/// Nanoseconds in one hour.
pub const HOUR: i64 = 60 * MINUTE;

const UNITS: [(&str, i64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", SECOND),
    ("m", MINUTE),
    ("h", HOUR),
];

/// What a duration accepts, for error messages.
pub const ACCEPTED: &str = "a duration such as 90s, 30m, 1.5h or 1h30m (units ns, us, ms, s, m, h)";

/// Parses a non-negative duration into nanoseconds, as Go's
/// `time.ParseDuration` does: one or more `<number><unit>` groups, where a
/// number may have a fraction (`1.5h`, `.5s`), or a bare `0`. Returns `None`
/// for anything else, a sign, or a value beyond `i64` nanoseconds.
pub fn parse(text: &str) -> Option<i64> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(0);
    }
    let mut total: i64 = 0;
    while !rest.is_empty() {
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let fraction = match rest.strip_prefix('.') {
            Some(after) => {
                let len = after.bytes().take_while(u8::is_ascii_digit).count();
                rest = &after[len..];
                &after[..len]
            }
            None => "",
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = UNITS.iter().find(|(name, _)| *name == unit)?.1;
        total = total.checked_add(group(whole, fraction, scale)?)?;
    }
    Some(total)
}

/// `whole.fraction` units of `scale` nanoseconds, the fraction truncated to
/// whole nanoseconds (digits past the 19th cannot matter and are dropped).
fn group(whole: &str, fraction: &str, scale: i64) -> Option<i64> {
    let mut nanos: i64 = 0;
    for digit in whole.bytes() {
        nanos = nanos
            .checked_mul(10)?
            .checked_add(i64::from(digit - b'0'))?;
    }
    nanos = nanos.checked_mul(scale)?;
    let digits = &fraction.as_bytes()[..fraction.len().min(19)];
    let mut value: u128 = 0;
    for digit in digits {
        value = value * 10 + u128::from(digit - b'0');
    }
    let exponent = u32::try_from(digits.len()).unwrap_or(19);
    let part = value * u128::from(scale.unsigned_abs()) / 10u128.pow(exponent);
    nanos.checked_add(i64::try_from(part).ok()?)
}

/// Formats nanoseconds the way a person reads an age: `31m5s`, `2h`, `450ms`.
pub fn format(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < SECOND as u64 {
        return format!("{sign}{}ms", n / 1_000_000);
    }
    let parts = [
        (n / HOUR as u64, "h"),
        (n / MINUTE as u64 % 60, "m"),
        (n / SECOND as u64 % 60, "s"),
    ];
    let mut out = sign.to_owned();
    for (value, unit) in parts.into_iter().filter(|(v, _)| *v > 0) {
        out += &format!("{value}{unit}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let cases = [
            ("90s", Some(90 * SECOND)),
            ("30m", Some(30 * MINUTE)),
            ("2h", Some(2 * HOUR)),
            ("1h30m", Some(90 * MINUTE)),
            ("500ms", Some(500_000_000)),
            ("1ns", Some(1)),
            ("0", Some(0)),
            ("0s", Some(0)),
            (" 5m ", Some(5 * MINUTE)),
            ("1.5h", Some(90 * MINUTE)),
            (".5s", Some(500_000_000)),
            ("1.s", Some(SECOND)),
            ("2h45.5m", Some(2 * HOUR + 45 * MINUTE + 30 * SECOND)),
            ("1.0000000001s", Some(SECOND)),
            ("3\u{b5}s", Some(3_000)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), want, "parse({text:?})");
        }
    }

    #[test]
    fn refuses_everything_else() {
        for text in [
            "",
            "30",
            "m",
            "-5m",
            "+5m",
            ".s",
            "1.5",
            "1..5h",
            "3d",
            "1y",
            "5 m",
            "9999999999999h",
        ] {
            assert_eq!(parse(text), None, "parse({text:?}) should fail");
        }
    }

    #[test]
    fn agrees_with_go_on_edges() {
        // time.ParseDuration("2562047h47m16.854775807s") is the largest.
        assert_eq!(parse("2562047h47m16.854775807s"), Some(i64::MAX));
        assert_eq!(parse("2562047h47m16.854775808s"), None);
        assert_eq!(parse("0.000000001s"), Some(1));
    }

    #[test]
    fn formats_ages() {
        assert_eq!(format(31 * MINUTE + 5 * SECOND), "31m5s");
        assert_eq!(format(2 * HOUR), "2h");
        assert_eq!(format(HOUR + 5 * SECOND), "1h5s");
        assert_eq!(format(450_000_000), "450ms");
        assert_eq!(format(-3 * SECOND), "-3s");
    }
}
