//! rclone remotes as written after `rclone:` (`name:path`, `:type:path`,
//! `name,option=value:path`, `:type,option='value':path`), read by rclone's
//! own grammar, and what of them may be shown.
//!
//! What is a secret is decided here, by allowlist: the remote's name (or
//! `:type`), its options' keys and its path may be shown; **every** option
//! value is hidden, whatever its key (`headers`, `sas_url`, `pass`, and
//! whatever option a backend adds next). The values of the options given to
//! rclone itself (`LOCKWARDEN_RCLONE_ARGS`: `--opt VALUE`, `--opt=VALUE`)
//! are hidden the same way in what rclone prints.
//!
//! rclone's grammar: the name runs to the first `,` or `:` (a `/` or `\`
//! before them makes the whole string a local path); options are
//! `key=value` or a bare `key` (true), separated by `,`; a value is either
//! unquoted, ending at the next `,` or `:`, or quoted in `'...'` or
//! `"..."`, where a doubled quote is one quote character and the closing
//! quote must be followed by `,` or `:`; the path starts after the `:` that
//! ends the option list.

use crate::repo::backend::location_text::redact_userinfo;

/// What replaces a hidden value.
const HIDDEN: &str = "***";
/// Parts of a value this long or longer are hidden on their own too (a
/// backend may print one query parameter of a URL, one header of a list).
const MIN_PART: usize = 8;

/// A remote, read as rclone reads it.
#[derive(Debug, PartialEq, Eq)]
enum Parsed<'a> {
    /// No remote: rclone takes the whole string for a local path.
    Local,
    /// A remote and the path after it.
    Remote {
        /// `name` (configured) or `:type` (on the fly).
        name: &'a str,
        /// Its options, in order.
        options: Vec<Opt<'a>>,
        /// What follows the option list.
        path: &'a str,
    },
}

/// One `key` or `key=value` of a remote.
#[derive(Debug, PartialEq, Eq)]
struct Opt<'a> {
    key: &'a str,
    /// The value as written (quotes included), with its quote character;
    /// `None` for a bare key.
    value: Option<(&'a str, Option<char>)>,
}

impl Opt<'_> {
    /// Every form in which the value may show up: as written, between its
    /// quotes, unquoted (a doubled quote made one), and as Go's `%q` prints
    /// each of those (rclone quotes remotes that way in its messages).
    fn value_forms(&self) -> Vec<String> {
        let Some((written, quote)) = self.value else {
            return Vec::new();
        };
        let mut forms = vec![written.to_owned()];
        if let Some(q) = quote {
            let inner = &written[1..written.len() - 1];
            forms.push(inner.to_owned());
            forms.push(inner.replace(&format!("{q}{q}"), &q.to_string()));
        }
        let escaped: Vec<String> = forms.iter().map(|f| go_escaped(f)).collect();
        forms.extend(escaped);
        forms
    }
}

/// Why a remote is not one rclone can read. Quotes nothing of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// The name is empty or holds a character no remote name has.
    #[error("its remote name is empty or holds characters rclone does not allow")]
    Name,
    /// An option's key is empty or not made of letters, digits and `_`.
    #[error("an option's name is empty or holds characters rclone does not allow")]
    Key,
    /// A quoted value never ends.
    #[error("a quoted option value is never closed")]
    Unclosed,
    /// A closing quote is followed by something other than `,` or `:`.
    #[error("a closing quote is followed by something other than `,` or `:`")]
    AfterQuote,
    /// The option list never ends with a `:`.
    #[error("the options are not followed by `:` and a path")]
    NoPath,
}

/// Reads `remote` as rclone does.
fn parse(remote: &str) -> Result<Parsed<'_>, Unreadable> {
    if !remote.contains(':') {
        return Ok(Parsed::Local);
    }
    let skip = usize::from(remote.starts_with(':'));
    let Some(end) = remote[skip..].find([':', ',', '/', '\\']).map(|i| skip + i) else {
        return Err(Unreadable::NoPath);
    };
    let name = &remote[..end];
    match remote[end..].chars().next() {
        Some('/' | '\\') if skip == 0 => return Ok(Parsed::Local),
        Some('/' | '\\') => return Err(Unreadable::Name),
        _ => {}
    }
    if !is_name(&name[skip..]) {
        return Err(Unreadable::Name);
    }
    let mut options = Vec::new();
    let mut rest = &remote[end..];
    while let Some(after) = rest.strip_prefix(',') {
        let (option, next) = parse_option(after)?;
        options.push(option);
        rest = next;
    }
    let path = rest.strip_prefix(':').ok_or(Unreadable::NoPath)?;
    Ok(Parsed::Remote {
        name,
        options,
        path,
    })
}

/// A remote's name: letters and digits of any script, `_`, `-`, `.`, `+`,
/// `@` and spaces (what rclone allows, in its older and newer versions).
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '@' | ' '))
}

/// The option that starts `text`, and what follows it (from the `,` or `:`
/// that ends it).
fn parse_option(text: &str) -> Result<(Opt<'_>, &str), Unreadable> {
    let key_end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .ok_or(Unreadable::NoPath)?;
    let key = &text[..key_end];
    if key.is_empty() {
        return Err(Unreadable::Key);
    }
    let after_key = &text[key_end..];
    let Some(value_text) = after_key.strip_prefix('=') else {
        return match after_key.chars().next() {
            Some(',' | ':') => Ok((Opt { key, value: None }, after_key)),
            _ => Err(Unreadable::Key),
        };
    };
    let (len, quote) = value_len(value_text)?;
    let value = Some((&value_text[..len], quote));
    Ok((Opt { key, value }, &value_text[len..]))
}

/// The length of the value that starts `text` (quotes included), and its
/// quote character, if quoted.
fn value_len(text: &str) -> Result<(usize, Option<char>), Unreadable> {
    let quote = text.chars().next().filter(|c| matches!(c, '\'' | '"'));
    let Some(q) = quote else {
        let len = text.find([',', ':']).ok_or(Unreadable::NoPath)?;
        return Ok((len, None));
    };
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if c != q {
            continue;
        }
        match chars.peek() {
            Some(&(_, next)) if next == q => {
                chars.next();
            }
            Some((_, ',' | ':')) => return Ok((i + 1, quote)),
            _ => return Err(Unreadable::AfterQuote),
        }
    }
    Err(Unreadable::Unclosed)
}

/// Whether `path` may hold the rest of an option value: an unquoted value
/// ends at the first `:`, so `endpoint=http://host:9000,secret=S:bucket`
/// leaves `//host:9000,secret=S:bucket` as the path. A path after an
/// unquoted value that starts with `//` or holds a `=` or `,` is hidden
/// whole (hiding a real path is the safe side).
fn holds_values(options: &[Opt<'_>], path: &str) -> bool {
    let unquoted = options.iter().any(|o| matches!(o.value, Some((_, None))));
    unquoted && (path.starts_with("//") || path.contains(['=', ',']))
}

/// Checks that rclone can read `remote` (what follows `rclone:`).
pub fn check(remote: &str) -> Result<(), Unreadable> {
    parse(remote).map(|_| ())
}

/// `remote` as it may be shown: the name or type, the options' keys with
/// every value `***`, and the path (any `user:password@` in it hidden). A
/// remote rclone cannot read shows as `***`.
pub fn shown(remote: &str) -> String {
    match parse(remote) {
        Ok(Parsed::Local) => redact_userinfo(remote),
        Ok(Parsed::Remote {
            name,
            options,
            path,
        }) => {
            let mut out = name.to_owned();
            for option in &options {
                out.push(',');
                out.push_str(option.key);
                if option.value.is_some() {
                    out.push('=');
                    out.push_str(HIDDEN);
                }
            }
            if holds_values(&options, path) {
                format!("{out}:{HIDDEN}")
            } else {
                format!("{out}:{}", redact_userinfo(path))
            }
        }
        Err(_) => HIDDEN.into(),
    }
}

/// A whole `rclone:REMOTE` location as it may be shown ([`shown`]); the
/// rclone scheme's `redact`.
pub fn redact_location(location: &str) -> String {
    let remote = location.strip_prefix("rclone:").unwrap_or(location);
    format!("rclone:{}", shown(remote))
}

/// Hides, in what rclone prints, the remote's secrets and those of its
/// arguments.
#[derive(Debug, Clone)]
pub struct Scrubber {
    /// Texts to replace and their replacements, longest first.
    replacements: Vec<(String, String)>,
}

impl Scrubber {
    /// The scrubber for `remote`, served by a command whose words are
    /// `words`: the remote as written (and as `%q` prints it) becomes its
    /// shown form; every option value of the remote, in every form it may
    /// take ([`Opt::value_forms`]), and every value given to an option of
    /// the command (`--opt VALUE`, `--opt=VALUE`) becomes `***`, and so do
    /// their parts of at least 8 characters. Values of one character are
    /// left (hiding every `1` would make messages unreadable, and hides
    /// nothing). A remote rclone cannot read is hidden whole, and so are its
    /// parts.
    pub fn new(remote: &str, words: &[String]) -> Scrubber {
        let shown = shown(remote);
        let mut replacements = vec![
            (remote.to_owned(), shown.clone()),
            (go_escaped(remote), go_escaped(&shown)),
        ];
        let mut hidden: Vec<String> = match parse(remote) {
            Ok(Parsed::Remote { options, path, .. }) => {
                let mut values: Vec<String> = options.iter().flat_map(Opt::value_forms).collect();
                if holds_values(&options, path) {
                    values.push(path.to_owned());
                    values.push(go_escaped(path));
                }
                values
            }
            Ok(Parsed::Local) => Vec::new(),
            Err(_) => vec![remote.to_owned()],
        };
        hidden.extend(argument_values(words));
        let parts: Vec<String> = hidden.iter().flat_map(|v| parts(v)).collect();
        hidden.extend(parts);
        replacements.extend(
            hidden
                .into_iter()
                .filter(|v| v.chars().count() > 1)
                .map(|v| (v, HIDDEN.to_owned())),
        );
        replacements.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        replacements.dedup_by(|later, kept| later.0 == kept.0);
        Scrubber { replacements }
    }

    /// `line` with every secret replaced, then any `user:password@` left
    /// hidden too.
    pub fn scrub(&self, line: &str) -> String {
        let mut line = line.to_owned();
        for (from, to) in &self.replacements {
            if line.contains(from.as_str()) {
                line = line.replace(from.as_str(), to);
            }
        }
        redact_userinfo(&line)
    }
}

/// The values given to options among a command's words: `VALUE` of
/// `--opt=VALUE`, and of `--opt VALUE` where `VALUE` does not start with
/// `-` (a flag that takes no value is then followed by a word that is
/// hidden too: hiding more is the safe side).
fn argument_values(words: &[String]) -> Vec<String> {
    let mut values = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let Some(option) = word.strip_prefix("--") else {
            continue;
        };
        match option.split_once('=') {
            Some((_, value)) => values.push(value.to_owned()),
            None => values.extend(
                words
                    .get(i + 1)
                    .filter(|next| !next.starts_with('-'))
                    .cloned(),
            ),
        }
    }
    values
}

/// The parts of `value` between separators (`,` `;` `&` `?` `=` `:` `@` `/`,
/// blanks and quotes) that are at least [`MIN_PART`] characters long.
fn parts(value: &str) -> Vec<String> {
    value
        .split(|c: char| ",;&?=:@/'\"".contains(c) || c.is_whitespace())
        .filter(|part| part.chars().count() >= MIN_PART && *part != value)
        .map(str::to_owned)
        .collect()
}

/// `text` as it appears inside Go's `%q`: `\` and `"` escaped.
fn go_escaped(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests;
