//! What a policy logs during an evaluation.

/// The level of a message a policy logs.
pub use crate::contract::log::Level as LogLevel;

/// One message a policy logged during an evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// How important it is.
    pub level: LogLevel,
    /// What the policy said (truncated to a sane length).
    pub message: String,
}

impl LogLine {
    /// Logs this line at its own level through `tracing`, naming the policy;
    /// control characters in the message and the name are escaped.
    pub fn emit(&self, policy: &str) {
        let policy = crate::text::escape(policy);
        let message = crate::text::escape(&self.message);
        match self.level {
            LogLevel::Debug => tracing::debug!(%policy, "{message}"),
            LogLevel::Info => tracing::info!(%policy, "{message}"),
            LogLevel::Warn => tracing::warn!(%policy, "{message}"),
            LogLevel::Error => tracing::error!(%policy, "{message}"),
        }
    }
}
