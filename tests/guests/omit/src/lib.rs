//! Leaves the last lock without a verdict (one verdict fewer than the
//! request has locks): the host must refuse the answer.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, mut verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    verdicts.locks.pop();
    Ok(verdicts)
}
