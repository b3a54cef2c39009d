//! What the hostile S3 server writes: ListObjectsV2 pages, error bodies,
//! and the dates S3 puts in them.

use std::time::{SystemTime, UNIX_EPOCH};

/// One listed object.
pub struct Listed<'a> {
    /// Its key.
    pub key: &'a str,
    /// Its size.
    pub size: usize,
    /// When it was stored.
    pub modified: SystemTime,
}

/// A ListObjectsV2 page of `bucket`, for `prefix`, listing `entries`, with
/// `next` as the next continuation token when there is more.
pub fn list_page(bucket: &str, prefix: &str, entries: &[Listed<'_>], next: Option<&str>) -> String {
    let mut page = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>{}</Name><Prefix>{}</Prefix><KeyCount>{}</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>{}</IsTruncated>",
        escape(bucket),
        escape(prefix),
        entries.len(),
        next.is_some()
    );
    for entry in entries {
        page += &format!(
            "<Contents><Key>{}</Key><LastModified>{}</LastModified><ETag>&quot;{}&quot;</ETag><Size>{}</Size><StorageClass>STANDARD</StorageClass></Contents>",
            escape(entry.key),
            iso8601(entry.modified),
            etag_of(entry.key, entry.size),
            entry.size
        );
    }
    if let Some(next) = next {
        page += &format!(
            "<NextContinuationToken>{}</NextContinuationToken>",
            escape(next)
        );
    }
    page + "</ListBucketResult>"
}

/// The first bytes of an S3 error body with `code`.
pub fn error_body(code: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{code}</Message><RequestId>hostile</RequestId></Error>"
    )
}

/// An ETag for an object (S3's is its MD5; any quoted string serves).
pub fn etag_of(key: &str, size: usize) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (key, size).hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// `text` escaped for XML; control characters as character references
/// (as S3 writes a key that holds one).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push_str(&format!("&#x{:x};", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Seconds since the epoch, and the civil date and time of `time` (UTC).
fn civil(time: SystemTime) -> (u64, i64, u32, u32, u64) {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    // Days to a proleptic Gregorian date (eras of 400 years).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (secs, year, month, day, secs % 86_400)
}

/// `2024-01-31T12:00:00.000Z`.
pub fn iso8601(time: SystemTime) -> String {
    let (_, year, month, day, of_day) = civil(time);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

/// `Wed, 31 Jan 2024 12:00:00 GMT` (an HTTP date).
pub fn http_date(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (secs, year, month, day, of_day) = civil(time);
    let weekday = DAYS[usize::try_from(secs / 86_400 % 7).unwrap_or(0)];
    let month = MONTHS[usize::try_from(month - 1).unwrap_or(0)];
    format!(
        "{weekday}, {day:02} {month} {year:04} {:02}:{:02}:{:02} GMT",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_written_as_s3_writes_them() {
        let t = UNIX_EPOCH + Duration::from_secs(1_706_702_400); // 2024-01-31 12:00 UTC
        assert_eq!(iso8601(t), "2024-01-31T12:00:00.000Z");
        assert_eq!(http_date(t), "Wed, 31 Jan 2024 12:00:00 GMT");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn keys_are_escaped_control_characters_as_references() {
        assert_eq!(escape("a&b<\u{1}>"), "a&amp;b&lt;&#x1;&gt;");
    }
}
