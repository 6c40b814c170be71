//! `agent init`: a commented starter `agent.toml` for one endpoint, trusted
//! because the user wrote it with this command (a config that redirects
//! requests is otherwise used only once `agent trust` accepted it).

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The endpoint a starter config talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Endpoint {
    /// OpenAI's chat completions.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Gemini's own API.
    Gemini,
    /// A local OpenAI-compatible server at this base URL.
    Local(String),
}

/// Why no starter config was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// The file exists.
    #[error("{0} already exists; not overwritten (remove it, or pass --path for another file)")]
    Exists(PathBuf),
    /// `--local` got something other than an http(s) URL.
    #[error("--local needs an http(s) URL such as http://127.0.0.1:11434/v1, not {0:?}")]
    BadUrl(String),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The `[model]` section for `endpoint`, with the key variable the user must
/// set (if any).
fn model_section(endpoint: &Endpoint) -> (String, Option<&'static str>) {
    match endpoint {
        Endpoint::OpenAi => (
            "[model]\n\
             api = \"openai\"\n\
             base_url = \"https://api.openai.com/v1\"\n\
             model = \"gpt-4o-mini\"\n\
             # The key is read from this environment variable, never from this file.\n\
             api_key_env = \"OPENAI_API_KEY\"\n"
                .to_owned(),
            Some("OPENAI_API_KEY"),
        ),
        Endpoint::Anthropic => (
            "[model]\n\
             api = \"anthropic\"\n\
             base_url = \"https://api.anthropic.com\"\n\
             model = \"claude-sonnet-4-5\"\n\
             # The key is read from this environment variable, never from this file.\n\
             api_key_env = \"ANTHROPIC_API_KEY\"\n\
             # Extended thinking (at least 1024 tokens of budget).\n\
             # thinking_budget_tokens = 4096\n"
                .to_owned(),
            Some("ANTHROPIC_API_KEY"),
        ),
        Endpoint::Gemini => (
            "[model]\n\
             api = \"gemini\"\n\
             base_url = \"https://generativelanguage.googleapis.com\"\n\
             model = \"gemini-2.5-flash\"\n\
             # The key is read from this environment variable, never from this file.\n\
             api_key_env = \"GEMINI_API_KEY\"\n\
             # Thinking with this budget, thought summaries shown.\n\
             # thinking_budget_tokens = 4096\n"
                .to_owned(),
            Some("GEMINI_API_KEY"),
        ),
        Endpoint::Local(url) => (
            format!(
                "[model]\n\
                 api = \"openai\"\n\
                 # An OpenAI-compatible server: Ollama, vLLM, llama.cpp, LiteLLM.\n\
                 base_url = {url:?}\n\
                 # The model id as the server knows it (`ollama list`, `/v1/models`).\n\
                 model = \"llama3.1\"\n\
                 # Servers that reject `stream_options` need this off.\n\
                 # include_usage = false\n"
            ),
            None,
        ),
    }
}

/// What follows `[model]` in every starter config.
const REST: &str = r#"
[policy]
# Deny by default: only these tool ids (or prefix* patterns) are offered.
allow = ["core__*"]
# Never allowed, whatever `allow` says.
deny = []
# Calls with these effects ask you first (y/N on a terminal).
require_approval = ["state_change", "external_side_effect"]

[workspace]
# The file tools see only this folder (default: where you run `agent`).
# root = "."

# An MCP server's tools, offered to the model as mcp__NAME__TOOL (add
# "mcp__files__*" to `allow`).
# [mcp.servers.files]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-filesystem", "."]

# Every key, with what it does: agent.example.toml in the project's repository.
"#;

/// Writes the starter config for `endpoint` at `path` (refusing to overwrite)
/// and trusts it; returns the lines to print: what was written and the next
/// command to run.
pub fn write_starter(path: &Path, endpoint: &Endpoint) -> Result<Vec<String>, InitError> {
    if let Endpoint::Local(url) = endpoint
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(InitError::BadUrl(url.clone()));
    }
    let (model, key) = model_section(endpoint);
    let text = format!(
        "# agent.toml: the configuration of `agent` in this folder (written by `agent init`).\n\
         # Every key is optional; `agent --help` lists the commands.\n\n{model}{REST}"
    );
    let write_error = |source| InitError::Write {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => InitError::Exists(path.to_owned()),
            _ => write_error(e),
        })?;
    file.write_all(text.as_bytes()).map_err(write_error)?;
    drop(file);
    let mut lines = vec![format!("wrote {}", path.display())];
    match crate::trust::trust_file(path, &crate::trust::UserDirs::from_env()) {
        Ok(_) => {
            lines.push("trusted it (you wrote it; `agent trust` again after editing it)".into())
        }
        Err(e) => lines.push(format!(
            "not trusted ({e}): run `agent trust {}`",
            path.display()
        )),
    }
    if let Some(key) = key {
        lines.push(format!("next: export {key}=... and run `agent chat`"));
    } else {
        lines.push("next: start the server, then run `agent chat`".into());
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_starter_config_parses_as_a_config() {
        for endpoint in [
            Endpoint::OpenAi,
            Endpoint::Anthropic,
            Endpoint::Gemini,
            Endpoint::Local("http://127.0.0.1:11434/v1".into()),
        ] {
            let (model, _) = model_section(&endpoint);
            let text = format!("{model}{REST}");
            let parsed: Result<crate::config::FileConfig, _> = toml::from_str(&text);
            assert!(parsed.is_ok(), "{endpoint:?}: {parsed:?}\n{text}");
        }
    }
}
