//! Reads the WASI wall clock, so the component imports `wasi:clocks`: the host
//! must refuse it at load, naming the import and the contract's clock.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    let now = std::time::SystemTime::now();
    std::hint::black_box(now);
    Ok(verdicts)
}
