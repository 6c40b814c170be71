//! The typed tool contract and its binding to capabilities.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use ai_core::{
    ModelView, Redaction, RegisteredTool, ToolCallContext, ToolEffect, ToolErrorCode, ToolExecutor,
    ToolFailure, ToolId, ToolIdError, ToolOutput, ToolSpec,
};
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::schema::{SchemaError, args_schema, output_schema};

/// Longest bare tool name (the `core__` prefix must still fit in 64 characters).
pub const MAX_NAME_LEN: usize = 64 - "core__".len();

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

    /// Bare name (lowercase ASCII letters, digits, `_`, `-`); the id is `core__<name>`.
    fn name(&self) -> &'static str;
    /// What the model reads: 1 to 200 ASCII characters.
    fn description(&self) -> &'static str;
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

fn check_name(name: &str) -> Result<ToolId, ContractError> {
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
    ToolId::core(name).map_err(|e: ToolIdError| invalid(&e.to_string()))
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

/// Builds the semantic spec of a contract: checked name and description, derived
/// draft-07 input and output schemas, redaction, and a stable `schema_hash`.
pub fn to_tool_spec<C: ToolContract>(contract: &C) -> Result<ToolSpec, ContractError> {
    let name = contract.name();
    let id = check_name(name)?;
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
            .with_redaction(contract.redaction())
            .with_origin("built-in"),
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
    Ok(RegisteredTool {
        spec,
        executor: Arc::new(BoundContract {
            contract: Arc::new(contract),
            caps: Arc::new(caps),
            _marker: PhantomData,
        }),
    })
}
