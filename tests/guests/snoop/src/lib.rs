//! Looks for everything a policy could learn about its host through the WASI
//! the sandbox links, and reports it as its error: it must all be empty.

misbehave::policy!();

fn evaluate(_request: &EvaluateRequest, _verdicts: Verdicts) -> Result<Verdicts, PolicyError> {
    let env = std::env::vars().count();
    let args = std::env::args().count();
    let cwd = std::env::current_dir().is_ok();
    println!("anyone there?");
    Err(PolicyError::Failed(format!(
        "env vars: {env}, args: {args}, cwd: {cwd}"
    )))
}
