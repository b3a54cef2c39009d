//! Never returns from `evaluate`: the host must stop it at its deadline.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    loop {
        std::hint::black_box(&verdicts);
    }
}
