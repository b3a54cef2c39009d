//! Judges stale a lock nobody asked about: the host must refuse the answer.

misbehave::policy!();

fn evaluate(
    _request: &EvaluateRequest,
    mut verdicts: Vec<Verdict>,
) -> Result<Vec<Verdict>, PolicyError> {
    verdicts.push(Verdict {
        id: "f".repeat(64),
        action: Action::Remove,
        rule: "invented".into(),
        reason: "an id nobody asked about".into(),
    });
    Ok(verdicts)
}
