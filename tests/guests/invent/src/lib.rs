//! Judges stale an unreadable file nobody asked about (one unreadable verdict
//! more than the request has unreadable files): the host must refuse the
//! answer.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, mut verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    verdicts.unreadable.push(Verdict {
        action: Action::Remove,
        rule: "invented".into(),
        reason: "a file nobody asked about".into(),
    });
    Ok(verdicts)
}
