//! Panics in `evaluate`: the host must report the panic message as a crash,
//! remove nothing, and keep working.

misbehave::policy!();

fn evaluate(
    _request: &EvaluateRequest,
    _verdicts: Vec<Verdict>,
) -> Result<Vec<Verdict>, PolicyError> {
    panic!("policy bug: index out of range");
}
