//! Repository chores (`cargo xtask <task>`).

fn main() {}
