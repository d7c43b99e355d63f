//! The contexts of the execution boundaries: `EXECUTION_START`, `INPUT`,
//! `OUTPUT` and `EXECUTION_END`.

use std::fmt;
use std::sync::Arc;

use super::CrewInfo;
use super::HookContext;
use crate::inputs::Inputs;
use crate::output::CrewOutput;

macro_rules! inputs_context {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name {
            /// The kickoff's inputs; edit them in place or return
            /// `Some(inputs)` to replace them.
            pub inputs: Inputs,
            /// The crew being kicked off.
            pub crew: Option<Arc<dyn CrewInfo>>,
        }

        impl $name {
            /// A context with these inputs, outside any crew.
            pub fn new(inputs: impl Into<Inputs>) -> Self {
                $name {
                    inputs: inputs.into(),
                    crew: None,
                }
            }

            /// Sets the crew.
            pub fn with_crew(mut self, crew: Arc<dyn CrewInfo>) -> Self {
                self.crew = Some(crew);
                self
            }
        }

        impl HookContext for $name {}

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("inputs", &self.inputs)
                    .field("crew", &self.crew.as_deref().map(CrewInfo::name))
                    .finish()
            }
        }
    };
}

inputs_context! {
    /// What `EXECUTION_START` hooks receive: the inputs a kickoff was given.
    ///
    /// ```
    /// use hooks_core::{ExecutionStartContext, HookAborted};
    ///
    /// // Refuse a kickoff without a topic.
    /// fn require_topic(ctx: &mut ExecutionStartContext) -> Result<(), HookAborted> {
    ///     ctx.inputs.get("topic").map(drop).ok_or_else(|| "a topic is required".into())
    /// }
    /// assert!(require_topic(&mut ExecutionStartContext::new([("topic", "Rust")])).is_ok());
    /// assert!(require_topic(&mut ExecutionStartContext::new(())).is_err());
    /// ```
    ExecutionStartContext
}

inputs_context! {
    /// What `INPUT` hooks receive: the resolved inputs, before tasks fill
    /// their `{placeholders}` from them.
    ///
    /// ```
    /// use hooks_core::{InputContext, Inputs};
    ///
    /// // Trim every input value.
    /// fn trim(ctx: &mut InputContext) -> Option<Inputs> {
    ///     Some(ctx.inputs.iter().map(|(k, v)| (k.to_owned(), v.trim().to_owned())).collect())
    /// }
    /// let mut ctx = InputContext::new([("topic", "  Rust ")]);
    /// assert_eq!(trim(&mut ctx).and_then(|i| i.get("topic").map(str::to_owned)).as_deref(), Some("Rust"));
    /// ```
    InputContext
}

/// What `OUTPUT` hooks receive: the crew's final output, before `kickoff`
/// returns it.
///
/// ```
/// use hooks_core::{CrewOutput, OutputContext};
///
/// fn sign(ctx: &mut OutputContext) -> Option<String> {
///     Some(format!("{}\n— reviewed", ctx.output.raw))
/// }
/// let mut ctx = OutputContext::new(CrewOutput { raw: "done".into(), ..CrewOutput::default() });
/// assert_eq!(sign(&mut ctx).as_deref(), Some("done\n— reviewed"));
/// ```
pub struct OutputContext {
    /// The output `kickoff` will return; edit it in place, or return
    /// `Some(text)` to replace its final text (`output.raw`).
    pub output: CrewOutput,
    /// The crew.
    pub crew: Option<Arc<dyn CrewInfo>>,
}

impl OutputContext {
    /// A context with this output, outside any crew.
    pub fn new(output: CrewOutput) -> Self {
        OutputContext { output, crew: None }
    }

    /// Sets the crew.
    pub fn with_crew(mut self, crew: Arc<dyn CrewInfo>) -> Self {
        self.crew = Some(crew);
        self
    }
}

impl HookContext for OutputContext {}

impl fmt::Debug for OutputContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputContext")
            .field("output", &self.output)
            .field("crew", &self.crew.as_deref().map(CrewInfo::name))
            .finish()
    }
}

/// How a kickoff ended.
///
/// ```
/// use hooks_core::{CrewOutput, ExecutionEndContext, ExecutionStatus};
///
/// // EXECUTION_END hooks read how the kickoff ended.
/// fn summary(ctx: &ExecutionEndContext) -> String {
///     match ctx.status {
///         ExecutionStatus::Completed => "completed".to_owned(),
///         ExecutionStatus::Failed => format!("failed: {}", ctx.error.as_deref().unwrap_or("?")),
///         ExecutionStatus::Cancelled => "cancelled".to_owned(),
///     }
/// }
/// assert_eq!(summary(&ExecutionEndContext::completed(CrewOutput::default())), "completed");
/// assert_eq!(summary(&ExecutionEndContext::failed("rate limited")), "failed: rate limited");
/// assert_eq!(summary(&ExecutionEndContext::cancelled()), "cancelled");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionStatus {
    /// Every task ran and the output is ready.
    Completed,
    /// The run failed or a hook aborted it.
    Failed,
    /// The kickoff was dropped before it ended (its future cancelled).
    Cancelled,
}

/// What `EXECUTION_END` hooks receive: how the kickoff ended.
///
/// ```
/// use hooks_core::{ExecutionEndContext, ExecutionStatus};
///
/// fn report(ctx: &mut ExecutionEndContext) {
///     match ctx.status {
///         ExecutionStatus::Completed => println!("done: {:?}", ctx.output.as_ref().map(|o| &o.raw)),
///         ExecutionStatus::Failed => println!("failed: {}", ctx.error.as_deref().unwrap_or("")),
///         ExecutionStatus::Cancelled => println!("cancelled"),
///     }
/// }
/// report(&mut ExecutionEndContext::failed("the model server is down"));
/// ```
pub struct ExecutionEndContext {
    /// The output, absent on failure.
    pub output: Option<CrewOutput>,
    /// Whether the kickoff completed or failed.
    pub status: ExecutionStatus,
    /// What went wrong, on failure.
    pub error: Option<String>,
    /// The crew.
    pub crew: Option<Arc<dyn CrewInfo>>,
}

impl ExecutionEndContext {
    /// The end of a kickoff that completed with `output`.
    pub fn completed(output: CrewOutput) -> Self {
        ExecutionEndContext {
            output: Some(output),
            status: ExecutionStatus::Completed,
            error: None,
            crew: None,
        }
    }

    /// The end of a kickoff that failed with `error`.
    pub fn failed(error: impl fmt::Display) -> Self {
        ExecutionEndContext {
            output: None,
            status: ExecutionStatus::Failed,
            error: Some(error.to_string()),
            crew: None,
        }
    }

    /// The end of a kickoff that was dropped before it ended.
    ///
    /// ```
    /// use hooks_core::{ExecutionEndContext, ExecutionStatus};
    /// let ctx = ExecutionEndContext::cancelled();
    /// assert_eq!((ctx.status, ctx.output.is_none()), (ExecutionStatus::Cancelled, true));
    /// ```
    pub fn cancelled() -> Self {
        ExecutionEndContext {
            output: None,
            status: ExecutionStatus::Cancelled,
            error: Some("the kickoff was cancelled".to_owned()),
            crew: None,
        }
    }

    /// Sets the crew.
    pub fn with_crew(mut self, crew: Arc<dyn CrewInfo>) -> Self {
        self.crew = Some(crew);
        self
    }
}

impl HookContext for ExecutionEndContext {}

impl fmt::Debug for ExecutionEndContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutionEndContext")
            .field("output", &self.output)
            .field("status", &self.status)
            .field("error", &self.error)
            .field("crew", &self.crew.as_deref().map(CrewInfo::name))
            .finish()
    }
}
