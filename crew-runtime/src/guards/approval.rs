//! [`ApprovalGate`]: a person approves chosen tool calls before they run.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use hooks_core::console::escape_control;
use hooks_core::runtime::panic_message;
use hooks_core::{HookAborted, ToolCallHookContext, normalize_tool_name};

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
/// It fails closed: the call runs only when a person answered and the
/// answer approves. No answer (input closed, not a terminal, a timeout, a
/// source that fails or panics) refuses the call, and so does a panic in
/// any closure given to the gate, however the hook is registered. Every
/// refusal is a [`HookAborted`] whose source is
/// [`APPROVAL_GATE_SOURCE`].
///
/// - Which calls: [`for_tools`](Self::for_tools) (names normalized like
///   tool names), [`when`](Self::when) (any predicate over the call) or
///   [`every_call`](Self::every_call).
/// - The question: [`default_prompt`](Self::default_prompt) names the tool
///   and the agent and shows the input, escaped; change it with
///   [`prompt`](Self::prompt) and [`message`](Self::message).
/// - The answer: approved only on `y` or `yes` in any case
///   ([`is_yes`](Self::is_yes)); change it with
///   [`approve_if`](Self::approve_if).
///
/// Register [`pre_hook`](Self::pre_hook) like any hook, globally or on one
/// crew. Cloning is cheap; clones share their closures.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::guards::ApprovalGate;
/// use crew_runtime::prelude::*;
///
/// let gate = ApprovalGate::for_tools(["send_email", "Make Purchase"]);
///
/// let mut ctx = ToolCallHookContext::new("send_email", Default::default())
///     .with_human_input(Arc::new(ScriptedInput::new(["Yes"])));
/// assert!(gate.check(&ctx).is_ok(), "approved");
/// // The script has no answer left: no answer refuses.
/// let refused = gate.check(&ctx).err();
/// assert_eq!(refused.map(|a| a.source), Some("approval-gate".to_owned()));
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("approval-gate"),
///     gate.pre_hook(),
/// )?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
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
    ///
    /// let gate = ApprovalGate::every_call()
    ///     .message("Type APPROVE to approve.")
    ///     .approve_if(|answer| answer == "APPROVE");
    /// let ctx = ToolCallHookContext::new("deploy", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes", "APPROVE"])));
    /// assert!(gate.check(&ctx).is_err());
    /// assert!(gate.check(&ctx).is_ok());
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
        let input = serde_json::to_string_pretty(&ctx.tool_input)
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
    /// only when the answer approves.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// let gate = ApprovalGate::for_tools(["send_email"]);
    /// let ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["no"])));
    /// let refused = gate.check(&ctx).err().map(|a| a.reason);
    /// assert_eq!(refused.as_deref(), Some("refused by a person (answered \"no\")"));
    /// ```
    pub fn check(&self, ctx: &ToolCallHookContext) -> Result<(), HookAborted> {
        // A panic in a closure given to the gate refuses the call even when
        // the hook was registered fail-open.
        match catch_unwind(AssertUnwindSafe(|| self.decide(ctx))) {
            Ok(decision) => decision,
            Err(panic) => {
                let reason = format!("the approval gate panicked: {}", panic_message(&*panic));
                // A payload whose drop panics again is leaked rather than
                // unwinding out of the gate.
                if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(panic))) {
                    std::mem::forget(again);
                }
                Err(HookAborted::new(reason, APPROVAL_GATE_SOURCE))
            }
        }
    }

    fn decide(&self, ctx: &ToolCallHookContext) -> Result<(), HookAborted> {
        if !(self.applies)(ctx) {
            return Ok(());
        }
        let prompt = (self.prompt)(ctx);
        let answer = ctx
            .request_human_input(&prompt, &self.message)
            .map_err(|error| {
                HookAborted::new(format!("no human approval: {error}"), APPROVAL_GATE_SOURCE)
            })?;
        if (self.approves)(&answer) {
            Ok(())
        } else {
            Err(HookAborted::new(
                format!("refused by a person (answered {answer:?})"),
                APPROVAL_GATE_SOURCE,
            ))
        }
    }

    /// The gate as a `PRE_TOOL_CALL` hook, to register globally or on a
    /// crew.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::ApprovalGate;
    /// use crew_runtime::prelude::*;
    ///
    /// let assistant = Agent::builder("Assistant")
    ///     .llm(Arc::new(ScriptedLlm::new().answer("done")))
    ///     .build();
    /// let crew = Crew::builder()
    ///     .agent(assistant.clone())
    ///     .task(Task::builder("Run errands").agent(&assistant).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .human_input(Arc::new(TerminalInput::new()))
    ///     .hook_with(
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
    ) -> impl Fn(&mut ToolCallHookContext) -> Result<(), HookAborted> + Send + Sync + 'static {
        let gate = self.clone();
        move |ctx: &mut ToolCallHookContext| gate.check(ctx)
    }
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

    use hooks_core::{CallbackInput, ChannelInput, HumanInputError, ScriptedInput};
    use serde_json::{Map, Value, json};

    use super::*;

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

    #[test]
    fn only_y_or_yes_approves_by_default() {
        let gate = ApprovalGate::for_tools(["send_email"]);
        for yes in ["y", "Y", "yes", "YES", "Yes", "  yes \n"] {
            assert_eq!(gate.check(&call("send_email", json!({}), &[yes])), Ok(()));
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
            assert!(
                gate.check(&call("send_email", json!({}), &[no])).is_err(),
                "{no:?} approved"
            );
        }
    }

    #[test]
    fn a_refusal_names_the_answer_escaped() {
        let gate = ApprovalGate::for_tools(["send_email"]);
        assert_eq!(
            reason(gate.check(&call("send_email", json!({}), &["n\u{1b}[2J"]))),
            Some((
                "approval-gate".to_owned(),
                "refused by a person (answered \"n\\u{1b}[2J\")".to_owned()
            ))
        );
    }

    #[test]
    fn tools_are_matched_by_normalized_name_exactly() {
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
            assert_eq!(gate.check(&ctx), Ok(()));
        }
        let nothing = ApprovalGate::for_tools(Vec::<String>::new());
        assert!(!nothing.applies_to(&ToolCallHookContext::new("send_email", Map::new())));
    }

    #[test]
    fn every_failure_to_get_an_answer_refuses() {
        let (closed, questions) = ChannelInput::new(Duration::from_secs(30));
        drop(questions);
        let (silent, _questions) = ChannelInput::new(Duration::from_millis(10));
        let sources: Vec<(Arc<dyn hooks_core::HumanInputSource>, &str)> = vec![
            (
                Arc::new(ScriptedInput::default()),
                "the scripted answers are used up",
            ),
            (Arc::new(closed), "human input is closed"),
            (Arc::new(silent), "no answer within 10ms"),
            (
                Arc::new(CallbackInput::new(|_: &str, _: &str| {
                    Err(HumanInputError::NotATerminal)
                })),
                "standard input is not a terminal",
            ),
            (
                Arc::new(CallbackInput::new(
                    |_: &str, _: &str| -> Result<String, HumanInputError> {
                        panic!("the approval UI crashed")
                    },
                )),
                "the answer source failed: it panicked: the approval UI crashed",
            ),
        ];
        let gate = ApprovalGate::for_tools(["send_email"]);
        for (source, expected) in sources {
            let ctx = ToolCallHookContext::new("send_email", Map::new()).with_human_input(source);
            let (source, reason) = reason(gate.check(&ctx)).expect("refused");
            assert_eq!(source, "approval-gate");
            assert!(reason.starts_with("no human approval: "), "{reason}");
            assert!(reason.contains(expected), "{reason}");
        }
    }

    #[test]
    fn a_panic_in_the_gates_own_closures_refuses() {
        let in_predicate = ApprovalGate::when(|_| panic!("predicate bug"));
        let in_prompt = ApprovalGate::every_call().prompt(|_| panic!("prompt bug"));
        let in_rule = ApprovalGate::every_call().approve_if(|_| panic!("rule bug"));
        for (gate, bug) in [
            (in_predicate, "predicate bug"),
            (in_prompt, "prompt bug"),
            (in_rule, "rule bug"),
        ] {
            assert_eq!(
                reason(gate.check(&call("deploy", json!({}), &["yes"]))),
                Some((
                    "approval-gate".to_owned(),
                    format!("the approval gate panicked: {bug}")
                ))
            );
        }
    }

    #[test]
    fn the_default_question_names_the_tool_and_shows_the_input_escaped() {
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
        let _ = ApprovalGate::for_tools(["send_email"]).check(&ctx);
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

    #[test]
    fn a_custom_question_message_and_rule_are_used() {
        let source = Arc::new(ScriptedInput::new(["deploy", "y"]));
        let gate = ApprovalGate::every_call()
            .prompt(|ctx| format!("Really run {}?", ctx.tool_name()))
            .message("Type deploy to approve.")
            .approve_if(|answer| answer == "deploy");
        let ctx = ToolCallHookContext::new("Deploy", Map::new()).with_human_input(source.clone());
        assert_eq!(gate.check(&ctx), Ok(()));
        assert!(gate.check(&ctx).is_err(), "y no longer approves");
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

    #[test]
    fn the_hook_asks_once_per_call() {
        let source = Arc::new(ScriptedInput::new(["y", "n"]));
        let hook = ApprovalGate::for_tools(["send_email"]).pre_hook();
        let mut first =
            ToolCallHookContext::new("send_email", Map::new()).with_human_input(source.clone());
        let mut second =
            ToolCallHookContext::new("send_email", Map::new()).with_human_input(source.clone());
        assert_eq!(hook(&mut first), Ok(()));
        assert!(hook(&mut second).is_err());
        assert_eq!(source.prompts().len(), 2);
    }
}
