//! The `agent` command-line program.
//!
//! Before anything else (and before any thread starts), the process hardens itself
//! (`ai_host::harden_process`): non-dumpable, so no command it runs can read the API
//! key from `/proc/<pid>/environ` or its memory; without `CAP_SYS_PTRACE`,
//! `CAP_SYS_ADMIN` and `CAP_PERFMON`, so that holds when it runs as root; and a child subreaper, so a command's escaped
//! processes stay in its tree and are killed when the call ends.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Single-threaded here: capabilities are per thread and inherited by the threads
    // and processes started later.
    let hardening = ai_host::harden_process();
    if cfg!(target_os = "linux") {
        for (step, outcome) in [
            ("make the process non-dumpable", &hardening.non_dumpable),
            (
                "drop CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_PERFMON",
                &hardening.capabilities_dropped,
            ),
            ("become a child subreaper", &hardening.subreaper),
        ] {
            if let Err(e) = outcome {
                eprintln!("agent: warning: could not {step}: {e}");
            }
        }
    }
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
