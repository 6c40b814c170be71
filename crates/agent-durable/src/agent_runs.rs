//! Recorded runs of an [`Agent`] from library code: [`Runs::open`] on a store,
//! then [`Runs::run_agent`] for each run, recorded (run, thread, events,
//! usage) by the same [`Runs::start`] that `agent serve` and `agent chat`
//! use.

use std::sync::Arc;

use agent_graph::Agent;
use agent_graph::journal::RunStart;
use agent_graph::run::RunRequest;
use agent_store::{Store, StoreError, TurnMessage};
use ai_core::{Message, RunContext};

use crate::lease::{Instance, LeaseTiming};
use crate::runs::{RecordedRun, RunSpec, Runs, RunsError, ThreadTurn, answer_id, prompt_id};

/// The account of runs that name none.
pub const DEFAULT_ACCOUNT: &str = "local";

/// One run of an agent to record: whose it is, the thread it continues (or
/// starts), and the user's prompt.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentRun {
    /// The account it belongs to ([`DEFAULT_ACCOUNT`] unless set).
    pub account: String,
    /// The thread it continues, or starts when the account has none by this
    /// id; `None`: a run without a thread.
    pub thread: Option<String>,
    /// The user's message.
    pub prompt: String,
}

impl AgentRun {
    /// A run of [`DEFAULT_ACCOUNT`] on `prompt`, without a thread.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            account: DEFAULT_ACCOUNT.to_owned(),
            thread: None,
            prompt: prompt.into(),
        }
    }

    /// Of `account` instead.
    pub fn account(mut self, account: impl Into<String>) -> Self {
        self.account = account.into();
        self
    }

    /// Continues thread `id` (started when new): the model sees its stored
    /// messages before the prompt, and the turn is added to it.
    pub fn thread(mut self, id: impl Into<String>) -> Self {
        self.thread = Some(id.into());
        self
    }
}

impl RunSpec {
    /// The record of `request`, a new run of `account`: its graph (`default_graph`
    /// when the request names none), model and prompt hash, the answer known by
    /// [`answer_id`], and with `thread` (its id, its title when new, and how
    /// many of the request's messages after the system prompt the stored thread
    /// holds) the turn the run adds to it, the user's message known by
    /// [`prompt_id`].
    pub fn for_request(
        account: impl Into<String>,
        (request, default_graph): (&RunRequest, &str),
        thread: Option<(String, String, usize)>,
    ) -> Self {
        let run_id = request.context.run_id.clone();
        let mut spec = Self::new(
            account,
            (
                request
                    .graph
                    .clone()
                    .unwrap_or_else(|| default_graph.to_owned()),
                request.model.clone(),
                request.prompt_hash.clone(),
            ),
        )
        .with_answer_id(answer_id(&run_id));
        if let Some((id, title, kept)) = thread {
            // The conversation past the thread's history (the graph's system
            // prompt leads the request and is never stored).
            let added = request
                .messages
                .iter()
                .skip_while(|m| matches!(m, Message::System { .. }))
                .skip(kept)
                .map(|message| TurnMessage {
                    id: matches!(message, Message::User { .. }).then(|| prompt_id(&run_id)),
                    message: message.clone(),
                })
                .collect();
            spec = spec.with_thread(ThreadTurn::new(id, title, kept, added));
        }
        spec
    }
}

impl Runs {
    /// The run owner of this process on `store`, under a lease of the default
    /// length: what library code records its runs through.
    pub async fn open(store: Store) -> Result<Self, StoreError> {
        let instance: Arc<Instance> =
            Instance::start(store, "library", LeaseTiming::default()).await?;
        Ok(Self::new(instance))
    }

    /// Starts a run of `agent` recorded in the store: the thread's stored
    /// messages (when it names one) before the prompt, the run and its user
    /// turn stored before the model is called, each event recorded as it is
    /// read ([`RecordedRun::next`]), its end, usage and the thread's new
    /// messages written by [`RecordedRun::finish`].
    pub async fn run_agent(&self, agent: &Agent, run: AgentRun) -> Result<RecordedRun, RunsError> {
        let rows = self.store().account(run.account.clone());
        let (mut conversation, thread) = match run.thread {
            Some(id) => {
                let stored = rows.thread(&id).await?;
                let history = rows.messages(&id).await?;
                let title =
                    stored.map_or_else(|| agent_store::title_from(&run.prompt), |t| t.title);
                let kept = history.len();
                (history, Some((id, title, kept)))
            }
            None => (Vec::new(), None),
        };
        conversation.push(Message::user(run.prompt));
        let prepared = agent
            .prepare(RunContext::generate(), conversation)
            .map_err(RunsError::Prepare)?;
        let spec = RunSpec::for_request(
            run.account,
            (&prepared.request, agent.graph().name.as_str()),
            thread,
        );
        let deps = prepared.deps(Arc::clone(agent.model()), Arc::clone(agent.runner()));
        let start = RunStart::New {
            request: prepared.request,
        };
        self.start(spec, start, deps).await
    }
}
