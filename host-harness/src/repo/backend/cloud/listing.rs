//! Listing pages as the object stores send them (S3's and GCS's XML
//! `ListObjectsV2`, Azure's `List Blobs`), checked before object_store parses
//! them:
//!
//! - an entry whose key object_store's own [`Path::parse`] refuses
//!   (`locks//x`, `locks/../x`, a control character, a key that is not
//!   text) is dropped, every other byte kept: object_store fails the whole
//!   listing on one such key, so one odd object under `locks/` would stop
//!   lockwarden from judging any lock, and such a key never names a restic
//!   file;
//! - a page whose next continuation token is the one its request was sent
//!   with is refused: followed, that listing would never end.
//!
//! The walk is one pass over a page already bounded in size, with its
//! nesting bounded too.

use std::borrow::Cow;
use std::ops::Range;

use bytes::Bytes;
use hyper::{Method, Uri};
use object_store::path::Path;
use quick_xml::events::{BytesRef, Event};

use super::refusal::Refusal;

/// Nesting followed: an entry lies at depth 2 (S3) or 3 (Azure) below the
/// root, its key one deeper; anything deeper is only counted.
const MAX_DEPTH: usize = 4;

/// The elements of one store's listing page, by their names below the
/// root element.
struct Dialect {
    /// An entry (its path below the root) and the child that holds its key.
    entries: [(&'static [&'static str], &'static str); 2],
    /// The element holding the next page's continuation token.
    next_token: &'static str,
}

/// S3 and GCS (XML API): `<ListBucketResult><Contents><Key>`.
static S3: Dialect = Dialect {
    entries: [(&["Contents"], "Key"), (&["CommonPrefixes"], "Prefix")],
    next_token: "NextContinuationToken",
};

/// Azure: `<EnumerationResults><Blobs><Blob><Name>`.
static AZURE: Dialect = Dialect {
    entries: [
        (&["Blobs", "Blob"], "Name"),
        (&["Blobs", "BlobPrefix"], "Name"),
    ],
    next_token: "NextMarker",
};

/// A listing request: which store's dialect it asks in, and the
/// continuation token it was sent with.
pub struct Asked {
    dialect: &'static Dialect,
    token: Option<String>,
}

impl Asked {
    /// What `method uri` asks for when it is a listing request (S3/GCS:
    /// `list-type=2`, token `continuation-token`; Azure: `restype=container`
    /// and `comp=list`, token `marker`); `None` for any other request.
    pub fn of(method: &Method, uri: &Uri) -> Option<Asked> {
        if method != Method::GET {
            return None;
        }
        let pairs: Vec<(Cow<'_, str>, Cow<'_, str>)> =
            form_urlencoded::parse(uri.query()?.as_bytes()).collect();
        let has = |key: &str, value: &str| pairs.iter().any(|(k, v)| k == key && v == value);
        let value = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone().into_owned())
        };
        if has("list-type", "2") {
            Some(Asked {
                dialect: &S3,
                token: value("continuation-token"),
            })
        } else if has("restype", "container") && has("comp", "list") {
            Some(Asked {
                dialect: &AZURE,
                token: value("marker"),
            })
        } else {
            None
        }
    }

    /// The page `body` answered to this request, without the entries whose
    /// key object_store refuses; the same bytes when none is. A page that
    /// is not well-formed XML is passed on as it is (object_store then says
    /// it is malformed).
    pub fn checked(&self, body: Bytes) -> Result<Bytes, Refusal> {
        let Some(page) = Walk::new(self.dialect).run(&body) else {
            return Ok(body);
        };
        if self.token.is_some() && page.next_token.as_deref() == self.token.as_deref() {
            return Err(Refusal::RepeatedToken);
        }
        if page.dropped.is_empty() {
            return Ok(body);
        }
        let mut kept = Vec::with_capacity(body.len());
        let mut at = 0;
        for range in &page.dropped {
            kept.extend_from_slice(&body[at..range.start]);
            at = range.end;
        }
        kept.extend_from_slice(&body[at..]);
        Ok(Bytes::from(kept))
    }
}

/// What a walk over a page found.
struct Page {
    /// The byte ranges of the entries to drop, in order.
    dropped: Vec<Range<usize>>,
    /// The next continuation token, as object_store will read it.
    next_token: Option<String>,
}

/// The text of one element being read (a key, the token), decoded as an
/// XML reader decodes it; `None` once something in it cannot be.
struct Text {
    /// The depth of the element.
    depth: usize,
    value: Option<String>,
}

/// The entry being read.
struct Entry {
    /// Where its start tag begins.
    start: usize,
    /// Its depth.
    depth: usize,
    /// The name of the child holding its key.
    key: &'static str,
    /// The keys found in it (object_store takes exactly one).
    keys: Vec<Option<String>>,
}

/// One pass over a page.
struct Walk {
    dialect: &'static Dialect,
    /// The names of the open elements down to [`MAX_DEPTH`].
    names: Vec<Vec<u8>>,
    depth: usize,
    entry: Option<Entry>,
    text: Option<Text>,
    page: Page,
}

impl Walk {
    fn new(dialect: &'static Dialect) -> Walk {
        Walk {
            dialect,
            names: Vec::new(),
            depth: 0,
            entry: None,
            text: None,
            page: Page {
                dropped: Vec::new(),
                next_token: None,
            },
        }
    }

    /// The walk over `body`; `None` when it is not well-formed XML.
    fn run(mut self, body: &[u8]) -> Option<Page> {
        let mut reader = quick_xml::Reader::from_reader(body);
        loop {
            let before = usize::try_from(reader.buffer_position()).ok()?;
            let event = reader.read_event().ok()?;
            let after = usize::try_from(reader.buffer_position()).ok()?;
            match event {
                Event::Eof => break,
                Event::Start(start) => self.open(start.local_name().as_ref(), before),
                Event::Empty(empty) => {
                    self.open(empty.local_name().as_ref(), before);
                    self.close(after);
                }
                Event::End(_) => self.close(after),
                Event::Text(text) => self.append(text.decode().ok()),
                Event::CData(data) => self.append(data.decode().ok()),
                Event::GeneralRef(reference) => self.append(resolved(&reference)),
                _ => {}
            }
        }
        (self.depth == 0).then_some(self.page)
    }

    /// An element `name` opens at byte `at`.
    fn open(&mut self, name: &[u8], at: usize) {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return;
        }
        self.names.push(name.to_vec());
        let below_root: Vec<&[u8]> = self.names[1..].iter().map(Vec::as_slice).collect();
        let is = |path: &[&str]| {
            path.len() == below_root.len()
                && path
                    .iter()
                    .zip(&below_root)
                    .all(|(a, b)| a.as_bytes() == *b)
        };
        match &self.entry {
            None => {
                if let Some((_, key)) = self.dialect.entries.iter().find(|(path, _)| is(path)) {
                    self.entry = Some(Entry {
                        start: at,
                        depth: self.depth,
                        key,
                        keys: Vec::new(),
                    });
                } else if is(&[self.dialect.next_token]) {
                    self.start_text();
                }
            }
            Some(entry) if self.depth == entry.depth + 1 && name == entry.key.as_bytes() => {
                self.start_text();
            }
            Some(_) => {}
        }
    }

    fn start_text(&mut self) {
        self.text = Some(Text {
            depth: self.depth,
            value: Some(String::new()),
        });
    }

    /// Text inside the element being read; `None` for text that cannot be
    /// decoded.
    fn append(&mut self, piece: Option<Cow<'_, str>>) {
        if let Some(text) = &mut self.text {
            text.value = match (text.value.take(), piece) {
                (Some(mut value), Some(piece)) => {
                    value.push_str(&piece);
                    Some(value)
                }
                _ => None,
            };
        }
    }

    /// The open element closes; its end tag ends before byte `at`.
    fn close(&mut self, at: usize) {
        if let Some(text) = self.text.take_if(|t| t.depth == self.depth) {
            match &mut self.entry {
                Some(entry) => entry.keys.push(text.value),
                None => self.page.next_token = text.value.map(|v| trimmed(&v).to_owned()),
            }
        }
        if let Some(entry) = self.entry.take_if(|e| e.depth == self.depth)
            && !parses(&entry.keys)
        {
            self.page.dropped.push(entry.start..at);
        }
        if self.depth <= MAX_DEPTH {
            self.names.pop();
        }
        self.depth = self.depth.saturating_sub(1);
    }
}

/// What a reference (`&amp;`, `&#47;`) stands for, as object_store's XML
/// reader resolves it; `None` for one it does not know.
fn resolved<'a>(reference: &BytesRef<'a>) -> Option<Cow<'a, str>> {
    if reference.is_char_ref() {
        let c = reference.resolve_char_ref().ok()??;
        return Some(Cow::Owned(c.to_string()));
    }
    let name = reference.decode().ok()?;
    quick_xml::escape::resolve_predefined_entity(&name).map(Cow::Borrowed)
}

/// `text` without the XML white space around it (object_store's reader
/// trims it).
fn trimmed(text: &str) -> &str {
    text.trim_matches([' ', '\t', '\r', '\n'])
}

/// Whether an entry with these keys is one object_store takes: exactly one
/// key, decoded, that [`Path::parse`] accepts as it stands and trimmed.
fn parses(keys: &[Option<String>]) -> bool {
    match keys {
        [Some(key)] => Path::parse(key).is_ok() && Path::parse(trimmed(key)).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(uri: &str) -> Option<Asked> {
        Asked::of(&Method::GET, &uri.parse().expect("a URI"))
    }

    fn s3_page(keys: &[&str], next: Option<&str>) -> String {
        let mut page = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>",
        );
        for key in keys {
            page += &format!(
                "<Contents><Key>{key}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><Size>1</Size></Contents>"
            );
        }
        if let Some(next) = next {
            page += &format!("<NextContinuationToken>{next}</NextContinuationToken>");
        }
        page + "</ListBucketResult>"
    }

    fn checked(asked: &Asked, page: &str) -> Result<String, Refusal> {
        asked
            .checked(Bytes::from(page.to_owned()))
            .map(|b| String::from_utf8(b.to_vec()).expect("utf-8"))
    }

    #[test]
    fn listing_requests_are_told_from_others() {
        let s3 = asked("http://h/b?list-type=2&prefix=repo%2Flocks%2F").expect("S3 listing");
        assert!(std::ptr::eq(s3.dialect, &S3));
        assert_eq!(s3.token, None);
        let next = asked("http://h/b?continuation-token=a%2Bb%3D&list-type=2").expect("page 2");
        assert_eq!(next.token.as_deref(), Some("a+b="));
        let azure =
            asked("http://h/acct/c?restype=container&comp=list&marker=2%21x").expect("Azure");
        assert!(std::ptr::eq(azure.dialect, &AZURE));
        assert_eq!(azure.token.as_deref(), Some("2!x"));
        assert!(asked("http://h/b/repo/locks/abc").is_none());
        assert!(asked("http://h/b?uploads").is_none());
        let put = Asked::of(
            &Method::PUT,
            &"http://h/b?list-type=2".parse().expect("URI"),
        );
        assert!(put.is_none());
    }

    #[test]
    fn keys_object_store_refuses_are_dropped_and_every_other_byte_kept() {
        let asked = asked("http://h/b?list-type=2").expect("listing");
        let good = ["repo/locks/aa", "repo/locks/b&amp;c"];
        let odd = [
            "repo/locks//x",
            "repo/locks/../x",
            "repo/locks/./x",
            "repo/locks/\u{1}x",
            "repo/locks/&#x7;x",
            "repo/locks/&#10;x",
            "repo/locks/&unknown;x",
            " ..",
        ];
        let mut all: Vec<&str> = odd.to_vec();
        all.insert(3, good[0]);
        all.push(good[1]);
        let page = s3_page(&all, None);
        assert_eq!(checked(&asked, &page).expect("kept"), s3_page(&good, None));
        // Nothing to drop: the very same bytes.
        let clean = s3_page(&good, Some("t"));
        assert_eq!(checked(&asked, &clean).expect("kept"), clean);
    }

    #[test]
    fn entries_without_exactly_one_key_are_dropped() {
        let asked = asked("http://h/b?list-type=2").expect("listing");
        let page = "<ListBucketResult><Contents/><Contents><Size>1</Size></Contents><Contents><Key>a</Key><Key>b</Key></Contents><Contents><Key>ok</Key></Contents></ListBucketResult>";
        assert_eq!(
            checked(&asked, page).expect("kept"),
            "<ListBucketResult><Contents><Key>ok</Key></Contents></ListBucketResult>"
        );
    }

    #[test]
    fn azure_blobs_are_checked_by_name() {
        let asked = asked("http://h/a/c?restype=container&comp=list").expect("listing");
        let blob = |name: &str| {
            format!(
                "<Blob><Name>{name}</Name><Properties><Content-Length>1</Content-Length></Properties></Blob>"
            )
        };
        let page = |names: &[&str]| {
            let blobs: String = names.iter().map(|n| blob(n)).collect();
            format!(
                "<EnumerationResults ServiceEndpoint=\"x\"><Blobs>{blobs}</Blobs><NextMarker /></EnumerationResults>"
            )
        };
        assert_eq!(
            checked(&asked, &page(&["r/locks/a", "r/locks//b", "r/locks/c"])).expect("kept"),
            page(&["r/locks/a", "r/locks/c"])
        );
    }

    #[test]
    fn a_page_that_repeats_its_token_is_refused() {
        let first = asked("http://h/b?list-type=2").expect("listing");
        assert!(checked(&first, &s3_page(&["a"], Some("T1"))).is_ok());
        let again = asked("http://h/b?list-type=2&continuation-token=T1").expect("page 2");
        assert!(matches!(
            checked(&again, &s3_page(&["a"], Some("T1"))),
            Err(Refusal::RepeatedToken)
        ));
        assert!(checked(&again, &s3_page(&["a"], Some("T2"))).is_ok());
        assert!(checked(&again, &s3_page(&["a"], None)).is_ok());
        // Compared as object_store reads it: decoded and trimmed.
        let entity = asked("http://h/b?list-type=2&continuation-token=a%26b").expect("page");
        assert!(checked(&entity, &s3_page(&[], Some(" a&amp;b\n"))).is_err());
        let azure = asked("http://h/a/c?restype=container&comp=list&marker=M").expect("Azure");
        let page = "<EnumerationResults><Blobs/><NextMarker>M</NextMarker></EnumerationResults>";
        assert!(matches!(checked(&azure, page), Err(Refusal::RepeatedToken)));
    }

    #[test]
    fn a_malformed_or_deep_page_is_passed_on() {
        let asked = asked("http://h/b?list-type=2").expect("listing");
        for page in ["<ListBucketResult><Contents>", "not xml at all <", ""] {
            assert_eq!(checked(&asked, page).expect("passed on"), page);
        }
        let deep = format!(
            "<ListBucketResult>{}<Contents><Key>a//b</Key></Contents>{}</ListBucketResult>",
            "<x>".repeat(10_000),
            "</x>".repeat(10_000)
        );
        assert_eq!(checked(&asked, &deep).expect("deep"), deep);
    }
}
