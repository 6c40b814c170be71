//! Binds the built-in tools to real adapters for the CLI.

use std::sync::Arc;

use ai_core::RegisteredTool;
use ai_tools::builtin::GetCurrentTime;
use ai_tools::capability::Clock;

use crate::config::AgentConfig;

/// Why the tools could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the built-in tools: {0}")]
pub struct BindError(String);

struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }
}

/// Every built-in tool bound to its real capabilities.
pub fn bind(_config: &AgentConfig) -> Result<Vec<RegisteredTool>, BindError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let time = ai_tools::bind(GetCurrentTime, clock).map_err(|e| BindError(e.to_string()))?;
    Ok(vec![time])
}
