//! The places in a tool call where hooks run.

use std::fmt;

/// Where in a tool call a hook runs.
///
/// The variant names are the guide's (`PRE_TOOL_CALL`, `POST_TOOL_CALL`); they
/// are also exported at the crate root so `#[on(PRE_TOOL_CALL)]` and
/// `register_hook(PRE_TOOL_CALL, …)` read as they do in the guide.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InterceptionPoint {
    /// Before every tool execution: hooks may edit `tool_input` in place or
    /// block the call.
    PRE_TOOL_CALL,
    /// After every tool execution (and after a blocked call): hooks may
    /// replace `tool_result` or abort the run.
    POST_TOOL_CALL,
}

pub use InterceptionPoint::{POST_TOOL_CALL, PRE_TOOL_CALL};

impl InterceptionPoint {
    /// Both points, in the order they run during one tool call.
    pub const ALL: [InterceptionPoint; 2] = [PRE_TOOL_CALL, POST_TOOL_CALL];

    /// The guide's spelling of the point, e.g. `PRE_TOOL_CALL`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PRE_TOOL_CALL => "PRE_TOOL_CALL",
            POST_TOOL_CALL => "POST_TOOL_CALL",
        }
    }

    /// The index of this point in per-point arrays.
    pub(crate) const fn index(self) -> usize {
        match self {
            PRE_TOOL_CALL => 0,
            POST_TOOL_CALL => 1,
        }
    }
}

impl fmt::Display for InterceptionPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
