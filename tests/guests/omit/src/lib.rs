//! Leaves the last input without a verdict: the host must refuse the answer.

misbehave::policy!();

fn evaluate(
    _request: &EvaluateRequest,
    mut verdicts: Vec<Verdict>,
) -> Result<Vec<Verdict>, PolicyError> {
    verdicts.pop();
    Ok(verdicts)
}
