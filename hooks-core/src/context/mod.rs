//! The contexts hooks receive, one type per family of points, and the views
//! of the runtime's agents, tasks, crews, tools and models they carry.

use std::any::Any;
use std::sync::Arc;

use serde_json::Value;

use crate::ToolAnnotations;
use crate::capability::Capabilities;

mod execution;
mod llm;
mod step;
mod tool;

pub use execution::{
    ExecutionEndContext, ExecutionStartContext, ExecutionStatus, InputContext, OutputContext,
};
pub use llm::{LlmCallHookContext, ModelResponse};
pub use step::{StepContext, StepKind};
pub use tool::{RawToolResult, ToolCallHookContext, ToolCallStatus};

/// What the registry and dispatch need of a point's context: the names
/// its filters match. Implemented by the ten contexts.
///
/// ```
/// use hooks_core::{HookContext, StepContext, StepKind, ToolCallHookContext};
///
/// // What a `tools = [...]` or `agents = [...]` filter matches on a call.
/// let call = ToolCallHookContext::new("Web Search", Default::default());
/// assert_eq!(call.call_tool_name(), Some("web_search"));
/// assert_eq!(call.call_agent_role(), None); // outside an agent
///
/// let step = StepContext::new(StepKind::Task, "research", "");
/// assert_eq!(step.call_tool_name(), None); // steps have no tool
/// ```
pub trait HookContext: Send + 'static {
    /// The normalized tool name a `tools = [...]` filter matches (tool-call
    /// points only). Read once when a call starts; hooks cannot change it.
    #[inline]
    fn call_tool_name(&self) -> Option<&str> {
        None
    }

    /// A hash of [`call_tool_name`](Self::call_tool_name), computed once
    /// when the call starts; the default hashes the name on each use.
    #[inline]
    fn call_tool_key(&self) -> u64 {
        self.call_tool_name().map_or(0, crate::name::tool_key)
    }

    /// The agent role an `agents = [...]` filter matches.
    #[inline]
    fn call_agent_role(&self) -> Option<&str> {
        None
    }

    /// The capabilities of the call's tool a `capabilities = [...]` filter
    /// matches (tool-call points only; `None` for a call without a tool).
    /// Asked only for a hook that has such a filter.
    #[inline]
    fn call_tool_capabilities(&self) -> Option<Capabilities> {
        None
    }

    /// The tool name as events report it (shared, not copied).
    fn event_tool_name(&self) -> Option<Arc<str>> {
        None
    }

    /// The agent role as events report it (shared where the agent allows).
    fn event_agent_role(&self) -> Option<Arc<str>> {
        None
    }

    /// Told which hook an awaiting walk runs next (an identity valid while
    /// the call runs, its place in the chain, its name), so that a
    /// question the hook asks knows who asked. Nothing by default.
    #[doc(hidden)]
    #[inline]
    fn running_hook(&mut self, hook: usize, position: usize, name: &str) {
        let _ = (hook, position, name);
    }
}

/// What a hook can see of the tool being called. The runtime's tool type
/// implements it; hooks reach the concrete type with
/// [`ToolCallHookContext::tool_as`].
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::{ToolCallHookContext, ToolInfo};
/// use serde_json::{json, Value};
///
/// struct Calculator {
///     schema: Value,
/// }
/// impl ToolInfo for Calculator {
///     fn name(&self) -> &str {
///         "calculator"
///     }
///     fn description(&self) -> &str {
///         "Adds two numbers"
///     }
///     fn args_schema(&self) -> &Value {
///         &self.schema
///     }
/// }
///
/// let tool = Arc::new(Calculator { schema: json!({"type": "object"}) });
/// let ctx = ToolCallHookContext::new("calculator", Default::default()).with_tool(tool);
/// // A hook reads the tool through the trait, or as its own type.
/// assert_eq!(ctx.tool.as_ref().map(|t| t.description()), Some("Adds two numbers"));
/// assert_eq!(ctx.tool_as::<Calculator>().map(|c| &c.schema["type"]), Some(&json!("object")));
/// ```
pub trait ToolInfo: Any + Send + Sync {
    /// The tool's normalized name.
    fn name(&self) -> &str;
    /// What the tool does, as the model is told.
    fn description(&self) -> &str;
    /// The JSON schema of the tool's arguments.
    fn args_schema(&self) -> &Value;

    /// What the tool declares about its effects (MCP annotations, or the
    /// same declared by any tool). The default declares nothing, which
    /// reads as "may be destructive" (see [`ToolAnnotations`]).
    fn annotations(&self) -> &ToolAnnotations {
        &crate::capability::UNDECLARED
    }

    /// The name of the MCP server the tool comes from, for tools of one.
    fn mcp_server(&self) -> Option<&str> {
        None
    }
}

/// What a hook can see of the agent making the call.
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::{AgentInfo, HookOptions, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// struct Researcher;
/// impl AgentInfo for Researcher {
///     fn role(&self) -> &str {
///         "Researcher"
///     }
/// }
///
/// // An `agents = [...]` filter matches the role.
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().agents(["Researcher"]),
///     |ctx: &mut ToolCallHookContext| {
///         let role = ctx.agent_role().unwrap_or_default().to_owned();
///         ctx.tool_input.insert("on_behalf_of".into(), role.into());
///     },
/// )?;
/// let mut ctx = ToolCallHookContext::new("search", Default::default()).with_agent(Arc::new(Researcher));
/// registry.dispatch(PRE_TOOL_CALL, &mut ctx);
/// assert_eq!(ctx.tool_input["on_behalf_of"], "Researcher");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub trait AgentInfo: Any + Send + Sync {
    /// The agent's role; `agents = [...]` filters match it exactly.
    fn role(&self) -> &str;

    /// The role as a shared string, for events. The default copies
    /// [`role`](Self::role); an agent that keeps its role in an `Arc<str>`
    /// returns a clone of it, so that reporting a dispatch allocates
    /// nothing.
    fn shared_role(&self) -> Arc<str> {
        Arc::from(self.role())
    }
}

/// What a hook can see of the task being worked on.
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::{StepContext, StepKind, TaskInfo};
///
/// struct Summarize;
/// impl TaskInfo for Summarize {
///     fn description(&self) -> &str {
///         "Summarize the findings in three bullet points"
///     }
/// }
///
/// let ctx = StepContext::new(StepKind::Task, "summary", "").with_task(Arc::new(Summarize));
/// // Without a name of its own, a task is named by its description.
/// assert_eq!(ctx.task.as_ref().map(|t| t.name()), Some("Summarize the findings in three bullet points"));
/// ```
pub trait TaskInfo: Any + Send + Sync {
    /// The task's description, with its inputs filled in.
    fn description(&self) -> &str;

    /// The task's name: the one it was given, else its description.
    fn name(&self) -> &str {
        self.description()
    }
}

/// What a hook can see of the crew running the call.
pub trait CrewInfo: Any + Send + Sync {
    /// The crew's name.
    fn name(&self) -> &str;

    /// Who the kickoff runs for, when it names someone (the person or
    /// account a service runs the crew on behalf of). The default names
    /// no one.
    fn user(&self) -> Option<&str> {
        None
    }

    /// The tenant the kickoff runs for, when it names one (the customer
    /// account of a service that runs crews for several). The default
    /// names none.
    ///
    /// ```
    /// use hooks_core::CrewInfo;
    ///
    /// struct Support;
    /// impl CrewInfo for Support {
    ///     fn name(&self) -> &str { "support" }
    ///     fn tenant(&self) -> Option<&str> { Some("acme") }
    /// }
    /// assert_eq!(Support.tenant(), Some("acme"));
    /// ```
    fn tenant(&self) -> Option<&str> {
        None
    }

    /// The id of the kickoff running the call: unguessable, unique per
    /// kickoff, the same for every call of one kickoff. The default has
    /// none.
    ///
    /// ```
    /// use hooks_core::CrewInfo;
    ///
    /// struct Nightly;
    /// impl CrewInfo for Nightly {
    ///     fn name(&self) -> &str {
    ///         "nightly"
    ///     }
    /// }
    /// assert_eq!(Nightly.kickoff_id(), None);
    /// ```
    fn kickoff_id(&self) -> Option<&str> {
        None
    }
}

/// What a hook can see of the model being called.
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::{HookAborted, HookRegistry, LlmCallHookContext, LlmInfo, PRE_MODEL_CALL};
///
/// struct Model(&'static str);
/// impl LlmInfo for Model {
///     fn name(&self) -> &str {
///         self.0
///     }
/// }
///
/// // Keep an expensive model for the final answer only.
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| -> Result<(), HookAborted> {
///     match ctx.llm.as_ref().map(|m| m.name()) {
///         Some("gpt-4o") if ctx.iterations > 1 => Err("use the small model for tool turns".into()),
///         _ => Ok(()),
///     }
/// })?;
/// let mut ctx = LlmCallHookContext::new(Vec::new()).with_llm(Arc::new(Model("gpt-4o"))).with_iterations(2);
/// assert!(registry.dispatch(PRE_MODEL_CALL, &mut ctx).aborted().is_some());
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub trait LlmInfo: Any + Send + Sync {
    /// The model's name (`gpt-4o-mini`, `scripted`, …).
    fn name(&self) -> &str;

    /// The most tokens one answer of the model may have, when its client
    /// sets a cap (Anthropic's `max_tokens`); `None` when nothing bounds
    /// an answer. What a token budget reserves before a call.
    ///
    /// ```
    /// use hooks_core::LlmInfo;
    ///
    /// struct Capped;
    /// impl LlmInfo for Capped {
    ///     fn name(&self) -> &str { "claude-sonnet-4-5" }
    ///     fn max_output_tokens(&self) -> Option<u64> { Some(1024) }
    /// }
    /// assert_eq!(Capped.max_output_tokens(), Some(1024));
    /// ```
    fn max_output_tokens(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::AgentInfo;
    use crate::human::{
        CallbackInput, ChannelInput, DEFAULT_HUMAN_INPUT_TIMEOUT, HumanInputError,
        HumanInputRequest, HumanInputSource, ScriptedInput,
    };
    use crate::redaction::{Redact, RedactionScope};
    use crate::{HookAborted, LlmCallHookContext, ToolCallHookContext};

    /// How long a test waits for something that must happen before it
    /// fails: generous, never reached when the code is right.
    const PATIENCE: Duration = Duration::from_secs(30);
    /// A timeout short enough for a test to wait it out.
    const SHORT: Duration = Duration::from_millis(20);

    struct Role(&'static str);

    impl AgentInfo for Role {
        fn role(&self) -> &str {
            self.0
        }
    }

    fn tool_call(source: impl HumanInputSource + 'static) -> ToolCallHookContext {
        ToolCallHookContext::new("send_email", Default::default())
            .with_human_input(Arc::new(source))
    }

    async fn ask(source: impl HumanInputSource + 'static) -> Result<String, HumanInputError> {
        tool_call(source)
            .request_human_input("Send it?", "yes/no")
            .await
    }

    /// A `PRE_TOOL_CALL` gate written the way the guide writes it.
    async fn gate(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        let answer = ctx.request_human_input("Send it?", "yes/no").await?;
        if answer == "yes" {
            Ok(())
        } else {
            Err(HookAborted::new("refused", "gate"))
        }
    }

    fn panicking() -> CallbackInput {
        CallbackInput::new(|_: HumanInputRequest| async {
            if true {
                panic!("the approval UI crashed");
            }
            Ok(String::new())
        })
    }

    /// A channel source whose UI drops every question unanswered.
    fn dropping_every_question() -> ChannelInput {
        let (source, mut questions) = ChannelInput::new(4);
        tokio::spawn(async move { while questions.recv().await.is_some() {} });
        source
    }

    #[tokio::test]
    async fn the_answer_is_trimmed() {
        assert_eq!(
            ask(ScriptedInput::new([" yes \r\n"])).await,
            Ok("yes".to_owned())
        );
    }

    #[tokio::test]
    async fn an_error_of_the_source_is_an_error() {
        let failing = CallbackInput::new(|_: HumanInputRequest| async {
            Err(HumanInputError::Io("broken pipe".into()))
        });
        assert_eq!(
            ask(failing).await,
            Err(HumanInputError::Io("broken pipe".into()))
        );
    }

    #[tokio::test]
    async fn a_closed_source_is_an_error() {
        let (closed, questions) = ChannelInput::new(4);
        drop(questions);
        assert_eq!(ask(closed).await, Err(HumanInputError::Closed));
        assert_eq!(
            ask(ScriptedInput::default().then_fail(HumanInputError::Closed)).await,
            Err(HumanInputError::Closed)
        );
    }

    #[tokio::test]
    async fn a_question_dropped_unanswered_is_closed() {
        assert_eq!(
            ask(dropping_every_question()).await,
            Err(HumanInputError::Closed)
        );
    }

    #[tokio::test]
    async fn a_source_that_times_out_is_an_error_and_a_late_reply_approves_nothing() {
        // Nobody answers: the question gives up after the context's timeout.
        let (silent, mut questions) = ChannelInput::new(4);
        let ctx = tool_call(silent).with_human_input_timeout(SHORT);
        let answer = ctx.request_human_input("Send it?", "yes/no").await;
        assert_eq!(answer, Err(HumanInputError::TimedOut(SHORT)));
        let late = questions.recv().await.expect("the question was sent");
        assert!(!late.reply("yes"), "nobody waits for a late answer");
    }

    #[tokio::test]
    async fn a_question_with_no_source_is_refused_and_a_gate_blocks() {
        // The engine has no default person: nobody is asked, and whatever
        // standard input is (a terminal or not), the answer is a refusal.
        let mut ctx = ToolCallHookContext::new("send_email", Default::default());
        assert_eq!(
            ctx.request_human_input("Send it?", "yes/no").await,
            Err(HumanInputError::NoSource)
        );
        assert_eq!(
            ctx.request_approval("Send it?", "yes/no").await,
            Err(HumanInputError::NoSource)
        );
        let model = LlmCallHookContext::new(Vec::new());
        assert_eq!(
            model.request_human_input("Call the model?", "yes/no").await,
            Err(HumanInputError::NoSource)
        );
        let refused = gate(&mut ctx)
            .await
            .expect_err("a gate with nobody to ask blocks");
        assert_eq!(refused.source, "human-input");
        assert!(
            refused.reason.contains("no human-input source is set"),
            "{}",
            refused.reason
        );
    }

    #[tokio::test]
    async fn a_source_that_never_returns_is_timed_out_too() {
        // Not even a channel: a source of its own that hangs.
        let hanging = CallbackInput::new(|_: HumanInputRequest| std::future::pending());
        let ctx = tool_call(hanging).with_human_input_timeout(SHORT);
        assert_eq!(
            ctx.request_human_input("Send it?", "").await,
            Err(HumanInputError::TimedOut(SHORT))
        );
    }

    #[tokio::test]
    async fn a_panicking_source_is_an_error_and_the_panic_stays_inside() {
        assert_eq!(
            ask(panicking()).await,
            Err(HumanInputError::SourceFailed(
                "it panicked: the approval UI crashed".into()
            ))
        );
        // Panicking in the function itself, before it returns a future.
        let formatted = CallbackInput::new(
            |request: HumanInputRequest| -> std::future::Ready<Result<String, HumanInputError>> {
                panic!("cannot show {:?}", request.prompt)
            },
        );
        assert_eq!(
            ask(formatted).await.map_err(|error| error.to_string()),
            Err("the answer source failed: it panicked: cannot show \"Send it?\"".into())
        );
        let non_text = CallbackInput::new(|_: HumanInputRequest| async {
            if true {
                std::panic::panic_any(42_u8);
            }
            Ok(String::new())
        });
        assert_eq!(
            ask(non_text).await,
            Err(HumanInputError::SourceFailed(
                "it panicked: a non-text panic payload".into()
            ))
        );
    }

    #[tokio::test]
    async fn every_failure_of_the_source_makes_the_gate_refuse() {
        let (closed, questions) = ChannelInput::new(4);
        drop(questions);
        let (silent, _questions) = ChannelInput::new(4);
        let sources: Vec<(&str, Arc<dyn HumanInputSource>)> = vec![
            (
                "error",
                Arc::new(CallbackInput::new(|_: HumanInputRequest| async {
                    Err(HumanInputError::Io("broken pipe".into()))
                })),
            ),
            ("panic", Arc::new(panicking())),
            ("timeout", Arc::new(silent)),
            ("closed channel", Arc::new(closed)),
            ("dropped reply", Arc::new(dropping_every_question())),
            ("no answer left", Arc::new(ScriptedInput::default())),
        ];
        for (failure, source) in sources {
            let mut ctx = ToolCallHookContext::new("send_email", Default::default())
                .with_human_input(source)
                .with_human_input_timeout(SHORT);
            let refusal = gate(&mut ctx).await.expect_err(failure);
            assert_eq!(refusal.source, "human-input", "{failure}");
            assert!(
                refusal.reason.starts_with("no human approval: "),
                "{failure}: {refusal:?}"
            );
        }
        let mut approved = tool_call(ScriptedInput::new(["yes"]));
        assert_eq!(gate(&mut approved).await, Ok(()));
    }

    #[tokio::test]
    async fn model_call_hooks_get_the_same_guarantee() {
        let ctx = LlmCallHookContext::new(Vec::new()).with_human_input(Arc::new(panicking()));
        assert_eq!(
            ctx.request_human_input("Call the model?", "yes/no").await,
            Err(HumanInputError::SourceFailed(
                "it panicked: the approval UI crashed".into()
            ))
        );
        let (silent, _questions) = ChannelInput::new(4);
        let ctx = LlmCallHookContext::new(Vec::new())
            .with_human_input(Arc::new(silent))
            .with_human_input_timeout(SHORT);
        assert_eq!(
            ctx.request_human_input("Call the model?", "yes/no").await,
            Err(HumanInputError::TimedOut(SHORT))
        );
    }

    #[tokio::test]
    async fn the_request_carries_the_call_id_tool_name_input_and_agent_role() {
        let script = Arc::new(ScriptedInput::new(["yes", "yes"]));
        let input = json!({"to": "team@example.com"});
        let tool =
            ToolCallHookContext::new("Send Email", input.as_object().cloned().unwrap_or_default())
                .with_call_id("call_2")
                .with_agent(Arc::new(Role("Assistant")))
                .with_human_input(script.clone());
        tool.request_human_input("Send it?", "yes/no")
            .await
            .expect("answered");
        let model = LlmCallHookContext::new(Vec::new())
            .with_agent(Arc::new(Role("Assistant")))
            .with_human_input(script.clone());
        model
            .request_human_input("Call the model?", "yes/no")
            .await
            .expect("answered");

        let mut expected_tool = HumanInputRequest::new("Send it?", "yes/no")
            .with_call_id("call_2")
            .with_tool("send_email", input)
            .with_agent_role("Assistant");
        // Each question carries its timeout, and what the tool declares (a
        // call without a tool: the undeclared default).
        expected_tool.timeout = Some(crate::DEFAULT_HUMAN_INPUT_TIMEOUT);
        expected_tool.tool_capabilities = Some(crate::ToolAnnotations::new().capabilities());
        let mut expected_model =
            HumanInputRequest::new("Call the model?", "yes/no").with_agent_role("Assistant");
        expected_model.timeout = Some(crate::DEFAULT_HUMAN_INPUT_TIMEOUT);
        assert_eq!(script.requests(), [expected_tool.clone(), expected_model]);
        // Without an id or an agent, those stay empty.
        let bare = Arc::new(ScriptedInput::new(["yes"]));
        let _ = ToolCallHookContext::new("send_email", Default::default())
            .with_human_input(bare.clone())
            .request_human_input("Send it?", "yes/no")
            .await;
        expected_tool.call_id = None;
        expected_tool.agent_role = None;
        expected_tool.tool_input = Some(json!({}));
        assert_eq!(bare.requests(), [expected_tool]);
    }

    struct HideKey;

    impl Redact for HideKey {
        fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
            if text.contains("sk-live-1234") {
                Cow::Owned(text.replace("sk-live-1234", "[KEY]"))
            } else {
                Cow::Borrowed(text)
            }
        }
    }

    #[tokio::test]
    async fn the_request_leaves_through_the_redaction_in_scope() {
        let script = Arc::new(ScriptedInput::new(["yes"]));
        let input = json!({"api_key": "sk-live-1234"});
        let ctx =
            ToolCallHookContext::new("deploy", input.as_object().cloned().unwrap_or_default())
                .with_human_input(script.clone());
        let redactor: Arc<dyn Redact> = Arc::new(HideKey);
        let question = {
            // The hook asks inside the crew's scope; the question is built
            // there, whenever it is awaited.
            let _scope = RedactionScope::enter(&redactor);
            ctx.request_human_input("Deploy with sk-live-1234?", "yes/no")
        };
        question.await.expect("answered");
        let asked = script.requests();
        assert_eq!(asked[0].prompt, "Deploy with [KEY]?");
        assert_eq!(asked[0].tool_input, Some(json!({"api_key": "[KEY]"})));
    }

    #[test]
    fn the_default_timeout_is_five_minutes() {
        assert_eq!(DEFAULT_HUMAN_INPUT_TIMEOUT, Duration::from_secs(300));
        let tool = ToolCallHookContext::new("send_email", Default::default());
        assert_eq!(tool.human_input_timeout(), DEFAULT_HUMAN_INPUT_TIMEOUT);
        let model = LlmCallHookContext::new(Vec::new());
        assert_eq!(model.human_input_timeout(), DEFAULT_HUMAN_INPUT_TIMEOUT);
    }

    #[test]
    fn a_question_times_out_without_a_tokio_runtime() {
        // A synchronous dispatch drives an async hook with a plain
        // executor: the timeout still holds.
        let (silent, _questions) = ChannelInput::new(4);
        let ctx = tool_call(silent).with_human_input_timeout(SHORT);
        let answer = futures_executor::block_on(ctx.request_human_input("Send it?", ""));
        assert_eq!(answer, Err(HumanInputError::TimedOut(SHORT)));
    }

    #[test]
    fn a_question_times_out_on_a_runtime_without_timers() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime without timers");
        let (silent, _questions) = ChannelInput::new(4);
        let ctx = tool_call(silent).with_human_input_timeout(SHORT);
        let answer = runtime.block_on(ctx.request_human_input("Send it?", ""));
        assert_eq!(answer, Err(HumanInputError::TimedOut(SHORT)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_question_does_not_block_other_tasks_on_a_current_thread_runtime() {
        let (source, mut questions) = ChannelInput::new(4);
        let ctx = tool_call(source);
        // The question waits on the runtime's only thread...
        let asking = tokio::spawn(async move { ctx.request_human_input("Send it?", "").await });
        // ...while this task (on the same thread) runs: it receives the
        // question, does other work, and answers.
        let question = tokio::time::timeout(PATIENCE, questions.recv())
            .await
            .expect("the other task ran while the question waited")
            .expect("a question");
        let other = tokio::spawn(async { 6 * 7 });
        assert_eq!(other.await.expect("another task ran"), 42);
        assert!(question.reply("yes"));
        let answer = tokio::time::timeout(PATIENCE, asking)
            .await
            .expect("answered in time")
            .expect("the asking task");
        assert_eq!(answer.as_deref(), Ok("yes"));
    }
}
