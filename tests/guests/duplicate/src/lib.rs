//! Answers with one lock verdict more than the request has locks, as if it
//! judged one lock twice: the host must refuse the answer.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, mut verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    verdicts.locks.push(Verdict {
        action: Action::Keep,
        rule: "misbehave".into(),
        reason: "a second verdict on the last lock".into(),
    });
    Ok(verdicts)
}
