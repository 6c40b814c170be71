//! The `agent` command-line program.

fn main() {}
