//! Answers twice for the first lock: the host must refuse the answer.

misbehave::policy!();

fn evaluate(
    _request: &EvaluateRequest,
    mut verdicts: Vec<Verdict>,
) -> Result<Vec<Verdict>, PolicyError> {
    verdicts.push(verdicts[0].clone());
    Ok(verdicts)
}
