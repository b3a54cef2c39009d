//! Panics in `evaluate`: the host must report the panic message as a crash,
//! remove nothing, and keep working.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, _verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    panic!("policy bug: index out of range");
}
