//! Reads `/etc/passwd`, so the component imports `wasi:filesystem`: the host
//! must refuse it at load, naming the import.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    let secret = std::fs::read("/etc/passwd").map(|b| b.len());
    std::hint::black_box(secret.ok());
    Ok(verdicts)
}
