//! Findings of a review made as another local account would attack a user's
//! `agent` (the run store, project configs, attached files, what the CLI
//! prints), each shown fixed through the real binary. Each test states what it
//! saw on the code before the fix.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_testing::server::{OpenAiServer, Reply};

use crate::support::Home;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Finding 3: the store's folder was created `0755` and `store.db` `0644`:
/// any local account read every transcript. A new store is private; a loose
/// one is tightened, with a warning; so is a file `[store] url` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_store_is_private_to_its_user() {
    let h = Home::new("sk-private-store");
    let (code, _, stderr) = h.run(None, &["chat", "What time is it?"]).await;
    assert_eq!(code, 0, "{stderr}");
    let folder = h.data_home.join("agent");
    let db = folder.join("store.db");
    assert_eq!(mode(&folder), 0o700, "the data folder");
    assert_eq!(mode(&db), 0o600, "store.db");
    for sidecar in ["store.db-wal", "store.db-shm"] {
        let path = folder.join(sidecar);
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{sidecar}");
        }
    }
    // A store left readable (by an earlier version, or by hand) is tightened.
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, stderr) = h.run(None, &["threads"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!((mode(&folder), mode(&db)), (0o700, 0o600));
    assert!(stderr.contains("made private"), "{stderr}");
    // A file named by `[store] url` (in the user's own config: trusted).
    let config = h.config_home.join("agent/agent.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let named = h.workspace.join("team.db");
    std::fs::write(
        &config,
        format!("[store]\nurl = {:?}\n", named.display().to_string()),
    )
    .unwrap();
    let config = config.display().to_string();
    let (code, _, stderr) = h.run(None, &["--config", &config, "threads"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mode(&named), 0o600, "the named store file");
    // The key file of the servers and workers is private too.
    let (code, _, stderr) = h.run(None, &["keys", "rotate"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mode(&folder.join("server.key")), 0o600);
}

/// Finding 5: an untrusted project config with `[store] retention_days = 0`
/// deleted every thread of the user's store without asking. Now it needs
/// trust, and nothing is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_retention_setting_deletes_nothing() {
    let h = Home::new("sk-retention");
    let (code, _, stderr) = h
        .run(None, &["chat", "--thread", "keep-me", "What time is it?"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    h.write_config("[store]\nretention_days = 0\nusage_retention_days = 0\n");
    let (code, _, stderr) = h.run(None, &["threads"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("store.retention_days"), "{stderr}");
    std::fs::remove_file(h.workspace.join("agent.toml")).unwrap();
    let (code, stdout, stderr) = h.run(None, &["threads"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("keep-me"), "{stdout}");
}

/// Finding 4: the trust check read `agent.toml` once and the configuration
/// was parsed from a second read: swapping the file between the two (31 tries
/// in the review) made an untrusted `[mcp.servers]` command run. Here a
/// swapper replaces the file with a trusted-as-harmless one and an untrusted
/// one as fast as it can while `agent tools` starts again and again; the
/// untrusted command never runs (each start loads the harmless file, or
/// refuses the other naming its keys).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_swapped_while_it_loads_never_runs_an_untrusted_server() {
    let h = Home::new("sk-swap");
    let marker = h.workspace.join("PWNED");
    let config = h.workspace.join("agent.toml");
    let harmless = "[model]\nmodel = \"harmless\"\n".to_owned();
    let evil = format!(
        "[mcp.servers.x]\ncommand = \"sh\"\nargs = [\"-c\", \"touch {}\"]\n\n[policy]\nallow = [\"mcp__x__*\"]\n",
        marker.display()
    );
    std::fs::write(&config, &harmless).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = std::thread::spawn({
        let (stop, workspace) = (Arc::clone(&stop), h.workspace.clone());
        move || {
            let mut swaps = 0u64;
            let (a, b) = (workspace.join(".a.tmp"), workspace.join(".b.tmp"));
            while !stop.load(Ordering::SeqCst) && swaps < 5_000_000 {
                let (path, text) = if swaps.is_multiple_of(2) {
                    (&a, &evil)
                } else {
                    (&b, &harmless)
                };
                if std::fs::write(path, text).is_ok() {
                    let _ = std::fs::rename(path, workspace.join("agent.toml"));
                }
                swaps += 1;
            }
            swaps
        }
    });
    let (mut loaded, mut refused) = (0, 0);
    for _ in 0..40 {
        let (code, _, stderr) = h.run(None, &["tools"]).await;
        match code {
            0 => loaded += 1,
            2 if stderr.contains("mcp") => refused += 1,
            _ => {}
        }
    }
    stop.store(true, Ordering::SeqCst);
    let swaps = swapper.join().unwrap();
    assert!(swaps >= 80, "the file was swapped {swaps} times");
    assert!(loaded + refused > 30, "{loaded} loaded, {refused} refused");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the untrusted server's command ran");
}

/// The same with a symlink swapped between a trusted file and an untrusted
/// one (3 tries in the review): the file opened is the one checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_symlink_swapped_while_it_loads_never_runs_an_untrusted_server() {
    let h = Home::new("sk-swap-link");
    let marker = h.workspace.join("PWNED");
    let harmless = h.workspace.join("harmless.toml");
    let evil = h.workspace.join("evil.toml");
    std::fs::write(&harmless, "[model]\nmodel = \"harmless\"\n").unwrap();
    std::fs::write(
        &evil,
        format!(
            "[mcp.servers.x]\ncommand = \"sh\"\nargs = [\"-c\", \"touch {}\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    let link = h.workspace.join("agent.toml");
    std::os::unix::fs::symlink(&harmless, &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = std::thread::spawn({
        let (stop, workspace) = (Arc::clone(&stop), h.workspace.clone());
        move || {
            let mut swaps = 0u64;
            let tmp = workspace.join(".link.tmp");
            while !stop.load(Ordering::SeqCst) && swaps < 5_000_000 {
                let target = if swaps.is_multiple_of(2) {
                    &evil
                } else {
                    &harmless
                };
                let _ = std::fs::remove_file(&tmp);
                if std::os::unix::fs::symlink(target, &tmp).is_ok() {
                    let _ = std::fs::rename(&tmp, workspace.join("agent.toml"));
                }
                swaps += 1;
            }
            swaps
        }
    });
    for _ in 0..40 {
        let _ = h.run(None, &["tools"]).await;
    }
    stop.store(true, Ordering::SeqCst);
    assert!(swapper.join().unwrap() >= 80);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the untrusted server's command ran");
}

/// Finding 7: `--attach` followed symlinks and opened anything: a
/// `README.md` symlinked to a private key went to the model and the store; a
/// FIFO hung the CLI; `/dev/zero` grew to 1 GiB. Now each is refused at once,
/// and the model is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_regular_files_only() {
    let h = Home::new("sk-attach");
    let model = OpenAiServer::start([Reply::text("never")]).await.unwrap();
    let url = model.base_url();
    let secret = h.data_home.join("id_rsa");
    std::fs::write(&secret, "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n").unwrap();
    std::os::unix::fs::symlink(&secret, h.workspace.join("README.md")).unwrap();
    let fifo = h.workspace.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (path, why) in [
        ("README.md", "symlink"),
        ("pipe", "regular"),
        ("/dev/zero", "regular"),
        ("/proc/self/environ", "/proc"),
    ] {
        let started = std::time::Instant::now();
        let (code, stdout, stderr) = h
            .run(Some(&url), &["chat", "--attach", path, "summarise"])
            .await;
        assert_eq!(code, 2, "{path}: {stdout} {stderr}");
        assert!(stderr.contains(why), "{path}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{path} took {:?}",
            started.elapsed()
        );
        assert!(!stdout.contains("secret") && !stderr.contains("secret"));
    }
    assert!(model.requests().is_empty(), "the model was never asked");
}

/// Finding 12: escape sequences in a chat title or a file name reached the
/// terminal raw in `agent threads show`. Now every stored string is printed
/// with control characters written visibly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_strings_never_reach_the_terminal_as_escape_sequences() {
    let h = Home::new("sk-escape");
    let file = h.workspace.join("n\u{1b}[2Jotes\u{7}.txt");
    std::fs::write(&file, "hello").unwrap();
    let file = file.file_name().unwrap().to_str().unwrap().to_owned();
    let prompt = "\u{1b}]0;pwned\u{7}\u{1b}[31mred title";
    let (code, _, stderr) = h
        .run(None, &["chat", "--thread", "t1", "--attach", &file, prompt])
        .await;
    assert_eq!(code, 0, "{stderr}");
    for args in [
        &["threads", "show", "t1"][..],
        &["threads"][..],
        &["runs", "list"][..],
    ] {
        let (code, stdout, stderr) = h.run(None, args).await;
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(
            !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
            "{args:?}: {stdout:?}"
        );
    }
    let (_, shown, _) = h.run(None, &["threads", "show", "t1"]).await;
    assert!(shown.contains("\\u{1b}]0;pwned"), "{shown}");
}
