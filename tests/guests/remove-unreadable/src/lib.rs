//! Keeps every lock but judges every unreadable lock file stale: the host
//! acts on it only for a file it holds at least 30 minutes of age evidence
//! for (`stored-at` or `first-seen`), and otherwise refuses the answer.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, mut verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    for verdict in &mut verdicts.unreadable {
        verdict.action = Action::Remove;
        verdict.rule = "remove-unreadable".into();
    }
    Ok(verdicts)
}
