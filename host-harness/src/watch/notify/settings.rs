//! The `notify` tables of the watch configuration: where events go (a
//! webhook, a command), how hard to try, and when the events that need a
//! threshold fire. Checked at load, so a typo fails the start, not the first
//! delivery.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::event::EventKind;
use crate::files::{ReadError, read_regular_file};
use crate::limits;
use crate::text::escape;
use crate::time::parse_duration;

/// Default time one delivery attempt may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default retries of a webhook after the first attempt.
pub const DEFAULT_RETRIES: u32 = 3;
/// The most retries a webhook may be given.
pub const MAX_RETRIES: u32 = 10;
/// Default age from which a kept lock's holder is reported as holding it long.
pub const DEFAULT_HELD_LONGER_THAN: Duration = Duration::from_secs(6 * 3600);
/// Default consecutive failed checks that make `checks_failing` fire.
pub const DEFAULT_FAILING_AFTER: u32 = 3;

/// Why a `notify` table is refused; never more of a webhook's URL than its
/// scheme and host, nor anything of its token.
#[derive(Debug, thiserror::Error)]
pub enum NotifyProblem {
    /// A duration that is not one, or zero.
    #[error("{key} `{}` is not a positive duration", escape(.text))]
    Duration {
        /// The key.
        key: &'static str,
        /// What was written.
        text: String,
    },
    /// The webhook is no URL.
    #[error("webhook is not a URL (http://HOST/PATH or https://HOST/PATH)")]
    NotUrl,
    /// The webhook's scheme is neither http nor https.
    #[error("webhook must be an http:// or https:// URL")]
    Scheme,
    /// The webhook names no host.
    #[error("webhook has no host")]
    NoHost,
    /// The webhook's URL holds `user:password@`.
    #[error(
        "webhook must not hold credentials (user:password@); put a bearer token in webhook_token_file"
    )]
    Credentials,
    /// A token file, but no webhook.
    #[error("webhook_token_file without a webhook")]
    TokenWithoutWebhook,
    /// The token file cannot be used.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The command is blank.
    #[error("command is empty")]
    EmptyCommand,
    /// Too many retries.
    #[error("retries {0} is more than {MAX_RETRIES}")]
    Retries(u32),
    /// `failing_after = 0`.
    #[error("failing_after must be at least 1")]
    FailingAfter,
}

/// Why a webhook's token file cannot be used; names the file, never its
/// content.
#[derive(Debug, thiserror::Error)]
#[error("webhook_token_file {}: {problem}", escape(&.file.display().to_string()))]
pub struct TokenError {
    /// The file.
    pub file: PathBuf,
    /// What is wrong with it.
    pub problem: TokenProblem,
}

/// What is wrong with a token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenProblem {
    /// It cannot be read (within [`limits::WEBHOOK_TOKEN`]).
    #[error("it {0}")]
    Read(#[from] ReadError),
    /// It is not UTF-8.
    #[error("it is not text")]
    NotText,
    /// It holds only white space.
    #[error("it is empty")]
    Empty,
    /// It is not one header value.
    #[error("the token must be one line of visible ASCII characters")]
    NotOneLine,
}

/// A `[notify]` table (global) or a repository's `notify = { ... }`, as
/// written. A repository's table replaces the global one whole.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// A URL to POST each event to (http or https, no `user:pass@`).
    pub webhook: Option<String>,
    /// A file holding a bearer token for the webhook (re-read at each
    /// delivery, so a rotated secret is picked up).
    pub webhook_token_file: Option<PathBuf>,
    /// A shell command run for each event, the event's JSON on its stdin.
    pub command: Option<String>,
    /// How long one delivery attempt may take (default 10s).
    pub timeout: Option<String>,
    /// Webhook retries after a connection error, a 5xx or a 429 (default 3).
    pub retries: Option<u32>,
    /// `lock_held_long` fires for a kept lock whose holder has held locks
    /// for longer than this (default 6h).
    pub held_longer_than: Option<String>,
    /// `checks_failing` fires when this many checks in a row failed
    /// (default 3).
    pub failing_after: Option<u32>,
    /// The events to send (default: all). Log lines are written for all.
    pub events: Option<Vec<EventKind>>,
}

/// A webhook, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Webhook {
    /// The URL (may hold a secret in its path or query: never printed).
    pub url: String,
    /// `scheme://host[:port]`: all of the URL a message ever shows.
    pub shown: String,
    /// Where the bearer token is, if any.
    pub token_file: Option<PathBuf>,
}

/// Notification settings, checked; [`Default`] is no sinks and the default
/// thresholds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    /// The webhook, if any.
    pub webhook: Option<Webhook>,
    /// The hook command, if any.
    pub command: Option<String>,
    /// How long one delivery attempt may take.
    pub timeout: Duration,
    /// Webhook retries after the first attempt.
    pub retries: u32,
    /// The holding time from which `lock_held_long` fires.
    pub held_longer_than: Duration,
    /// Consecutive failed checks from which `checks_failing` fires.
    pub failing_after: u32,
    /// The events sent to the sinks.
    pub events: BTreeSet<EventKind>,
}

impl Default for NotifySettings {
    fn default() -> Self {
        NotifySettings {
            webhook: None,
            command: None,
            timeout: DEFAULT_TIMEOUT,
            retries: DEFAULT_RETRIES,
            held_longer_than: DEFAULT_HELD_LONGER_THAN,
            failing_after: DEFAULT_FAILING_AFTER,
            events: EventKind::ALL.into_iter().collect(),
        }
    }
}

impl NotifySettings {
    /// True when events go somewhere besides the log.
    pub fn has_sinks(&self) -> bool {
        self.webhook.is_some() || self.command.is_some()
    }
}

impl NotifyConfig {
    /// Checks the table: a webhook URL of scheme http or https without
    /// credentials, a readable token file, positive durations, bounded
    /// retries. Messages never show more of the URL than scheme and host,
    /// nor anything of the token.
    pub fn settings(&self) -> Result<NotifySettings, NotifyProblem> {
        let defaults = NotifySettings::default();
        let duration = |key: &'static str, text: &Option<String>, default: Duration| match text {
            Some(text) => parse_duration(text)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| NotifyProblem::Duration {
                    key,
                    text: text.clone(),
                }),
            None => Ok(default),
        };
        let webhook = match &self.webhook {
            Some(url) => Some(Webhook {
                shown: check_url(url)?,
                url: url.clone(),
                token_file: self.webhook_token_file.clone(),
            }),
            None if self.webhook_token_file.is_some() => {
                return Err(NotifyProblem::TokenWithoutWebhook);
            }
            None => None,
        };
        if let Some(file) = &self.webhook_token_file {
            read_token(file)?;
        }
        if self.command.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return Err(NotifyProblem::EmptyCommand);
        }
        let retries = self.retries.unwrap_or(defaults.retries);
        if retries > MAX_RETRIES {
            return Err(NotifyProblem::Retries(retries));
        }
        let failing_after = self.failing_after.unwrap_or(defaults.failing_after);
        if failing_after == 0 {
            return Err(NotifyProblem::FailingAfter);
        }
        Ok(NotifySettings {
            webhook,
            command: self.command.clone(),
            timeout: duration("timeout", &self.timeout, defaults.timeout)?,
            retries,
            held_longer_than: duration(
                "held_longer_than",
                &self.held_longer_than,
                defaults.held_longer_than,
            )?,
            failing_after,
            events: match &self.events {
                Some(events) => events.iter().copied().collect(),
                None => defaults.events,
            },
        })
    }
}

/// Checks a webhook URL; returns the part that may be shown,
/// `scheme://host[:port]`.
fn check_url(url: &str) -> Result<String, NotifyProblem> {
    let uri: ureq::http::Uri = url.parse().map_err(|_| NotifyProblem::NotUrl)?;
    let scheme = uri.scheme_str().unwrap_or_default();
    if scheme != "http" && scheme != "https" {
        return Err(NotifyProblem::Scheme);
    }
    let authority = uri.authority().ok_or(NotifyProblem::NoHost)?;
    if authority.as_str().contains('@') {
        return Err(NotifyProblem::Credentials);
    }
    if authority.host().is_empty() {
        return Err(NotifyProblem::NoHost);
    }
    Ok(format!("{scheme}://{}", escape(authority.as_str())))
}

/// Reads the bearer token in `file`: a regular file of at most
/// [`limits::WEBHOOK_TOKEN`] bytes, one line of visible ASCII (a header
/// value). Errors name the file, never its content.
pub fn read_token(file: &Path) -> Result<String, TokenError> {
    let fail = |problem: TokenProblem| TokenError {
        file: file.to_owned(),
        problem,
    };
    let bytes = read_regular_file(file, limits::WEBHOOK_TOKEN).map_err(|e| fail(e.into()))?;
    let text = String::from_utf8(bytes).map_err(|_| fail(TokenProblem::NotText))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(fail(TokenProblem::Empty));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(fail(TokenProblem::NotOneLine));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<NotifySettings, String> {
        toml::from_str::<NotifyConfig>(text)
            .map_err(|e| e.message().to_owned())?
            .settings()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_every_key() {
        assert_eq!(parse("").expect("empty"), NotifySettings::default());
        let dir = tempfile::tempdir().expect("temp dir");
        let token = dir.path().join("token");
        std::fs::write(&token, "tok-123\n").expect("write");
        let s = parse(&format!(
            "webhook = \"https://hooks.example.com/T0/B0/SECRETPATH?k=SECRETQUERY\"\n\
             webhook_token_file = \"{}\"\ncommand = \"cat > /tmp/x\"\ntimeout = \"2s\"\n\
             retries = 0\nheld_longer_than = \"90m\"\nfailing_after = 5\n\
             events = [\"lock_removed\", \"checks_failing\"]\n",
            token.display()
        ))
        .expect("valid");
        let hook = s.webhook.expect("webhook");
        assert_eq!(hook.shown, "https://hooks.example.com");
        assert_eq!(read_token(&token).expect("token"), "tok-123");
        assert_eq!(s.timeout, Duration::from_secs(2));
        assert_eq!(s.retries, 0);
        assert_eq!(s.held_longer_than, Duration::from_secs(5400));
        assert_eq!(s.failing_after, 5);
        assert_eq!(
            s.events,
            [EventKind::LockRemoved, EventKind::ChecksFailing].into()
        );
    }

    #[test]
    fn refuses_bad_values_without_showing_secrets() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).expect("mkfifo");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").expect("write");
        let bad_token = dir.path().join("bad");
        std::fs::write(&bad_token, "SECRET-TOKEN\r\nX-Injected: 1").expect("write");
        for (text, says) in [
            ("webhook = \"ftp://h/x\"", "http:// or https://"),
            ("webhook = \"https://user:SECRET@h/x\"", "credentials"),
            ("webhook = \"not a url SECRET\"", "not a URL"),
            ("webhook = \"/relative/SECRET\"", "http:// or https://"),
            ("webhook_token_file = \"/t\"", "without a webhook"),
            ("timeout = \"0s\"", "timeout"),
            ("held_longer_than = \"soon\"", "held_longer_than"),
            ("retries = 11", "retries"),
            ("failing_after = 0", "failing_after"),
            ("command = \" \"", "command is empty"),
            ("events = [\"lock_rmoved\"]", "unknown variant"),
            ("hook = \"x\"", "unknown field"),
            (
                &format!(
                    "webhook = \"http://h\"\nwebhook_token_file = \"{}\"",
                    fifo.display()
                ),
                "a FIFO",
            ),
            (
                &format!(
                    "webhook = \"http://h\"\nwebhook_token_file = \"{}\"",
                    empty.display()
                ),
                "empty",
            ),
            (
                &format!(
                    "webhook = \"http://h\"\nwebhook_token_file = \"{}\"",
                    bad_token.display()
                ),
                "one line",
            ),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
            assert!(!err.contains("SECRET"), "{text}: {err}");
        }
    }
}
