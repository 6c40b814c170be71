//! `core__get_current_time`: the current time, optionally in an IANA time zone.

use std::sync::Arc;

use ai_core::{
    ToolEffect,
    tool::{Redaction, ToolCallContext, ToolErrorCode, ToolFailure},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Namespace;
use crate::capability::Clock;
use crate::contract::ToolContract;

/// Arguments of `core__get_current_time`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetCurrentTimeArgs {
    /// IANA time zone name such as `Europe/Paris`; UTC when omitted.
    #[serde(default)]
    pub timezone: Option<String>,
}

/// Output of `core__get_current_time`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CurrentTime {
    /// RFC 3339 timestamp with the zone's offset.
    pub now: String,
    /// The time zone used.
    pub timezone: String,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
}

/// Tells the current date and time.
#[derive(Debug, Clone, Copy, Default)]
pub struct GetCurrentTime;

impl ToolContract for GetCurrentTime {
    type Args = GetCurrentTimeArgs;
    type Output = CurrentTime;
    type Capabilities = Arc<dyn Clock>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "get_current_time"
    }

    fn description(&self) -> &str {
        "Get the current date and time as an RFC 3339 timestamp, in UTC or in an IANA time zone such as Europe/Paris."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn redaction(&self) -> Redaction {
        Redaction::new(["timezone"], ["now", "timezone", "unix_ms"]).unwrap_or_default()
    }

    async fn execute(
        &self,
        clock: &Arc<dyn Clock>,
        _cx: &ToolCallContext,
        args: GetCurrentTimeArgs,
    ) -> Result<CurrentTime, ToolFailure> {
        let now = clock.now();
        let zone = args.timezone.unwrap_or_else(|| "UTC".to_owned());
        let zoned = now.in_tz(&zone).map_err(|_| {
            ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                "unknown time zone; use an IANA name such as Europe/Paris or UTC",
            )
        })?;
        Ok(CurrentTime {
            now: now.display_with_offset(zoned.offset()).to_string(),
            timezone: zone,
            unix_ms: now.as_millisecond(),
        })
    }
}
