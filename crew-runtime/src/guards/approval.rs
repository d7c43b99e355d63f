//! [`ApprovalGate`]: a person approves chosen tool calls before they run.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::console::escape_control;
use hooks_core::runtime::{contain_panic, contain_panic_async, take_panic_message};
use hooks_core::{
    Capabilities, Capability, HookAborted, HookFuture, HumanAnswer, HumanInputFuture,
    ToolCallHookContext, normalize_tool_name,
};
use serde_json::{Map, Value};

/// The `source` of every refusal, as telemetry reports it.
///
/// ```
/// assert_eq!(crew_runtime::guards::APPROVAL_GATE_SOURCE, "approval-gate");
/// ```
pub const APPROVAL_GATE_SOURCE: &str = "approval-gate";

/// What [`ApprovalGate`] shows under the question unless told otherwise.
///
/// ```
/// use crew_runtime::guards::DEFAULT_APPROVAL_MESSAGE;
/// assert!(DEFAULT_APPROVAL_MESSAGE.contains("y or yes"));
/// ```
pub const DEFAULT_APPROVAL_MESSAGE: &str =
    "Answer y or yes to approve; anything else refuses the call.";

type Applies = dyn Fn(&ToolCallHookContext) -> bool + Send + Sync;
type Prompt = dyn Fn(&ToolCallHookContext) -> String + Send + Sync;
type Approves = dyn Fn(&str) -> bool + Send + Sync;

/// A ready-made `PRE_TOOL_CALL` guard: a person approves each call it
/// applies to, through the crew's human-input source (the terminal by
/// default), before the tool runs.
///
/// It is an `async` hook: while it waits for the person, the runtime's
/// threads go on with other work (the other calls of the turn, other
/// crews). Each question carries the call's id, tool, input and agent (see
/// [`HumanInputRequest`](crate::HumanInputRequest)), so an answer approves
/// that call only.
///
/// It fails closed: the call runs only when a person answered and the
/// answer approves. No answer (input closed, not a terminal, the crew's
/// [human-input timeout](crate::CrewBuilder::human_input_timeout), a
/// source that fails or panics) refuses the call, and so does a panic in
/// any closure given to the gate, however the hook is registered (fail-open
/// or fail-closed). Every refusal is a [`HookAborted`] whose source is
/// [`APPROVAL_GATE_SOURCE`].
///
/// - Which calls: [`for_tools`](Self::for_tools) (names normalized like
///   tool names), [`for_capabilities`](Self::for_capabilities) (what the
///   tool declares), [`when`](Self::when) (any predicate over the call) or
///   [`every_call`](Self::every_call).
/// - The question: [`default_prompt`](Self::default_prompt) names the tool
///   and the agent and shows the input, escaped; change it with
///   [`prompt`](Self::prompt) and [`message`](Self::message).
/// - The answer: approved only on `y` or `yes` in any case
///   ([`is_yes`](Self::is_yes)); change it with
///   [`approve_if`](Self::approve_if).
///
/// Register [`pre_hook`](Self::pre_hook) as an `async` hook, globally
/// (`register_async_hook_with`) or on one crew
/// ([`CrewBuilder::async_hook_with`](crate::CrewBuilder::async_hook_with)).
/// Cloning is cheap; clones share their closures.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::guards::ApprovalGate;
/// use crew_runtime::prelude::*;
/// use crew_runtime::ScriptedInput;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let gate = ApprovalGate::for_tools(["send_email", "Make Purchase"]);
///
/// let ctx = ToolCallHookContext::new("send_email", Default::default())
///     .with_human_input(Arc::new(ScriptedInput::new(["Yes"])));
/// assert!(gate.check(&ctx).await.is_ok(), "approved");
/// // The script has no answer left: no answer refuses.
/// let refused = gate.check(&ctx).await.err();
/// assert_eq!(refused.map(|a| a.source), Some("approval-gate".to_owned()));
///
/// let registry = HookRegistry::new();
/// registry.register_async_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("approval-gate"),
///     gate.pre_hook(),
/// )?;
/// # Ok(())
/// # }
/// ```
///
/// The gate cannot be registered as a synchronous hook (it would have to
/// block a thread while the person thinks): that does not compile.
///
/// ```compile_fail,E0277
/// use crew_runtime::guards::ApprovalGate;
/// use crew_runtime::prelude::*;
///
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_TOOL_CALL, ApprovalGate::every_call().pre_hook());
/// ```
#[derive(Clone)]
pub struct ApprovalGate {
    applies: Arc<Applies>,
    prompt: Arc<Prompt>,
    message: Arc<str>,
    approves: Arc<Approves>,
}

impl ApprovalGate {
    /// A gate on the calls of these tools. Names are normalized the way
    /// tool names are (`"Send Email"`, `"sendEmail"` and `"send_email"` are
    /// one name) and matched exactly; an empty list gates nothing.
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// let gate = ApprovalGate::for_tools(["Send Email"]);
    /// assert!(gate.applies_to(&ToolCallHookContext::new("send-email", Default::default())));
    /// assert!(!gate.applies_to(&ToolCallHookContext::new("send_emails", Default::default())));
    /// ```
    pub fn for_tools<I, S>(tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let tools: Vec<String> = tools
            .into_iter()
            .map(|tool| normalize_tool_name(tool.as_ref()))
            .collect();
        ApprovalGate::when(move |ctx| tools.iter().any(|tool| tool == ctx.tool_name()))
    }

    /// A gate on the calls whose tool has any of these capabilities, as
    /// its [`ToolAnnotations`](crate::ToolAnnotations) read (a tool that
    /// declares nothing counts as destructive and open-world). A call
    /// without a tool (the model named a tool the agent does not have)
    /// runs nothing and is not asked about; an empty list gates nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::ToolAnnotations;
    /// use crew_runtime::ToolInfo;
    ///
    /// let gate = ApprovalGate::for_capabilities([Capability::Destructive]);
    /// let wipe = Tool::dynamic("wipe_disk", "Wipes a disk", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("wiped"))
    /// })
    /// .with_annotations(ToolAnnotations::new().destructive(true));
    /// let call = ToolCallHookContext::new("wipe_disk", Default::default())
    ///     .with_tool(Arc::new(wipe) as Arc<dyn ToolInfo>);
    /// assert!(gate.applies_to(&call));
    /// assert!(!gate.applies_to(&ToolCallHookContext::new("wipe_disk", Default::default())));
    /// ```
    pub fn for_capabilities(capabilities: impl IntoIterator<Item = Capability>) -> Self {
        let gated: Capabilities = capabilities.into_iter().collect();
        ApprovalGate::when(move |ctx| {
            ctx.tool
                .as_deref()
                .is_some_and(|tool| tool.annotations().capabilities().intersects(gated))
        })
    }

    /// A gate on the calls for which `applies` is true: by capability, by
    /// agent, by what the input holds.
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// // Purchases above $100 need a person's approval.
    /// let gate = ApprovalGate::when(|ctx| {
    ///     ctx.tool_name() == "make_purchase"
    ///         && ctx.tool_input["amount_usd"].as_f64().is_none_or(|amount| amount > 100.0)
    /// });
    /// let mut input = serde_json::Map::new();
    /// input.insert("amount_usd".into(), json!(20.0));
    /// assert!(!gate.applies_to(&ToolCallHookContext::new("make_purchase", input)));
    /// ```
    pub fn when(applies: impl Fn(&ToolCallHookContext) -> bool + Send + Sync + 'static) -> Self {
        ApprovalGate {
            applies: Arc::new(applies),
            prompt: Arc::new(ApprovalGate::default_prompt),
            message: Arc::from(DEFAULT_APPROVAL_MESSAGE),
            approves: Arc::new(ApprovalGate::is_yes),
        }
    }

    /// A gate on every call.
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// let gate = ApprovalGate::every_call();
    /// assert!(gate.applies_to(&ToolCallHookContext::new("web_search", Default::default())));
    /// ```
    pub fn every_call() -> Self {
        ApprovalGate::when(|_| true)
    }

    /// Asks `prompt(ctx)` instead of the [default
    /// question](Self::default_prompt).
    ///
    /// The terminal escapes what it shows, but another source (a chat, a
    /// web page) gets the text as it is: escape the parts a model chose
    /// with [`escape_control`](crate::console::escape_control) if that
    /// source shows them raw.
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// let gate = ApprovalGate::for_tools(["send_email"]).prompt(|ctx| {
    ///     let to = ctx.tool_input["to"].as_str().unwrap_or("nobody");
    ///     format!("Send an e-mail to {}?", crew_runtime::console::escape_control(to))
    /// });
    /// # let _ = gate;
    /// ```
    pub fn prompt(
        mut self,
        prompt: impl Fn(&ToolCallHookContext) -> String + Send + Sync + 'static,
    ) -> Self {
        self.prompt = Arc::new(prompt);
        self
    }

    /// Shows `message` under the question instead of
    /// [`DEFAULT_APPROVAL_MESSAGE`]; say what approves when you change
    /// [`approve_if`](Self::approve_if).
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    ///
    /// let gate = ApprovalGate::for_tools(["deploy"])
    ///     .message("Type the word deploy to approve.")
    ///     .approve_if(|answer| answer == "deploy");
    /// # let _ = gate;
    /// ```
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Arc::from(message.into());
        self
    }

    /// Approves when `approves(answer)` is true (the answer is trimmed),
    /// instead of on [`is_yes`](Self::is_yes).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::ScriptedInput;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gate = ApprovalGate::every_call()
    ///     .message("Type APPROVE to approve.")
    ///     .approve_if(|answer| answer == "APPROVE");
    /// let ctx = ToolCallHookContext::new("deploy", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes", "APPROVE"])));
    /// assert!(gate.check(&ctx).await.is_err());
    /// assert!(gate.check(&ctx).await.is_ok());
    /// # }
    /// ```
    pub fn approve_if(mut self, approves: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.approves = Arc::new(approves);
        self
    }

    /// Whether the gate asks about this call.
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// let gate = ApprovalGate::for_tools(["send_email"]);
    /// assert!(!gate.applies_to(&ToolCallHookContext::new("web_search", Default::default())));
    /// ```
    pub fn applies_to(&self, ctx: &ToolCallHookContext) -> bool {
        (self.applies)(ctx)
    }

    /// The default question: the tool, the agent when there is one, and
    /// the input as indented JSON, every control character in them escaped
    /// (see [`escape_control`](crate::console::escape_control)), so that a
    /// model-chosen argument shows as what it is on any source.
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// let mut input = serde_json::Map::new();
    /// input.insert("to".into(), json!("team@example.com\u{202e}"));
    /// let ctx = ToolCallHookContext::new("send_email", input);
    /// assert_eq!(
    ///     ApprovalGate::default_prompt(&ctx),
    ///     "Approve the call of send_email?\nInput: {\n  \"to\": \"team@example.com\\u{202e}\"\n}"
    /// );
    /// ```
    pub fn default_prompt(ctx: &ToolCallHookContext) -> String {
        let mut prompt = format!("Approve the call of {}", ctx.tool_name());
        if let Some(role) = ctx.agent_role() {
            prompt.push_str(" by ");
            prompt.push_str(&escape_control(role));
        }
        prompt.push_str("?\nInput: ");
        // JSON escapes the C0 controls in strings but not DEL, the C1
        // controls or bidi overrides: escape what is left, line by line so
        // the indentation stays.
        // Keys sorted at every level, whatever order serde_json keeps.
        let mut input = Value::Object(ctx.tool_input.clone());
        input.sort_all_objects();
        let input = serde_json::to_string_pretty(&input)
            .unwrap_or_else(|error| format!("(the input cannot be shown: {error})"));
        for (n, line) in input.lines().enumerate() {
            if n > 0 {
                prompt.push('\n');
            }
            prompt.push_str(&escape_control(line));
        }
        prompt
    }

    /// The default answer rule: `y` or `yes`, in any case, approves;
    /// anything else refuses.
    ///
    /// ```
    /// use crew_runtime::guards::ApprovalGate;
    ///
    /// assert!(ApprovalGate::is_yes("y") && ApprovalGate::is_yes("YES"));
    /// assert!(!ApprovalGate::is_yes("yes please") && !ApprovalGate::is_yes(""));
    /// ```
    pub fn is_yes(answer: &str) -> bool {
        answer.eq_ignore_ascii_case("y") || answer.eq_ignore_ascii_case("yes")
    }

    /// Asks about `ctx` when the gate applies to it, and lets it through
    /// only when the answer approves. The question is prepared from `ctx`
    /// here; the future only waits for the answer (it borrows nothing).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::ScriptedInput;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gate = ApprovalGate::for_tools(["send_email"]);
    /// let ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["no"])));
    /// let refused = gate.check(&ctx).await.err().map(|a| a.reason);
    /// assert_eq!(refused.as_deref(), Some("refused by a person (answered \"no\")"));
    /// # }
    /// ```
    pub fn check(
        &self,
        ctx: &ToolCallHookContext,
    ) -> impl Future<Output = Result<(), HookAborted>> + Send + 'static {
        let decided = self.decide(ctx);
        async move {
            match decided.await? {
                None => Ok(()),
                // Running the call as asked about would ignore the person.
                Some(_) => Err(HookAborted::new(
                    "the approver edited the arguments, which `check` cannot apply: \
                     register `pre_hook`, or apply `decide`'s edit",
                    APPROVAL_GATE_SOURCE,
                )),
            }
        }
    }

    /// Asks about `ctx` when the gate applies to it, like
    /// [`check`](Self::check), and returns the arguments the approver
    /// edited, if they did: the call is to run with them
    /// ([`pre_hook`](Self::pre_hook) puts them in the context's
    /// `tool_input`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::ScriptedInput;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gate = ApprovalGate::for_tools(["send_email"]);
    /// let ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes"])));
    /// assert_eq!(gate.decide(&ctx).await, Ok(None), "approved as asked");
    /// # }
    /// ```
    pub fn decide(
        &self,
        ctx: &ToolCallHookContext,
    ) -> impl Future<Output = Result<Option<Map<String, Value>>, HookAborted>> + Send + 'static
    {
        // A panic in a closure given to the gate refuses the call even when
        // the hook was registered fail-open: each step is contained here,
        // the gate's own closures as well as the wait.
        let question = contain_panic(AssertUnwindSafe(|| self.ask(ctx)));
        let approves = Arc::clone(&self.approves);
        async move {
            let question = match question {
                Ok(Some(question)) => question,
                Ok(None) => return Ok(None),
                Err(panic) => return Err(gate_panicked(panic)),
            };
            let decided = contain_panic_async(AssertUnwindSafe(async move {
                let answer = question.await.map_err(|error| {
                    HookAborted::new(format!("no human approval: {error}"), APPROVAL_GATE_SOURCE)
                })?;
                if approves(&answer.text) {
                    Ok(answer.edited_input)
                } else {
                    let mut reason = format!("refused by a person (answered {:?}", answer.text);
                    if let Some(who) = &answer.answered_by {
                        reason.push_str(&format!(", by {}", escape_control(who)));
                    }
                    if let Some(comment) = answer.comment.as_deref().filter(|c| !c.is_empty()) {
                        reason.push_str(&format!(": {}", escape_control(comment)));
                    }
                    reason.push(')');
                    Err(HookAborted::new(reason, APPROVAL_GATE_SOURCE))
                }
            }))
            .await;
            decided.unwrap_or_else(|panic| Err(gate_panicked(panic)))
        }
    }

    /// The question about `ctx`, or `None` when the gate does not apply.
    fn ask(&self, ctx: &ToolCallHookContext) -> Option<HumanInputFuture<HumanAnswer>> {
        if !(self.applies)(ctx) {
            return None;
        }
        let prompt = (self.prompt)(ctx);
        // A web page or a chat shows the call beside the question: its
        // first line says why, without the input the page shows anyway.
        let reason = prompt
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .unwrap_or("a person must approve this call")
            .to_owned();
        Some(ctx.request_approval_with_reason(&prompt, &self.message, &reason))
    }

    /// The gate as an `async` `PRE_TOOL_CALL` hook, to register globally
    /// (`register_async_hook_with`) or on a crew
    /// ([`CrewBuilder::async_hook_with`](crate::CrewBuilder::async_hook_with)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::TerminalInput;
    ///
    /// let assistant = Agent::builder("Assistant")
    ///     .llm(Arc::new(ScriptedLlm::new().answer("done")))
    ///     .build();
    /// let crew = Crew::builder()
    ///     .agent(assistant.clone())
    ///     .task(Task::builder("Run errands").agent(&assistant).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .human_input(Arc::new(TerminalInput::new()))
    ///     .human_input_timeout(Duration::from_secs(120))
    ///     .async_hook_with(
    ///         PRE_TOOL_CALL,
    ///         HookOptions::new().name("approval-gate"),
    ///         ApprovalGate::for_tools(["send_email", "make_purchase"]).pre_hook(),
    ///     )
    ///     .build()?;
    /// # let _ = crew;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pre_hook(
        &self,
    ) -> impl for<'c> Fn(&'c mut ToolCallHookContext) -> HookFuture<'c, Result<(), HookAborted>>
    + Send
    + Sync
    + 'static {
        let gate = self.clone();
        move |ctx: &mut ToolCallHookContext| -> HookFuture<'_, Result<(), HookAborted>> {
            let decided = gate.decide(ctx);
            Box::pin(async move {
                if let Some(edit) = decided.await? {
                    // The tool receives what the approver approved.
                    ctx.tool_input = edit;
                }
                Ok(())
            })
        }
    }
}

/// The refusal of a gate whose own closure panicked.
fn gate_panicked(panic: Box<dyn std::any::Any + Send>) -> HookAborted {
    let reason = format!("the approval gate panicked: {}", take_panic_message(panic));
    HookAborted::new(reason, APPROVAL_GATE_SOURCE)
}

impl fmt::Debug for ApprovalGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalGate")
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use hooks_core::{
        CallbackInput, ChannelInput, HookRegistry, HumanInputError, HumanInputRequest,
        HumanInputSource, PRE_TOOL_CALL, ScriptedInput,
    };
    use serde_json::{Map, Value, json};

    use super::*;

    /// A timeout short enough for a test to wait it out.
    const SHORT: Duration = Duration::from_millis(20);

    fn call(tool: &str, input: Value, answers: &[&str]) -> ToolCallHookContext {
        let input = match input {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        ToolCallHookContext::new(tool, input)
            .with_human_input(Arc::new(ScriptedInput::new(answers.iter().copied())))
    }

    fn reason(result: Result<(), HookAborted>) -> Option<(String, String)> {
        result.err().map(|abort| (abort.source, abort.reason))
    }

    #[tokio::test]
    async fn only_y_or_yes_approves_by_default() {
        let gate = ApprovalGate::for_tools(["send_email"]);
        for yes in ["y", "Y", "yes", "YES", "Yes", "  yes \n"] {
            let ctx = call("send_email", json!({}), &[yes]);
            assert_eq!(gate.check(&ctx).await, Ok(()));
        }
        for no in [
            "",
            "n",
            "no",
            "yes please",
            "yy",
            "ye",
            "sí",
            "y\u{1b}",
            "ok",
        ] {
            let ctx = call("send_email", json!({}), &[no]);
            assert!(gate.check(&ctx).await.is_err(), "{no:?} approved");
        }
    }

    #[tokio::test]
    async fn a_refusal_names_the_answer_escaped() {
        let gate = ApprovalGate::for_tools(["send_email"]);
        let ctx = call("send_email", json!({}), &["n\u{1b}[2J"]);
        assert_eq!(
            reason(gate.check(&ctx).await),
            Some((
                "approval-gate".to_owned(),
                "refused by a person (answered \"n\\u{1b}[2J\")".to_owned()
            ))
        );
    }

    #[tokio::test]
    async fn tools_are_matched_by_normalized_name_exactly() {
        let gate = ApprovalGate::for_tools(["SendEmail", "make-purchase"]);
        for gated in ["send_email", "Send Email", "sendEmail", "make_purchase"] {
            let ctx = ToolCallHookContext::new(gated, Map::new());
            assert!(gate.applies_to(&ctx), "{gated}");
        }
        for free in ["send", "send_email_draft", "email", "purchase"] {
            // No answer is needed: a call the gate does not apply to is
            // never asked about.
            let ctx = call(free, json!({}), &[]);
            assert!(!gate.applies_to(&ctx), "{free}");
            assert_eq!(gate.check(&ctx).await, Ok(()));
        }
        let nothing = ApprovalGate::for_tools(Vec::<String>::new());
        assert!(!nothing.applies_to(&ToolCallHookContext::new("send_email", Map::new())));
    }

    #[tokio::test]
    async fn every_failure_to_get_an_answer_refuses() {
        let (closed, questions) = ChannelInput::new(4);
        drop(questions);
        let (silent, _questions) = ChannelInput::new(4);
        let (dropping, mut dropped) = ChannelInput::new(4);
        tokio::spawn(async move { while dropped.recv().await.is_some() {} });
        let sources: Vec<(Arc<dyn HumanInputSource>, &str)> = vec![
            (
                Arc::new(ScriptedInput::default()),
                "the scripted answers are used up",
            ),
            (Arc::new(closed), "human input is closed"),
            (Arc::new(dropping), "human input is closed"),
            (Arc::new(silent), "no answer within 20ms"),
            (
                Arc::new(CallbackInput::new(|_: HumanInputRequest| async {
                    Err(HumanInputError::NotATerminal)
                })),
                "standard input is not a terminal",
            ),
            (
                Arc::new(CallbackInput::new(|_: HumanInputRequest| async {
                    if true {
                        panic!("the approval UI crashed");
                    }
                    Ok(String::new())
                })),
                "the answer source failed: it panicked: the approval UI crashed",
            ),
        ];
        let gate = ApprovalGate::for_tools(["send_email"]);
        for (source, expected) in sources {
            // Only the silent source waits out its timeout; the others fail
            // at once, and a loaded machine must not turn their failure
            // into a timeout.
            let timeout = if expected.starts_with("no answer") {
                SHORT
            } else {
                Duration::from_secs(30)
            };
            let ctx = ToolCallHookContext::new("send_email", Map::new())
                .with_human_input(source)
                .with_human_input_timeout(timeout);
            let (source, reason) = reason(gate.check(&ctx).await).expect("refused");
            assert_eq!(source, "approval-gate");
            assert!(reason.starts_with("no human approval: "), "{reason}");
            assert!(reason.contains(expected), "{reason}");
        }
    }

    #[tokio::test]
    async fn a_panic_in_the_gates_own_closures_refuses() {
        let in_predicate = ApprovalGate::when(|_| panic!("predicate bug"));
        let in_prompt = ApprovalGate::every_call().prompt(|_| panic!("prompt bug"));
        let in_rule = ApprovalGate::every_call().approve_if(|_| panic!("rule bug"));
        for (gate, bug) in [
            (in_predicate, "predicate bug"),
            (in_prompt, "prompt bug"),
            (in_rule, "rule bug"),
        ] {
            let ctx = call("deploy", json!({}), &["yes"]);
            assert_eq!(
                reason(gate.check(&ctx).await),
                Some((
                    "approval-gate".to_owned(),
                    format!("the approval gate panicked: {bug}")
                ))
            );
        }
    }

    #[tokio::test]
    async fn the_gate_refuses_on_a_panic_even_registered_fail_open() {
        // Registered with the default options (fail-open): a panic that
        // reached the dispatcher would let the call through. The gate's own
        // containment refuses instead.
        let registry = HookRegistry::new();
        registry
            .register_async_hook(
                PRE_TOOL_CALL,
                ApprovalGate::every_call()
                    .approve_if(|_| panic!("rule bug"))
                    .pre_hook(),
            )
            .expect("registers");
        let mut ctx = call("deploy", json!({}), &["yes"]);
        let outcome = registry
            .dispatcher()
            .begin_call(&hooks_core::runtime::TOOL_CALL_POINTS)
            .dispatch_async(PRE_TOOL_CALL, &mut ctx)
            .await;
        match outcome {
            hooks_core::DispatchOutcome::Aborted(abort) => {
                assert_eq!(abort.source, "approval-gate");
                assert_eq!(abort.reason, "the approval gate panicked: rule bug");
            }
            other => panic!("the call was not refused: {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_default_question_names_the_tool_and_shows_the_input_escaped() {
        let source = Arc::new(ScriptedInput::new(["no"]));
        let ctx = call(
            "send_email",
            json!({
                "subject": "\u{1b}[2Jhi\u{1b}]0;title\u{7}",
                "to": "bob@example.com\u{202e}moc.live",
                "note": "del\u{7f} csi\u{9b}",
            }),
            &[],
        )
        .with_human_input(source.clone());
        let _ = ApprovalGate::for_tools(["send_email"]).check(&ctx).await;
        assert_eq!(
            source.prompts(),
            [(
                "Approve the call of send_email?\nInput: {\n  \
                 \"note\": \"del\\x7f csi\\u{9b}\",\n  \
                 \"subject\": \"\\u001b[2Jhi\\u001b]0;title\\u0007\",\n  \
                 \"to\": \"bob@example.com\\u{202e}moc.live\"\n}"
                    .to_owned(),
                DEFAULT_APPROVAL_MESSAGE.to_owned()
            )]
        );
    }

    #[tokio::test]
    async fn a_custom_question_message_and_rule_are_used() {
        let source = Arc::new(ScriptedInput::new(["deploy", "y"]));
        let gate = ApprovalGate::every_call()
            .prompt(|ctx| format!("Really run {}?", ctx.tool_name()))
            .message("Type deploy to approve.")
            .approve_if(|answer| answer == "deploy");
        let ctx = ToolCallHookContext::new("Deploy", Map::new()).with_human_input(source.clone());
        assert_eq!(gate.check(&ctx).await, Ok(()));
        assert!(gate.check(&ctx).await.is_err(), "y no longer approves");
        assert_eq!(
            source.prompts(),
            vec![
                (
                    "Really run deploy?".to_owned(),
                    "Type deploy to approve.".to_owned()
                );
                2
            ]
        );
    }

    #[tokio::test]
    async fn the_hook_asks_once_per_call_about_that_call() {
        let source = Arc::new(ScriptedInput::new(["y", "n"]));
        let hook = ApprovalGate::for_tools(["send_email"]).pre_hook();
        let mut first = ToolCallHookContext::new("send_email", Map::new())
            .with_call_id("call_1")
            .with_human_input(source.clone());
        let mut second = ToolCallHookContext::new("send_email", Map::new())
            .with_call_id("call_2")
            .with_human_input(source.clone());
        assert_eq!(hook(&mut first).await, Ok(()));
        assert!(hook(&mut second).await.is_err());
        let ids: Vec<Option<String>> = source.requests().into_iter().map(|r| r.call_id).collect();
        assert_eq!(ids, [Some("call_1".to_owned()), Some("call_2".to_owned())]);
    }

    #[test]
    fn the_question_borrows_nothing_from_the_call() {
        fn is_static_and_send<T: Send + 'static>(_: &T) {}
        let ctx = call("send_email", json!({}), &["y"]);
        let question = ApprovalGate::every_call().check(&ctx);
        drop(ctx);
        is_static_and_send(&question);
    }
}
