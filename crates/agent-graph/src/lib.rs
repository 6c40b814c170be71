//! The LLM -> tool -> LLM loop: runs, graphs and run handles streaming typed events.
//!
//! agent-graph talks to a model only through `ai_core`'s completion port and runs tools
//! only through `ai_core::ToolRunner`. It must not depend on `ai-tools`, any `wire-*`
//! crate, `bootstrap` or an HTTP client, and it knows no wire format.
//!
//! - [`Agent`] is the front door: a model, tools, a policy and limits, built once
//!   and run many times (`agent.run(prompt)` streams events, `agent.prompt(prompt)`
//!   returns the final text).
//! - [`run`] is the lower-level entry: it starts a run and returns a [`RunHandle`]: a stream of [`ai_core::AiEvent`]s
//!   and one final [`RunOutcome`]. Dropping the event stream cancels the run unless
//!   it was detached; see [`RunHandle`] for who cancels what.
//! - [`Fanout`] gives billing and history (lossless) and UI (lossy, bounded)
//!   consumers their own queues.
//! - [`GraphRegistry`] holds named graphs (`chat`: a system prompt and a tool selection);
//!   a [`Graph`] can be offered to another as the subagent tool `graph__<name>`
//!   ([`Graph::subagent_tool`], [`GraphRegistry::subagent_tools`]; see the
//!   `subagent` module docs for the rules).
//! - [`Prompt`] builds a system prompt from [`Section`]s that contribute tools, and
//!   [`prompt_hash`] keys what was sent.

mod agent;
mod fanout;
mod graph;
mod prompt;
mod queue;
mod run;
mod subagent;

pub use agent::{Agent, AgentBuilder, AgentError, DEFAULT_MODEL_NAME};
pub use fanout::{Fanout, Subscriber, SubscriberItem};
pub use graph::{Graph, GraphRegistry, ToolFilter};
pub use prompt::{Params, Prompt, PromptError, RenderedPrompt, Section, ToolOverride, prompt_hash};
pub use run::{
    EventStream, PendingApproval, RunDeps, RunError, RunHandle, RunLimits, RunOutcome, RunOutput,
    RunRequest, ToolChoiceScope, run,
};
pub use subagent::{GraphError, SubagentBudget};
