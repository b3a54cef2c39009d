//! Durations as settings spell them: Go's `time.ParseDuration` form, which restic
//! users already know from `--retry-lock` (`90s`, `30m`, `2h`, `1h30m`).
//!
//! Hand-written rather than a crate: the grammar must be exactly the documented
//! one (humantime accepts months and years, which have no fixed length), and the
//! policy component should carry no date library.

/// Nanoseconds in one second.
pub const SECOND: i64 = 1_000_000_000;
/// Nanoseconds in one minute.
pub const MINUTE: i64 = 60 * SECOND;
/// Nanoseconds in one hour.
pub const HOUR: i64 = 60 * MINUTE;

const UNITS: [(&str, i64); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", SECOND),
    ("m", MINUTE),
    ("h", HOUR),
];

/// What a duration setting accepts, for error messages.
pub const ACCEPTED: &str = "a duration such as 90s, 30m, 2h or 1h30m (units ns, us, ms, s, m, h)";

/// Parses a non-negative duration into nanoseconds. Returns `None` for anything
/// that is not one or more `<digits><unit>` groups, or that overflows.
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
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let number: i64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        let scale = UNITS.iter().find(|(name, _)| *name == unit)?.1;
        total = total.checked_add(number.checked_mul(scale)?)?;
        rest = &rest[unit_len..];
    }
    Some(total)
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
            "1.5h",
            "3d",
            "1y",
            "5 m",
            "9999999999999h",
        ] {
            assert_eq!(parse(text), None, "parse({text:?}) should fail");
        }
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
