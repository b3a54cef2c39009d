//! Returns an error from `evaluate`: the host must report it and remove
//! nothing.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, _verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    Err(PolicyError::Failed("the policy gave up on purpose".into()))
}
