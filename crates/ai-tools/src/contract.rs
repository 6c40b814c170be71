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
    // Made only by the built-in tools (feature `builtin`).
    #[cfg_attr(not(feature = "builtin"), allow(dead_code))]
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
    #[cfg(feature = "builtin")]
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
    /// A field path given to `show_args` or `show_output` is not a path.
    #[error("redaction of tool `{name}` is invalid: {source}")]
    Redaction {
        /// The tool.
        name: String,
        /// The bad path.
        source: ai_core::tool::RedactionError,
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

/// A tool made from an async closure by [`tool_fn`]: its
/// spec is already checked; [`ToolFn::show_args`], [`ToolFn::show_output`],
/// [`ToolFn::redact`] and [`ToolFn::namespace`] adjust it before it is handed to a
/// runner or an agent (it converts into a [`RegisteredTool`]).
pub struct ToolFn<A, O> {
    contract: FnContract<A, O>,
    /// The checked spec; its redaction is the one the builder methods set.
    spec: ToolSpec,
}

impl<A, O> std::fmt::Debug for ToolFn<A, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolFn")
            .field("id", &self.spec.id)
            .finish_non_exhaustive()
    }
}

/// A closure tool's function, with the call's context whether or not the closure
/// takes it ([`ToolHandler`] makes it).
type CallFn<A, O> =
    Arc<dyn Fn(A, &ToolCallContext) -> BoxFuture<'static, Result<O, ToolFailure>> + Send + Sync>;

struct FnContract<A, O> {
    name: String,
    description: String,
    effect: ToolEffect,
    f: CallFn<A, O>,
}

impl<A, O> ToolContract for FnContract<A, O>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
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
        cx: &ToolCallContext,
        args: A,
    ) -> impl Future<Output = Result<O, ToolFailure>> + Send {
        (self.f)(args, cx)
    }
}

/// A tool from an async closure, with the same guarantees as a [`ToolContract`]:
/// the input schema is derived from `A` and the output schema from `O` (schemars,
/// never by hand), the name and description follow the contract rules, and the id is
/// `app__<name>` (see [`ToolFn::namespace`]).
///
/// **Events show `{}` until you list fields.** By default no argument or output
/// field reaches events, logs or UIs (the model still gets the full, bounded
/// output): an allowlist is the safe default for values that may hold personal data
/// or secrets. [`ToolFn::show_args`] and [`ToolFn::show_output`] list the fields that
/// may be shown; `Redaction::dev_only_show_everything()` shows all of them while you
/// develop.
///
/// The closure takes the arguments, or the arguments and the call's
/// [`ToolCallContext`]: its cancellation token (fires when the run is cancelled
/// or the call times out; the tool then has the policy's stop grace, 500 ms by
/// default, to finish before its future is dropped), the run's ids, the graph
/// and the call id ([`ToolHandler`] takes both forms).
///
/// **Errors.** The closure returns `Result<O, ToolFailure>`, and `?` converts:
/// a `String` or `&str` becomes `execution_failed` with that text (the model
/// reads it: keep secrets out), and a `std::io::Error` becomes `not_found`,
/// `permission_denied` or `execution_failed` by its kind only (its text, which
/// may hold a path, is not passed on). For another error type, map it:
/// `.map_err(|e| ToolFailure::failed(e.to_string()))?`.
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
///     |args: AddArgs| async move { Ok(Sum { sum: args.a + args.b }) })?
///     .show_args(["a", "b"])?
///     .show_output(["sum"])?;
/// assert_eq!(add.spec().id.as_str(), "app__add");
///
/// // `?` on an I/O error inside a tool: a missing file is `not_found` to the model.
/// #[derive(Deserialize, JsonSchema)]
/// struct NoArgs {}
/// let read = ai_tools::tool_fn("read_notes", "Read the notes.", ToolEffect::ReadOnly,
///     |_: NoArgs| async move { Ok(std::fs::read_to_string("notes.txt")?) })?;
/// # let _ = read;
/// # Ok::<(), ai_tools::ContractError>(())
/// ```
pub fn tool_fn<A, O, M>(
    name: impl Into<String>,
    description: impl Into<String>,
    effect: ToolEffect,
    f: impl ToolHandler<A, O, M>,
) -> Result<ToolFn<A, O>, ContractError>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
{
    ToolFn::new(name.into(), description.into(), effect, f.into_call())
}

/// What [`tool_fn`] takes: an async closure of the arguments (`Fn(A) -> Fut`),
/// or of the arguments and the call's [`ToolCallContext`]
/// (`Fn(A, ToolCallContext) -> Fut`), whose future yields
/// `Result<O, ToolFailure>`. `M` only tells the two forms apart; it is never
/// named.
///
/// ```
/// use ai_core::{ToolEffect, tool::{ToolCallContext, ToolFailure}};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use std::time::Duration;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Wait { seconds: u64 }
///
/// let wait = ai_tools::tool_fn("wait", "Wait a while.", ToolEffect::ReadOnly,
///     |args: Wait, cx: ToolCallContext| async move {
///         tokio::select! {
///             _ = tokio::time::sleep(Duration::from_secs(args.seconds)) => Ok("waited".to_owned()),
///             _ = cx.cancel.cancelled() => Err(ToolFailure::failed("stopped early")),
///         }
///     })?;
/// # Ok::<(), ai_tools::ContractError>(())
/// ```
pub trait ToolHandler<A, O, M>: Send + Sync + 'static {
    /// The closure as the call function a [`ToolFn`] keeps.
    #[doc(hidden)]
    fn into_call(self) -> CallFn<A, O>;
}

impl<A, O, F, Fut> ToolHandler<A, O, (A,)> for F
where
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
{
    fn into_call(self) -> CallFn<A, O> {
        Arc::new(move |args, _cx| Box::pin(self(args)))
    }
}

impl<A, O, F, Fut> ToolHandler<A, O, (A, ToolCallContext)> for F
where
    F: Fn(A, ToolCallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
{
    fn into_call(self) -> CallFn<A, O> {
        Arc::new(move |args, cx| Box::pin(self(args, cx.clone())))
    }
}

impl<A, O> ToolFn<A, O>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
{
    fn new(
        name: String,
        description: String,
        effect: ToolEffect,
        f: CallFn<A, O>,
    ) -> Result<Self, ContractError> {
        let contract = FnContract {
            name,
            description,
            effect,
            f,
        };
        let spec = spec_in(&contract, &Namespace::default(), Redaction::default())?;
        Ok(Self { contract, spec })
    }

    /// The argument fields that may reach events, logs and UIs (paths such as
    /// `order_id` or `items.sku`; `$` is everything). Others are removed.
    pub fn show_args<I>(self, paths: I) -> Result<Self, ContractError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let output = self.redaction().output;
        self.with_paths(Redaction::new(paths, Vec::<String>::new()), output, true)
    }

    /// The output fields that may reach events, logs and UIs (see
    /// [`ToolFn::show_args`]).
    pub fn show_output<I>(self, paths: I) -> Result<Self, ContractError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let args = self.redaction().args;
        self.with_paths(Redaction::new(Vec::<String>::new(), paths), args, false)
    }

    fn redaction(&self) -> Redaction {
        self.spec.redaction.clone().unwrap_or_default()
    }

    fn with_paths(
        mut self,
        parsed: Result<Redaction, ai_core::tool::RedactionError>,
        kept: Vec<ai_core::tool::FieldPath>,
        args: bool,
    ) -> Result<Self, ContractError> {
        let parsed = parsed.map_err(|source| ContractError::Redaction {
            name: self.contract.name.clone(),
            source,
        })?;
        let redaction = if args {
            Redaction {
                args: parsed.args,
                output: kept,
            }
        } else {
            Redaction {
                args: kept,
                output: parsed.output,
            }
        };
        self.spec.redaction = Some(redaction);
        Ok(self)
    }

    /// Which argument and output fields may reach events, logs and UIs, as one
    /// config (see [`ToolFn::show_args`] for the usual way).
    pub fn redact(mut self, redaction: Redaction) -> Self {
        self.spec.redaction = Some(redaction);
        self
    }

    /// Moves the tool into another application namespace (`billing` gives
    /// `billing__<name>`); `core`, `mcp` and `graph` are refused.
    pub fn namespace(mut self, namespace: &str) -> Result<Self, ContractError> {
        let redaction = self.redaction();
        self.spec = spec_in(&self.contract, &Namespace::app(namespace), redaction)?;
        Ok(self)
    }

    /// The checked spec.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

impl<A, O> From<ToolFn<A, O>> for RegisteredTool
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
{
    fn from(tool: ToolFn<A, O>) -> Self {
        registered(tool.spec, tool.contract, ())
    }
}
