//! The typed tool contract and its binding to capabilities.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use ai_core::{
    ToolEffect, ToolId, ToolSpec,
    tool::{
        DEFAULT_APP_NAMESPACE, ModelView, Redaction, RegisteredTool, ToolCallContext,
        ToolErrorCode, ToolExecutor, ToolFailure, ToolOutput,
    },
};
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::schema::{SchemaError, args_schema, output_schema};

/// Longest bare tool name (`<namespace>__<name>` must still fit in 64 characters,
/// so a longer namespace leaves less room).
pub const MAX_NAME_LEN: usize = 64 - "app__".len();

/// The namespace a contract's id lives in.
///
/// Applications name their own (`Namespace::app("billing")` gives ids like
/// `billing__refund`); the default is `app`. Only this crate's built-in tools live in
/// `core`, so a policy pattern `core__*` can never match an application's tool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Namespace(NamespaceKind);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum NamespaceKind {
    Core,
    App(String),
}

impl Namespace {
    /// An application namespace: 1 to 16 lowercase ASCII letters, digits or `-`,
    /// starting with a letter, and not `core`, `mcp` or `graph` (checked when the
    /// spec is built).
    pub fn app(name: impl Into<String>) -> Self {
        Self(NamespaceKind::App(name.into()))
    }

    /// The namespace of the built-in tools.
    pub(crate) fn core() -> Self {
        Self(NamespaceKind::Core)
    }

    /// The namespace as it appears in ids.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            NamespaceKind::Core => "core",
            NamespaceKind::App(name) => name,
        }
    }

    fn id(&self, name: &str) -> Result<ToolId, ai_core::tool::ToolIdError> {
        match &self.0 {
            NamespaceKind::Core => ToolId::core(name),
            NamespaceKind::App(namespace) => ToolId::app(namespace, name),
        }
    }

    fn origin(&self) -> &'static str {
        match &self.0 {
            NamespaceKind::Core => "built-in",
            NamespaceKind::App(_) => "application",
        }
    }
}

impl Default for Namespace {
    /// `app`.
    fn default() -> Self {
        Self::app(DEFAULT_APP_NAMESPACE)
    }
}

/// Longest tool description.
pub const MAX_DESCRIPTION_LEN: usize = 200;

/// A typed tool.
///
/// `Args` and `Output` derive their schemas with schemars; `execute` reaches IO only
/// through `Capabilities` (traits from [`crate::capability`]), which the composition
/// root supplies when it [`bind`]s the contract.
pub trait ToolContract: Send + Sync + 'static {
    /// Arguments, deserialized from the model's validated JSON.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    /// Output, serialized for the model and (redacted) for UI and telemetry.
    type Output: Serialize + JsonSchema + Send + 'static;
    /// What the tool needs from the outside world.
    type Capabilities: Send + Sync + 'static;

    /// Bare name (lowercase ASCII letters, digits, `_`, `-`; not starting with `_`);
    /// the id is `<namespace>__<name>`.
    fn name(&self) -> &str;
    /// What the model reads: 1 to 200 ASCII characters.
    fn description(&self) -> &str;
    /// The namespace of the id: `app` unless overridden.
    fn namespace(&self) -> Namespace {
        Namespace::default()
    }
    /// What running the tool may do.
    fn effect(&self) -> ToolEffect;
    /// Which argument and output fields may reach UI, events and logs.
    fn redaction(&self) -> Redaction;

    /// Runs the tool.
    fn execute(
        &self,
        caps: &Self::Capabilities,
        cx: &ToolCallContext,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Output, ToolFailure>> + Send;

    /// How the model sees an output: compact JSON by default. Override to render a
    /// friendlier text, or to keep the value out of the model context.
    fn model_view(&self, output: &Self::Output) -> ModelView {
        let _ = output;
        ModelView::Json
    }
}

/// Why a contract cannot become a spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The name breaks the naming rules.
    #[error("tool name `{name}` is invalid: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Which rule.
        reason: String,
    },
    /// The description breaks the description rules.
    #[error("description of tool `{name}` is invalid: {reason}")]
    InvalidDescription {
        /// The tool.
        name: String,
        /// Which rule.
        reason: String,
    },
    /// A schema could not be derived.
    #[error("schema of tool `{name}` is unusable: {source}")]
    Schema {
        /// The tool.
        name: String,
        /// The schema problem.
        source: SchemaError,
    },
}

fn check_name(namespace: &Namespace, name: &str) -> Result<ToolId, ContractError> {
    let invalid = |reason: &str| ContractError::InvalidName {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(invalid(&format!("must be 1 to {MAX_NAME_LEN} characters")));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(invalid(
            "only lowercase ASCII letters, digits, `_` and `-` are allowed",
        ));
    }
    namespace.id(name).map_err(|e| invalid(&e.to_string()))
}

fn check_description(name: &str, description: &str) -> Result<(), ContractError> {
    let invalid = |reason: &str| ContractError::InvalidDescription {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    if description.trim().is_empty() || description.len() > MAX_DESCRIPTION_LEN {
        return Err(invalid(&format!(
            "must be 1 to {MAX_DESCRIPTION_LEN} characters"
        )));
    }
    if !description.is_ascii() {
        return Err(invalid("must be ASCII"));
    }
    Ok(())
}

/// Builds the semantic spec of a contract: checked namespace, name and description,
/// derived draft-07 input and output schemas, redaction, and a stable `schema_hash`.
pub fn to_tool_spec<C: ToolContract>(contract: &C) -> Result<ToolSpec, ContractError> {
    spec_in(contract, &contract.namespace(), contract.redaction())
}

fn spec_in<C: ToolContract>(
    contract: &C,
    namespace: &Namespace,
    redaction: Redaction,
) -> Result<ToolSpec, ContractError> {
    let name = contract.name();
    let id = check_name(namespace, name)?;
    check_description(name, contract.description())?;
    let schema_error = |source| ContractError::Schema {
        name: name.to_owned(),
        source,
    };
    let input = args_schema::<C::Args>().map_err(schema_error)?;
    let output = output_schema::<C::Output>().map_err(schema_error)?;
    Ok(
        ToolSpec::new(id, contract.description(), input, contract.effect())
            .with_output_schema(output)
            .with_redaction(redaction)
            .with_origin(namespace.origin()),
    )
}

/// A contract joined with its capabilities: the executor the runner calls.
struct BoundContract<C: ToolContract> {
    contract: Arc<C>,
    caps: Arc<C::Capabilities>,
    _marker: PhantomData<fn() -> C>,
}

impl<C: ToolContract> ToolExecutor for BoundContract<C> {
    fn execute(
        &self,
        cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        let contract = Arc::clone(&self.contract);
        let caps = Arc::clone(&self.caps);
        Box::pin(async move {
            // The runner validated `args` against the derived schema; a mismatch here
            // means the schema and the type disagree, which the message says without
            // echoing the input.
            let args: C::Args = serde_json::from_value(args).map_err(|_| {
                ToolFailure::new(
                    ToolErrorCode::InvalidArgs,
                    "arguments match the schema but could not be read as the tool's argument type",
                )
            })?;
            let output = contract.execute(&caps, &cx, args).await?;
            let model_view = contract.model_view(&output);
            let value = serde_json::to_value(&output).map_err(|_| {
                ToolFailure::new(
                    ToolErrorCode::ExecutionFailed,
                    "the tool's output could not be serialized",
                )
            })?;
            Ok(ToolOutput { value, model_view })
        })
    }
}

/// Binds a contract to its capabilities, yielding the spec and executor the runner
/// registers. Only the composition root binds real capabilities (tests bind doubles).
pub fn bind<C: ToolContract>(
    contract: C,
    caps: C::Capabilities,
) -> Result<RegisteredTool, ContractError> {
    let spec = to_tool_spec(&contract)?;
    Ok(registered(spec, contract, caps))
}

fn registered<C: ToolContract>(
    spec: ToolSpec,
    contract: C,
    caps: C::Capabilities,
) -> RegisteredTool {
    RegisteredTool {
        spec,
        executor: Arc::new(BoundContract {
            contract: Arc::new(contract),
            caps: Arc::new(caps),
            _marker: PhantomData,
        }),
    }
}

/// A tool made from an async closure by [`tool_fn`]: its spec is already checked;
/// [`ToolFn::redact`] and [`ToolFn::namespace`] adjust it before it is handed to a
/// runner or an agent (it converts into a [`RegisteredTool`]).
pub struct ToolFn<A, O, F> {
    contract: FnContract<A, O, F>,
    /// The checked spec; its redaction is the one `redact` set.
    spec: ToolSpec,
}

impl<A, O, F> std::fmt::Debug for ToolFn<A, O, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolFn")
            .field("id", &self.spec.id)
            .finish_non_exhaustive()
    }
}

struct FnContract<A, O, F> {
    name: String,
    description: String,
    effect: ToolEffect,
    f: F,
    _marker: PhantomData<fn(A) -> O>,
}

impl<A, O, F, Fut> ToolContract for FnContract<A, O, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
{
    type Args = A;
    type Output = O;
    type Capabilities = ();

    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn effect(&self) -> ToolEffect {
        self.effect
    }
    fn redaction(&self) -> Redaction {
        Redaction::default()
    }
    fn execute(
        &self,
        _caps: &(),
        _cx: &ToolCallContext,
        args: A,
    ) -> impl Future<Output = Result<O, ToolFailure>> + Send {
        (self.f)(args)
    }
}

/// A tool from an async closure, with the same guarantees as a [`ToolContract`]:
/// the input schema is derived from `A` and the output schema from `O` (schemars,
/// never by hand), the name and description follow the contract rules, and the id is
/// `app__<name>` (see [`ToolFn::namespace`]).
///
/// By default no argument or output field reaches events, logs or UIs (the model
/// still gets the full, bounded output); [`ToolFn::redact`] lists the fields that may.
///
/// ```
/// use ai_core::ToolEffect;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs { a: i64, b: i64 }
/// #[derive(Serialize, JsonSchema)]
/// struct Sum { sum: i64 }
///
/// let add = ai_tools::tool_fn("add", "Add two integers.", ToolEffect::ReadOnly,
///     |args: AddArgs| async move { Ok(Sum { sum: args.a + args.b }) })?;
/// assert_eq!(add.spec().id.as_str(), "app__add");
/// # Ok::<(), ai_tools::ContractError>(())
/// ```
pub fn tool_fn<A, O, F, Fut>(
    name: impl Into<String>,
    description: impl Into<String>,
    effect: ToolEffect,
    f: F,
) -> Result<ToolFn<A, O, F>, ContractError>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
{
    let contract = FnContract {
        name: name.into(),
        description: description.into(),
        effect,
        f,
        _marker: PhantomData,
    };
    let spec = spec_in(&contract, &Namespace::default(), Redaction::default())?;
    Ok(ToolFn { contract, spec })
}

impl<A, O, F, Fut> ToolFn<A, O, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
{
    /// Which argument and output fields may reach events, logs and UIs.
    pub fn redact(mut self, redaction: Redaction) -> Self {
        self.spec.redaction = Some(redaction);
        self
    }

    /// Moves the tool into another application namespace (`billing` gives
    /// `billing__<name>`); `core`, `mcp` and `graph` are refused.
    pub fn namespace(mut self, namespace: &str) -> Result<Self, ContractError> {
        let redaction = self.spec.redaction.clone().unwrap_or_default();
        self.spec = spec_in(&self.contract, &Namespace::app(namespace), redaction)?;
        Ok(self)
    }

    /// The checked spec.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

impl<A, O, F, Fut> From<ToolFn<A, O, F>> for RegisteredTool
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
{
    fn from(tool: ToolFn<A, O, F>) -> Self {
        registered(tool.spec, tool.contract, ())
    }
}
