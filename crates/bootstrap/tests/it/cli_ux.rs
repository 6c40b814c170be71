//! The CLI as people use it: the interactive session in a real terminal (a
//! pty), `--help` and a table as golden files, `agent init`, completions, and a
//! prompt piped on stdin.

use std::time::Duration;

use agent_testing::server::{OpenAiServer, Reply};
use expectrl::{ControlCode, Expect as _};
use serde_json::Value;

use crate::support::Home;

const KEY: &str = "sk-e2e-cli-ux";

/// `agent chat` (no prompt) in a pty of 100x30 against `base_url`, in `home`.
fn session(home: &Home, base_url: &str) -> expectrl::session::OsSession {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_agent"));
    command
        .current_dir(&home.workspace)
        .args(["--base-url", base_url, "--model", "e2e-model", "chat"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TERM", "xterm")
        .env("OPENAI_API_KEY", KEY)
        .env("XDG_CONFIG_HOME", &home.config_home)
        .env("XDG_DATA_HOME", &home.data_home);
    let mut session = expectrl::Session::spawn(command).unwrap();
    session.get_process_mut().set_window_size(100, 30).unwrap();
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    session
}

/// Waits (at most 20 s, then kills it) for the session's process to exit 0.
fn assert_exits_0(session: &mut expectrl::session::OsSession) {
    use expectrl::process::unix::WaitStatus;
    for _ in 0..200 {
        match session.get_process().status() {
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(100)),
            Ok(status) => {
                assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
                return;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let _ = session.get_process_mut().exit(true);
    panic!("the session did not end within 20 s");
}

/// The user messages of model request `index`.
fn user_texts(server: &OpenAiServer, index: usize) -> Vec<String> {
    server.requests()[index].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                text_of(&m["content"])
            )
        })
        .collect()
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Two turns continue one conversation; Ctrl-C during an answer stops it and
/// the session goes on; Ctrl-D ends it; a new session recalls the last line
/// with the up arrow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_session_continues_its_thread_survives_ctrl_c_and_keeps_history() {
    let server = OpenAiServer::start([
        Reply::text("Hello, Ada."),
        crate::threads::endless_words(50),
        Reply::text("Your name is Ada."),
    ])
    .await
    .unwrap();
    let home = Home::new(KEY);
    let url = server.base_url();
    let (home, server) = tokio::task::spawn_blocking(move || {
        let mut s = session(&home, &url);
        s.expect("you> ").unwrap();
        s.send_line("My name is Ada.").unwrap();
        s.expect("Hello, Ada.").unwrap();
        s.expect("you> ").unwrap();
        s.send_line("Tell me a very long story.").unwrap();
        s.expect("w5 ").unwrap();
        s.send(ControlCode::EndOfText).unwrap();
        s.expect("you> ").unwrap();
        s.send_line("What is my name?").unwrap();
        s.expect("Your name is Ada.").unwrap();
        s.expect("you> ").unwrap();
        s.send(ControlCode::EndOfTransmission).unwrap();
        assert_exits_0(&mut s);

        // A new session: the up arrow recalls the last line of the last one.
        let mut s = session(&home, "http://127.0.0.1:9/v1");
        s.expect("you> ").unwrap();
        s.send("\x1b[A").unwrap();
        s.expect("What is my name?").unwrap();
        // Ctrl-C clears the recalled line; Ctrl-D on an empty line ends.
        s.send(ControlCode::EndOfText).unwrap();
        s.expect("you> ").unwrap();
        s.send(ControlCode::EndOfTransmission).unwrap();
        assert_exits_0(&mut s);
        (home, server)
    })
    .await
    .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "one request per turn");
    assert_eq!(
        server.abandoned(),
        1,
        "Ctrl-C dropped the second answer's stream"
    );
    let third = user_texts(&server, 2);
    assert_eq!(
        third.first().map(String::as_str),
        Some("user: My name is Ada."),
        "{third:?}"
    );
    assert!(
        third.contains(&"assistant: Hello, Ada.".to_owned()),
        "{third:?}"
    );
    assert_eq!(
        third.last().map(String::as_str),
        Some("user: What is my name?"),
        "{third:?}"
    );
    let (code, listed, _) = home.run(None, &["threads", "list", "--json"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        listed.lines().count(),
        1,
        "one thread for the session: {listed}"
    );
}

/// A prompt piped on stdin is one `agent chat` turn, not a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_piped_on_stdin_is_answered_once() {
    let server = OpenAiServer::start([Reply::text("Piped answer.")])
        .await
        .unwrap();
    let home = Home::new(KEY);
    let mut command = home.command(Some(&server.base_url()), &["chat"]);
    command.stdin(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"Summarise this.\n")
        .await
        .unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("Piped answer."));
    let sent = user_texts(&server, 0);
    assert_eq!(sent, ["user: Summarise this.\n"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_says_what_the_program_does_and_lists_the_commands() {
    let (code, stdout, _) = Home::new(KEY).run(None, &["--help"]).await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("agent_help", stdout);
    let (code, chat, _) = Home::new(KEY).run(None, &["chat", "--help"]).await;
    assert_eq!(code, 0);
    assert!(
        chat.contains("Examples:") && chat.contains("agent chat"),
        "{chat}"
    );
}

/// `agent tools` at 80 columns with a 60-character MCP tool id: within 80
/// columns and aligned; the id whole on a line of its own, descriptions cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_table_fits_80_columns_with_a_60_character_id() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Python) else {
        return;
    };
    let home = Home::new(KEY);
    let (server, tool) = ("tablewidthserver", "search_notes_and_documents_everywhere");
    let id = format!("mcp__{server}__{tool}");
    assert_eq!(id.len(), 60);
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().display().to_string();
    let args = ["--state-dir", &state_dir, "--extra-tool", tool];
    let config = home.write_user_config(&format!(
        "{}\n[policy]\nallow = [\"core__*\", \"mcp__*\"]\n",
        crate::mcp::server_table(server, &args),
    ));
    let mut command = home.command(None, &["--config", config.to_str().unwrap(), "tools"]);
    command.env("COLUMNS", "80");
    let output = command.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.iter().all(|l| l.chars().count() <= 80), "{stdout}");
    let effect_at = lines[0].find("EFFECT").unwrap();
    // The id is whole, on a line of its own; its row follows, aligned.
    let at = lines
        .iter()
        .position(|l| *l == id)
        .expect("the id's own line");
    assert_eq!(
        lines[at + 1].get(effect_at..effect_at + 20),
        Some("external_side_effect"),
        "the effect column lines up under its title: {stdout}"
    );
    let short = lines
        .iter()
        .find(|l| l.starts_with("core__read_file "))
        .expect("a short id keeps its row");
    assert_eq!(
        short.get(effect_at..effect_at + 9),
        Some("read_only"),
        "{stdout}"
    );
    insta::assert_snapshot!("tools_table_80_columns", stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_writes_a_trusted_starter_config_and_never_overwrites() {
    for (flag, needle) in [
        (vec!["--openai"], "api = \"openai\""),
        (vec!["--anthropic"], "api = \"anthropic\""),
        (
            vec!["--local", "http://127.0.0.1:11434/v1"],
            "base_url = \"http://127.0.0.1:11434/v1\"",
        ),
    ] {
        let home = Home::new(KEY);
        let mut args = vec!["init"];
        args.extend(flag.iter().copied());
        let (code, stdout, stderr) = home.run(None, &args).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("next:"), "{stdout}");
        let written = std::fs::read_to_string(home.workspace.join("agent.toml")).unwrap();
        assert!(written.contains(needle), "{written}");
        // Trusted: a command that loads it runs (an untrusted base_url is refused).
        let (code, _, stderr) = home.run(None, &["graphs"]).await;
        assert_eq!(code, 0, "{flag:?}: {stderr}");

        let (code, _, stderr) = home.run(None, &args).await;
        assert_eq!(code, 2);
        assert!(stderr.contains("already exists"), "{stderr}");
        let again = std::fs::read_to_string(home.workspace.join("agent.toml")).unwrap();
        assert_eq!(again, written, "not overwritten");
    }
    let home = Home::new(KEY);
    let (code, _, stderr) = home.run(None, &["init"]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("--openai"), "{stderr}");
    let (code, _, stderr) = home.run(None, &["init", "--local", "ftp://x"]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("http(s) URL"), "{stderr}");
    assert!(!home.workspace.join("agent.toml").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_are_printed_for_bash_zsh_and_fish() {
    for (shell, needle) in [
        ("bash", "_agent()"),
        ("zsh", "#compdef agent"),
        ("fish", "complete -c agent"),
    ] {
        let (code, stdout, stderr) = Home::new(KEY).run(None, &["completions", shell]).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.contains(needle),
            "{shell}: {}",
            &stdout[..stdout.len().min(300)]
        );
        assert!(stdout.contains("serve"), "{shell}");
    }
}
