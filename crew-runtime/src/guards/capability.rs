//! [`CapabilityGuard`]: blocks tool calls by what the tool declares it
//! does, not by its name.

use hooks_core::{Capabilities, Capability, HookAborted, ToolCallHookContext};

/// The `source` of every refusal, as telemetry reports it.
///
/// ```
/// assert_eq!(crew_runtime::guards::CAPABILITY_GUARD_SOURCE, "capability-guard");
/// ```
pub const CAPABILITY_GUARD_SOURCE: &str = "capability-guard";

/// A ready-made `PRE_TOOL_CALL` guard that blocks calls by the
/// capabilities their tool declares ([`ToolAnnotations`](crate::ToolAnnotations),
/// the MCP annotations), read the safe way: a tool that declares nothing
/// counts as destructive and open-world.
///
/// - [`deny`](Self::deny) blocks calls to tools having any of some
///   capabilities;
/// - [`read_only`](Self::read_only) blocks every tool that does not
///   declare itself read-only.
///
/// A call without a tool (the model named a tool the agent does not have)
/// runs nothing and is let through: the agent is told the tool was not
/// found. Each refusal is a [`HookAborted`] whose source is
/// [`CAPABILITY_GUARD_SOURCE`] and whose reason names the tool and the
/// capability.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::guards::CapabilityGuard;
/// use crew_runtime::prelude::*;
/// use crew_runtime::ToolAnnotations;
///
/// let delete = Tool::dynamic("delete_file", "Deletes a file", json!({"type": "object"}), |_| {
///     Ok::<_, String>(json!("deleted"))
/// })
/// .with_annotations(ToolAnnotations::new().destructive(true));
/// let llm = Arc::new(ScriptedLlm::new().call("delete_file", json!({"path": "notes.txt"})).answer("done"));
/// let janitor = Agent::builder("Janitor").tool(delete).llm(llm.clone()).build();
/// let crew = Crew::builder()
///     .agent(janitor.clone())
///     .task(Task::builder("Tidy up").agent(&janitor).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .hook_with(
///         PRE_TOOL_CALL,
///         HookOptions::new().name("capability-guard"),
///         CapabilityGuard::deny([Capability::Destructive]).pre_hook(),
///     )
///     .build()?;
/// crew.kickoff_blocking(())?;
///
/// assert_eq!(
///     llm.requests()[1].observations(),
///     ["Tool execution blocked by hook. Tool: delete_file"]
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilityGuard {
    policy: Policy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Blocks tools having any of these.
    Deny(Capabilities),
    /// Blocks tools that are not read-only.
    ReadOnly,
}

impl CapabilityGuard {
    /// Blocks calls to tools having any of `capabilities`; an empty list
    /// blocks nothing.
    ///
    /// ```
    /// use crew_runtime::guards::CapabilityGuard;
    /// use crew_runtime::{Capability, ToolCallHookContext};
    ///
    /// let guard = CapabilityGuard::deny([Capability::Destructive, Capability::OpenWorld]);
    /// // No tool (an unknown name): nothing to block.
    /// assert!(guard.check(&ToolCallHookContext::new("made_up", Default::default())).is_ok());
    /// ```
    pub fn deny(capabilities: impl IntoIterator<Item = Capability>) -> Self {
        CapabilityGuard {
            policy: Policy::Deny(capabilities.into_iter().collect()),
        }
    }

    /// Blocks every tool that does not declare itself read-only (MCP
    /// `readOnlyHint`): a tool that declares nothing is blocked.
    ///
    /// ```
    /// use crew_runtime::guards::CapabilityGuard;
    ///
    /// let guard = CapabilityGuard::read_only();
    /// # let _ = guard;
    /// ```
    pub fn read_only() -> Self {
        CapabilityGuard {
            policy: Policy::ReadOnly,
        }
    }

    /// Lets the call through, or refuses it naming the tool and the
    /// capability that blocks it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::CapabilityGuard;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::ToolInfo;
    ///
    /// let shell = Tool::dynamic("run_shell", "Runs a command", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!(""))
    /// });
    /// let ctx = ToolCallHookContext::new("run_shell", Default::default())
    ///     .with_tool(Arc::new(shell) as Arc<dyn ToolInfo>);
    /// let refused = CapabilityGuard::read_only().check(&ctx).expect_err("declares nothing");
    /// assert_eq!(refused.source, "capability-guard");
    /// assert_eq!(refused.reason, "tool `run_shell` is not read-only: only read-only tools may run");
    /// ```
    pub fn check(&self, ctx: &ToolCallHookContext) -> Result<(), HookAborted> {
        // No tool: the call runs nothing, so there is nothing to guard.
        let Some(tool) = ctx.tool.as_deref() else {
            return Ok(());
        };
        let has = tool.annotations().capabilities();
        let tool = ctx.tool_name();
        match self.policy {
            Policy::Deny(denied) => match denied.iter().find(|c| has.contains(*c)) {
                None => Ok(()),
                Some(capability) => Err(HookAborted::new(
                    format!(
                        "tool `{tool}` is {}: tools with capability `{capability}` may not run",
                        described(capability)
                    ),
                    CAPABILITY_GUARD_SOURCE,
                )),
            },
            Policy::ReadOnly if has.contains(Capability::ReadOnly) => Ok(()),
            Policy::ReadOnly => Err(HookAborted::new(
                format!("tool `{tool}` is not read-only: only read-only tools may run"),
                CAPABILITY_GUARD_SOURCE,
            )),
        }
    }

    /// The guard as a synchronous `PRE_TOOL_CALL` hook, to register
    /// globally or on a crew (see the example on [`CapabilityGuard`]).
    ///
    /// ```
    /// use crew_runtime::guards::CapabilityGuard;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::RegisterError;
    ///
    /// let registry = HookRegistry::new();
    /// registry.register_hook_with(
    ///     PRE_TOOL_CALL,
    ///     HookOptions::new().name("capability-guard"),
    ///     CapabilityGuard::read_only().pre_hook(),
    /// )?;
    /// # Ok::<(), RegisterError>(())
    /// ```
    pub fn pre_hook(
        &self,
    ) -> impl Fn(&mut ToolCallHookContext) -> Result<(), HookAborted> + Send + Sync + 'static {
        let guard = *self;
        move |ctx: &mut ToolCallHookContext| guard.check(ctx)
    }
}

/// How a refusal describes a tool having `capability`.
fn described(capability: Capability) -> &'static str {
    match capability {
        Capability::ReadOnly => "read-only",
        Capability::Destructive => "destructive",
        Capability::Idempotent => "idempotent",
        Capability::OpenWorld => "open-world",
    }
}
