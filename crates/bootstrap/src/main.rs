//! The `agent` command-line program.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match bootstrap::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(bootstrap::cli::EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agent: cannot start the async runtime: {e}");
            return ExitCode::from(bootstrap::cli::EXIT_RUN_ERROR);
        }
    };
    runtime.block_on(bootstrap::cli::run(cli))
}
