//! Allocates memory without end in `evaluate`: the host must stop it at its
//! memory limit.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, _verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}
