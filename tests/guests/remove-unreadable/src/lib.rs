//! Keeps every lock but judges every unreadable lock file stale, which no
//! host may act on.

misbehave::policy!();

fn evaluate(
    request: &EvaluateRequest,
    mut verdicts: Vec<Verdict>,
) -> Result<Vec<Verdict>, PolicyError> {
    for verdict in verdicts.iter_mut().skip(request.locks.len()) {
        verdict.action = Action::Remove;
        verdict.rule = "remove-unreadable".into();
    }
    Ok(verdicts)
}
