//! Timestamps as the contract has them: nanoseconds since the Unix epoch.

use jiff::Timestamp;

/// Why a text is not a time the contract can carry.
#[derive(Debug, thiserror::Error)]
pub enum TimeError {
    /// The text is no RFC 3339 time.
    #[error("`{text}` is not an RFC 3339 time: {cause}")]
    NotRfc3339 {
        /// The text as given.
        text: String,
        /// What the parser found wrong.
        cause: jiff::Error,
    },
    /// The time is outside what nanoseconds in an `i64` reach.
    #[error("`{text}` is out of range (years 1678 to 2261)")]
    OutOfRange {
        /// The text as given.
        text: String,
    },
}

/// A text that is not a duration in Go's grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` is not {}", crate::text::escape(.text), lockwarden_duration::ACCEPTED)]
pub struct DurationError {
    /// The text as given (escaped when shown).
    pub text: String,
}

/// Parses an RFC 3339 time with any offset (`Z`, `+02:00`) and any fraction
/// into nanoseconds since the epoch.
pub fn parse_rfc3339(text: &str) -> Result<i64, TimeError> {
    let ts: Timestamp = text.parse().map_err(|cause| TimeError::NotRfc3339 {
        text: text.to_owned(),
        cause,
    })?;
    i64::try_from(ts.as_nanosecond()).map_err(|_| TimeError::OutOfRange {
        text: text.to_owned(),
    })
}

/// Formats nanoseconds since the epoch as RFC 3339 in UTC.
pub fn format_rfc3339(nanos: i64) -> String {
    Timestamp::from_nanosecond(i128::from(nanos))
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{nanos}ns since the epoch"))
}

/// Parses a non-negative duration as Go's `time.ParseDuration` does (`90s`,
/// `30m`, `1.5h`, `1h30m`): the one grammar of every duration lockwarden
/// reads, shared with the default policy's settings.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, DurationError> {
    let nanos = lockwarden_duration::parse(text).ok_or_else(|| DurationError {
        text: text.to_owned(),
    })?;
    Ok(std::time::Duration::from_nanos(nanos.unsigned_abs()))
}

/// The current time by this machine's clock.
pub fn now() -> i64 {
    i64::try_from(Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX)
}

/// The earliest modification time a storage can truthfully report for a
/// restic lock file: 2015-01-01T00:00:00Z, before restic's first release.
/// Earlier times are what a storage reports when it does not know (0, the
/// epoch; 1980 on FAT; the default clock of a machine without a battery),
/// not evidence of age.
pub const EARLIEST_STORED_AT: i64 = 1_420_070_400_000_000_000;

/// A listing's modification time as age evidence: none when it is earlier
/// than [`EARLIEST_STORED_AT`], since such a time says the storage does not
/// know, and taking it at face value would make a live lock look decades old.
pub fn plausible_stored_at(modified: Option<i64>) -> Option<i64> {
    modified.filter(|&at| at >= EARLIEST_STORED_AT)
}

/// A file time as nanoseconds since the epoch (saturating; before the
/// epoch is negative).
pub fn nanos_since_epoch(time: std::time::SystemTime) -> i64 {
    match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_offsets_and_fractions() {
        let z = parse_rfc3339("2026-11-30T12:00:00Z").expect("valid");
        assert_eq!(z, 1_796_040_000_000_000_000);
        assert_eq!(
            parse_rfc3339("2026-11-30T14:00:00.5+02:00").expect("valid"),
            z + 500_000_000
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T12:00:00.123456789Z").expect("valid"),
            z + 123_456_789
        );
        assert!(parse_rfc3339("yesterday").is_err());
        assert!(
            parse_rfc3339("yesterday")
                .expect_err("not a time")
                .to_string()
                .starts_with("`yesterday` is not an RFC 3339 time: "),
        );
        assert_eq!(
            parse_rfc3339("2300-01-01T00:00:00Z")
                .expect_err("too late")
                .to_string(),
            "`2300-01-01T00:00:00Z` is out of range (years 1678 to 2261)"
        );
        assert_eq!(format_rfc3339(z), "2026-11-30T12:00:00Z");
    }

    #[test]
    fn storage_times_before_restic_existed_are_unknown() {
        assert_eq!(
            parse_rfc3339("2015-01-01T00:00:00Z").expect("valid"),
            EARLIEST_STORED_AT
        );
        for impossible in [i64::MIN, -1, 0, EARLIEST_STORED_AT - 1] {
            assert_eq!(plausible_stored_at(Some(impossible)), None, "{impossible}");
        }
        for possible in [EARLIEST_STORED_AT, 1_796_040_000_000_000_000, i64::MAX] {
            assert_eq!(plausible_stored_at(Some(possible)), Some(possible));
        }
        assert_eq!(plausible_stored_at(None), None);
    }

    #[test]
    fn a_bad_duration_says_what_is_accepted() {
        let err = parse_duration("soon\n").expect_err("not a duration");
        assert_eq!(
            err.to_string(),
            format!("`soon\\n` is not {}", lockwarden_duration::ACCEPTED)
        );
    }
}
