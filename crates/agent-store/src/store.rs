//! Opening a store: the pool, the backend's connection settings, migrations.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AnyPool, Connection, Executor, Row, SqlStr};

use crate::account::AccountStore;
use crate::error::StoreError;
use crate::sql::Job;
use crate::sqlite::SqliteThread;

/// The schema, oldest first: one set for both backends (portable SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "runs", include_str!("../migrations/0001_runs.sql")),
    (2, "server", include_str!("../migrations/0002_server.sql")),
    (3, "alive", include_str!("../migrations/0003_alive.sql")),
    (4, "steps", include_str!("../migrations/0004_steps.sql")),
    (
        5,
        "attempts",
        include_str!("../migrations/0005_attempts.sql"),
    ),
    (6, "leases", include_str!("../migrations/0006_leases.sql")),
    (7, "turns", include_str!("../migrations/0007_turns.sql")),
    (
        8,
        "response_model",
        include_str!("../migrations/0008_response_model.sql"),
    ),
    (9, "running", include_str!("../migrations/0009_running.sql")),
];

/// A run left `running` by a process whose lease ran out (see
/// [`Store::orphaned_runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// Its account.
    pub account_id: String,
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: Option<String>,
    /// The instance that owned it.
    pub owner: String,
    /// What kind of process that was (`serve`, `cli`, `worker`), when it
    /// said.
    pub kind: Option<String>,
    /// The run's generation under that owner.
    pub generation: i64,
    /// Its durable start, as it was saved (`None`: it cannot start again).
    pub start: Option<String>,
}

impl Orphan {
    /// The fence its old owner held.
    pub fn fence(&self) -> crate::Fence {
        crate::Fence {
            owner: self.owner.clone(),
            generation: self.generation,
        }
    }
}

/// Which database a store is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// A SQLite file (WAL journal).
    Sqlite,
    /// A Postgres database.
    Postgres,
}

/// An open store. Cheap to clone (a connection pool, and on SQLite the
/// connection it writes with).
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// The one writer of run records (see `batch`).
    writer: crate::batch::StoreWriter,
    /// Where the statements a run waits for go.
    run_path: RunPath,
}

/// Where the statements a run waits for go: the read of its chat before its
/// turn, its turn, its steps, and the writer's batches, each a [`Job`]. On
/// SQLite that is the SQLite thread (see `sqlite`: one connection of the
/// store's own, each job in one round trip, the jobs that queued meanwhile
/// in one transaction); on Postgres, any of the pool's connections, a
/// statement per round trip.
///
/// SQLite writes one transaction at a time, so more connections writing only
/// wait for each other's locks. And through sqlx every statement is a round
/// trip to a connection's thread, with a wake-up on each side; a connection
/// the pool hands out is tested with one more when it comes back, and its
/// page cache is thrown away whenever another connection wrote. The chat's
/// read goes the same way because the turn after it needs this connection
/// anyway; other reads use the pool, so they never wait for a write.
#[derive(Debug, Clone)]
pub(crate) enum RunPath {
    /// Postgres (and a SQLite database with no file): the pool's connections
    /// write side by side.
    Pool(AnyPool),
    /// SQLite: the thread that owns the run path's connection.
    Thread(SqliteThread),
}

impl RunPath {
    /// Runs `job`: on the SQLite thread, or on one of the pool's connections
    /// (in a transaction when it asks for one); its answer once its writes
    /// are committed.
    pub(crate) async fn run<J: Job>(&self, job: J) -> Result<J::Output, StoreError> {
        match self {
            Self::Pool(pool) => {
                let mut connection = pool.acquire().await?;
                if !J::TRANSACTION {
                    return Ok(job.run(&mut *connection).await?.value);
                }
                let mut transaction = connection.begin().await?;
                let done = job.run(&mut *transaction).await?;
                if done.keep {
                    transaction.commit().await?;
                } else {
                    transaction.rollback().await?;
                }
                Ok(done.value)
            }
            Self::Thread(thread) => thread.run(job).await,
        }
    }

    /// Stops the SQLite thread and closes its connection (nothing for the
    /// pool's: closing the pool closes them).
    async fn close(&self) {
        if let Self::Thread(thread) = self {
            thread.close().await;
        }
    }
}

/// The file of the SQLite database the pool opened (set up by the pool:
/// WAL), or `None` for one with no file (in memory).
async fn sqlite_file(pool: &AnyPool) -> Result<Option<String>, StoreError> {
    let file: Option<String> =
        sqlx::query("SELECT file FROM pragma_database_list WHERE name = 'main'")
            .fetch_optional(pool)
            .await?
            .map(|row| row.try_get("file"))
            .transpose()?;
    Ok(file.filter(|file| !file.is_empty()))
}

impl Store {
    /// Opens the SQLite file at `path` (created with its folder when missing), in
    /// WAL mode, and brings its schema up to date. The file is its user's alone
    /// (`0600`, and a folder it creates `0700`; see [`Store::open_sqlite_in`]).
    pub async fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
        Self::open_sqlite_in(path, false).await
    }

    /// [`Store::open_sqlite`], where `own_folder` says the file's folder is the
    /// store's own (the default data folder): found readable by others, it is
    /// made `0700` too. Database files found looser than `0600` are tightened
    /// either way, with a warning.
    pub async fn open_sqlite_in(path: &Path, own_folder: bool) -> Result<Self, StoreError> {
        crate::files::make_private(path, own_folder)?;
        let path = path
            .to_str()
            .ok_or_else(|| StoreError::InvalidUrl("the SQLite path is not UTF-8".into()))?;
        Self::open(&format!("sqlite://{path}?mode=rwc")).await
    }

    /// Opens `url` (`sqlite://PATH?mode=rwc`, `postgres://...`) and brings its
    /// schema up to date. Errors never quote the URL (it may hold a password).
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            return Err(StoreError::InvalidUrl(
                "expected sqlite://PATH or postgres://...".into(),
            ));
        };
        install_default_drivers();
        let options = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 8,
            })
            .acquire_timeout(Duration::from_secs(10));
        let options = match backend {
            // One writer at a time: wait for the lock instead of failing at once.
            // A local file's connection does not go stale: no ping before each
            // use (a round trip to the connection's thread every time).
            Backend::Sqlite => options.test_before_acquire(false).after_connect(|connection, _| {
                Box::pin(async move {
                    connection
                        .execute("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;")
                        .await?;
                    Ok(())
                })
            }),
            Backend::Postgres => options,
        };
        let pool = options
            .connect(url)
            .await
            .map_err(|e| StoreError::Database(scrub_url(&e.to_string(), url)))?;
        let run_path = match backend {
            Backend::Sqlite => match sqlite_file(&pool).await? {
                Some(file) => RunPath::Thread(SqliteThread::open(&file)?),
                None => RunPath::Pool(pool.clone()),
            },
            Backend::Postgres => RunPath::Pool(pool.clone()),
        };
        let writer = crate::batch::StoreWriter::start(pool.clone(), run_path.clone());
        let store = Self {
            pool,
            backend,
            writer,
            run_path,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the migrations that are not applied yet.
    async fn migrate(&self) -> Result<(), StoreError> {
        let migrations = MIGRATIONS
            .iter()
            .map(|(version, description, sql)| {
                Migration::new(
                    *version,
                    Cow::Borrowed(*description),
                    MigrationType::Simple,
                    SqlStr::from_static(sql),
                    false,
                )
            })
            .collect();
        Migrator::with_migrations(migrations)
            .run(&self.pool)
            .await?;
        Ok(())
    }

    /// The writer that batches run records.
    pub(crate) fn writer(&self) -> &crate::batch::StoreWriter {
        &self.writer
    }

    /// The pool (for the modules that add queries of their own).
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The rows of `account_id`: every read and write goes through it.
    pub fn account(&self, account_id: impl Into<String>) -> AccountStore<'_> {
        AccountStore::new(&self.pool, &self.run_path, account_id.into())
    }

    /// Marks every run `owner` left `running` as `interrupted`; returns how
    /// many.
    pub async fn interrupt_runs_of(&self, owner: &str, now_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE runs SET status = 'interrupted', error = 'the process running it stopped during the run', updated_ms = $1 WHERE owner = $2 AND status = 'running'",
        )
        .bind(now_ms)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Marks `interrupted` the orphan `orphan` (one that cannot or will not
    /// start again), unless another process took it first; `true` when this
    /// call did.
    pub async fn interrupt_orphan(
        &self,
        orphan: &Orphan,
        error: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE runs SET status = 'interrupted', error = $1, updated_ms = $2 WHERE account_id = $3 AND id = $4 AND owner = $5 AND lease_gen = $6 AND status = 'running'",
        )
        .bind(error)
        .bind(now_ms)
        .bind(&orphan.account_id)
        .bind(&orphan.run_id)
        .bind(&orphan.owner)
        .bind(orphan.generation)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Says instance `id` (a process of kind `kind` that runs runs) is alive
    /// until `until_ms`: its lease. A process renews it every few seconds
    /// while it lives; its runs are orphans once it lapses
    /// ([`Store::orphaned_runs`]).
    pub async fn renew_instance(
        &self,
        id: &str,
        kind: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO instances (id, kind, lease_until_ms, started_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET lease_until_ms = excluded.lease_until_ms",
        )
        .bind(id)
        .bind(kind)
        .bind(until_ms)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Ends instance `id`'s lease now (a process that stops cleanly): its runs
    /// still `running` are orphans at once.
    pub async fn release_instance(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM instances WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Whether the owner `owner` of a run holds a lease at `now_ms`. Owners that
    /// are no instance (an engine's fixed name, such as `restate`) count as
    /// alive: they answer for their runs themselves.
    pub async fn owner_alive(&self, owner: &str, now_ms: i64) -> Result<bool, StoreError> {
        if !is_instance_id(owner) {
            return Ok(true);
        }
        let row = sqlx::query("SELECT lease_until_ms FROM instances WHERE id = $1")
            .bind(owner)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => row.try_get::<i64, _>("lease_until_ms")? >= now_ms,
            None => false,
        })
    }

    /// The runs still `running` whose owner holds no lease at `now_ms` (it died,
    /// stopped cleanly, or stalled past its lease), in every account, oldest
    /// first, with their saved starts when they have one. Runs owned by an
    /// engine (`restate`) are never orphans. Instances whose lease lapsed an
    /// hour ago and own nothing are forgotten on the way.
    pub async fn orphaned_runs(&self, now_ms: i64) -> Result<Vec<Orphan>, StoreError> {
        sqlx::query(
            "DELETE FROM instances WHERE lease_until_ms < $1 AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.owner = instances.id AND r.status = 'running')",
        )
        .bind(now_ms - 3_600_000)
        .execute(&self.pool)
        .await?;
        let rows = sqlx::query(
            "SELECT r.account_id, r.id, r.thread_id, r.owner, r.lease_gen, i.kind, s.start FROM runs r LEFT JOIN instances i ON i.id = r.owner LEFT JOIN run_starts s ON s.account_id = r.account_id AND s.run_id = r.id WHERE r.status = 'running' AND (i.id IS NULL OR i.lease_until_ms < $1) ORDER BY r.started_ms",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        let mut runs = Vec::with_capacity(rows.len());
        for row in &rows {
            let owner: String = row.try_get("owner")?;
            if !is_instance_id(&owner) {
                continue;
            }
            runs.push(Orphan {
                account_id: row.try_get("account_id")?,
                run_id: row.try_get("id")?,
                thread_id: row.try_get("thread_id")?,
                kind: row.try_get("kind")?,
                owner,
                generation: row.try_get("lease_gen")?,
                start: row.try_get("start")?,
            });
        }
        Ok(runs)
    }

    /// Makes `owner` the owner of `account`'s run `run_id` under a new
    /// generation when `previous` (its old owner and generation) still holds
    /// it and it is `running`: the new fence for the one caller that takes it
    /// (two processes never both start it again), `None` for the others. A
    /// step the old owner was recording in the same moment is in the store
    /// before this returns (see [`crate::AccountStore::record_step`]).
    pub async fn claim_run(
        &self,
        (account, run_id): (&str, &str),
        previous: &crate::Fence,
        owner: &str,
        now_ms: i64,
    ) -> Result<Option<crate::Fence>, StoreError> {
        let done = sqlx::query(
            "UPDATE runs SET owner = $1, lease_gen = lease_gen + 1, updated_ms = $2 WHERE account_id = $3 AND id = $4 AND owner = $5 AND lease_gen = $6 AND status = 'running'",
        )
        .bind(owner)
        .bind(now_ms)
        .bind(account)
        .bind(run_id)
        .bind(&previous.owner)
        .bind(previous.generation)
        .execute(&self.pool)
        .await?;
        Ok((done.rows_affected() == 1).then(|| crate::Fence {
            owner: owner.to_owned(),
            generation: previous.generation + 1,
        }))
    }

    /// Who redeemed `tag`, if anyone did ([`Store::redeem`]).
    pub async fn redeemed_by(&self, tag: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT holder FROM redemptions WHERE tag = $1")
            .bind(tag)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| row.try_get("holder")).transpose()?)
    }

    /// Redeems `tag` for `holder`, once: `true` when `tag` is new (it is now
    /// `holder`'s) or already `holder`'s (a retry of the same redemption),
    /// `false` when another holder redeemed it first.
    pub async fn redeem(&self, tag: &str, holder: &str, now_ms: i64) -> Result<bool, StoreError> {
        sqlx::query(
            "INSERT INTO redemptions (tag, holder, created_ms) VALUES ($1, $2, $3) ON CONFLICT (tag) DO NOTHING",
        )
        .bind(tag)
        .bind(holder)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT holder FROM redemptions WHERE tag = $1")
            .bind(tag)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<String, _>("holder")? == holder)
    }

    /// The secret named `name`, the same for every server on this store: `fresh`
    /// is stored when there is none yet (the first caller's value wins).
    pub async fn server_key(&self, name: &str, fresh: &str) -> Result<String, StoreError> {
        sqlx::query(
            "INSERT INTO server_keys (name, secret, created_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(fresh)
        .bind(crate::recorder::now_ms())
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT secret FROM server_keys WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("secret")?)
    }

    /// Marks approval `tag` used until `expires_s` (Unix seconds): `true` the
    /// first time, `false` when it was used before (by any server on this store).
    /// Forgets used approvals that expired before `now_s`.
    pub async fn use_approval(
        &self,
        tag: &str,
        expires_s: u64,
        now_s: u64,
    ) -> Result<bool, StoreError> {
        let seconds = |s: u64| i64::try_from(s).unwrap_or(i64::MAX);
        sqlx::query("DELETE FROM used_approvals WHERE expires_s < $1")
            .bind(seconds(now_s))
            .execute(&self.pool)
            .await?;
        let done = sqlx::query(
            "INSERT INTO used_approvals (tag, expires_s) VALUES ($1, $2) ON CONFLICT (tag) DO NOTHING",
        )
        .bind(tag)
        .bind(seconds(expires_s))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes threads, runs, events and paused runs last touched before
    /// `before_ms`, and usage facts older than `usage_before_ms`, in every account;
    /// returns the rows deleted.
    pub async fn purge(&self, before_ms: i64, usage_before_ms: i64) -> Result<u64, StoreError> {
        let mut transaction = self.pool.begin().await?;
        let mut deleted = 0;
        for sql in [
            "DELETE FROM run_events WHERE EXISTS (SELECT 1 FROM runs r WHERE r.account_id = run_events.account_id AND r.id = run_events.run_id AND r.updated_ms < $1 AND r.status <> 'running')",
            "DELETE FROM paused_runs WHERE created_ms < $1",
            "DELETE FROM run_steps WHERE EXISTS (SELECT 1 FROM runs r WHERE r.account_id = run_steps.account_id AND r.id = run_steps.run_id AND r.updated_ms < $1 AND r.status <> 'running')",
            "DELETE FROM run_starts WHERE EXISTS (SELECT 1 FROM runs r WHERE r.account_id = run_starts.account_id AND r.id = run_starts.run_id AND r.updated_ms < $1 AND r.status <> 'running')",
            "DELETE FROM runs WHERE updated_ms < $1 AND status <> 'running'",
            "DELETE FROM thread_messages WHERE EXISTS (SELECT 1 FROM threads t WHERE t.account_id = thread_messages.account_id AND t.id = thread_messages.thread_id AND t.updated_ms < $1)",
            "DELETE FROM threads WHERE updated_ms < $1",
        ] {
            deleted += sqlx::query(sql)
                .bind(before_ms)
                .execute(&mut *transaction)
                .await?
                .rows_affected();
        }
        deleted += sqlx::query("DELETE FROM usage_facts WHERE at_ms < $1")
            .bind(usage_before_ms)
            .execute(&mut *transaction)
            .await?
            .rows_affected();
        transaction.commit().await?;
        Ok(deleted)
    }

    /// Closes the run path's connection and the pool (waits for connections in
    /// use); a write after it fails.
    pub async fn close(&self) {
        self.run_path.close().await;
        self.pool.close().await;
    }
}

/// Whether `owner` names an instance (a process under a lease) rather than an
/// engine's fixed name: instance ids are 32 lowercase hex digits, optionally
/// after a kind and a colon (`serve:0123...`). Owners written by earlier
/// versions (`serve:<host>:<pid>`) count as instances whose lease is gone.
fn is_instance_id(owner: &str) -> bool {
    owner.contains(':')
}

/// `message` without `url` or the password in it.
fn scrub_url(message: &str, url: &str) -> String {
    let mut out = message.replace(url, "[store url]");
    if let Some(password) = password_of(url)
        && password.len() >= 3
    {
        out = out.replace(password, "[redacted]");
    }
    out
}

/// The password of `scheme://user:password@host/...`.
fn password_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    Some(userinfo.split_once(':')?.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_appears_in_an_error() {
        let url = "postgres://agent:s3cret-pw@db.internal:5432/runs";
        assert_eq!(password_of(url), Some("s3cret-pw"));
        let message = scrub_url("cannot reach db.internal with s3cret-pw", url);
        assert_eq!(message, "cannot reach db.internal with [redacted]");
        assert_eq!(password_of("sqlite:///tmp/x.db"), None);
    }
}
