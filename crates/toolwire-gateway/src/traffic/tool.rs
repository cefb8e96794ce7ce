//! One tool's own limits, under its upstream's `tools` member (by the upstream's own name for
//! the tool): a rate for every caller together, a rate and a daily quota for each caller. They
//! apply beside the upstream's, and a call must pass both.
//!
//! ```json
//! "files": {"callerCallsPerDay": 1000,
//!           "tools": {"write_file": {"callerCallsPerSecond": 0.5, "callerCallsPerDay": 100}}}
//! ```

use serde::Deserialize;

use super::bucket::Buckets;
use super::quota::DayQuota;
use super::{TrafficError, buckets, per_day};

/// One tool's traffic settings.
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolTrafficConfig {
    /// Calls a second to the tool from every caller together.
    #[serde(default)]
    pub calls_per_second: Option<f64>,
    /// Calls at once above `callsPerSecond` (default: one second's worth, at least 1).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Calls a second to the tool from each caller on its own.
    #[serde(default)]
    pub caller_calls_per_second: Option<f64>,
    /// Calls at once above `callerCallsPerSecond` (default: one second's worth, at least 1).
    #[serde(default)]
    pub caller_burst: Option<u32>,
    /// Calls a day (UTC) to the tool from each caller.
    #[serde(default)]
    pub caller_calls_per_day: Option<u64>,
}

impl ToolTrafficConfig {
    /// Whether it limits anything.
    pub(super) fn limits(&self) -> bool {
        *self != Self::default()
    }
}

/// One tool's limits, made from its checked settings.
#[derive(Debug)]
pub(super) struct ToolLane {
    pub(super) rate: Option<Buckets<()>>,
    pub(super) caller_rate: Option<Buckets<String>>,
    pub(super) per_day: Option<DayQuota<String>>,
}

impl ToolLane {
    pub(super) fn new(
        entry: &str,
        tool: &str,
        config: &ToolTrafficConfig,
    ) -> Result<Self, TrafficError> {
        // Named in errors as `gateway.traffic.ENTRY.tools.TOOL.SETTING`.
        let at = format!("{entry}.tools.{tool}");
        Ok(Self {
            rate: buckets(&at, "callsPerSecond", config.calls_per_second, config.burst)?,
            caller_rate: buckets(
                &at,
                "callerCallsPerSecond",
                config.caller_calls_per_second,
                config.caller_burst,
            )?,
            per_day: per_day(&at, config.caller_calls_per_day)?,
        })
    }
}
