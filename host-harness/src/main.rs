//! The `lockwarden` command. Thin: parse, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(error) => {
            // The chain may quote a policy's own words or a file's content:
            // no control character reaches the terminal.
            eprintln!(
                "lockwarden: {}",
                lockwarden::text::escape(&format!("{error:#}"))
            );
            ExitCode::from(cli::exit_code(&error))
        }
    }
}
