//! What the store's benches share: the stores they run on.

use agent_store::Store;
use agent_testing::postgres::TestPostgres;
use criterion::Criterion;

/// Runs `bench` on a SQLite store in a temporary folder, then on a real
/// Postgres when Debian's server is installed (said and skipped otherwise),
/// each named (`sqlite`, `postgres`), on a one-worker runtime; then prints
/// criterion's summary. `name` is the bench's, for the skip line.
pub(crate) fn on_each_store(
    name: &str,
    mut bench: impl FnMut(&mut Criterion, &str, &tokio::runtime::Runtime, &Store),
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut c = Criterion::default().configure_from_args();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = runtime
        .block_on(Store::open_sqlite(&dir.path().join("bench.db")))
        .unwrap();
    bench(&mut c, "sqlite", &runtime, &sqlite);
    match TestPostgres::start() {
        Ok(postgres) => {
            postgres.create_database("bench").unwrap();
            let store = runtime
                .block_on(Store::open(&postgres.url("bench")))
                .unwrap();
            bench(&mut c, "postgres", &runtime, &store);
            runtime.block_on(store.close());
        }
        Err(e) => eprintln!("{name}/postgres skipped: {e}"),
    }
    c.final_summary();
}
