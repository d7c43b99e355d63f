//! A model called directly, outside any crew, through the hooks of a
//! registry: what CrewAI does when `llm.call()` runs its before and after
//! model-call hooks.

use std::sync::Arc;

use hooks_core::events::{
    EventMeta, LlmCallCompletedEvent, LlmCallFailedEvent, LlmCallStartedEvent,
};
use hooks_core::runtime::{MODEL_CALL_POINTS, contain_panic_async, take_panic_message};
use hooks_core::{
    DispatchOutcome, Event, HookAborted, HookRegistry, LlmCallHookContext, LlmInfo, ModelResponse,
    POST_MODEL_CALL, PRE_MODEL_CALL, TokenUsage,
};
use std::panic::AssertUnwindSafe;

use crate::llm::{ChatMessage, Llm, LlmError, LlmRequest, ToolDefinition};

/// Why a direct model call gave no answer.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{ChatMessage, PRE_MODEL_CALL};
/// use crew_runtime::{ModelCallError, call_model};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_MODEL_CALL, |_: &mut LlmCallHookContext| {
///     Err::<(), _>(HookAborted::new("the model budget is spent", "budget"))
/// })?;
/// let model = Arc::new(ScriptedLlm::new().answer("hello"));
///
/// let error = call_model(&registry, model.clone(), vec![ChatMessage::user("Hi")], &[]).await.unwrap_err();
/// assert!(matches!(error, ModelCallError::Blocked(ref abort) if abort.source == "budget"));
/// assert_eq!(model.asked(), 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelCallError {
    /// A `PRE_MODEL_CALL` hook blocked the call (the model was not asked).
    #[error("a PRE_MODEL_CALL hook blocked the model call: {0}")]
    Blocked(#[source] HookAborted),
    /// A `POST_MODEL_CALL` hook aborted after the model answered.
    #[error("a POST_MODEL_CALL hook aborted the model call: {0}")]
    Aborted(#[source] HookAborted),
    /// The model failed.
    #[error("the model failed: {0}")]
    Model(#[from] LlmError),
}

struct Named(Arc<dyn Llm>);

impl LlmInfo for Named {
    fn name(&self) -> &str {
        self.0.name()
    }
}

/// A direct model call's answer: the response as the `POST_MODEL_CALL`
/// hooks left it, and the tokens the provider reported for it. It reads as
/// the [`ModelResponse`] it holds (`answer.content`, `answer.tool_calls`).
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{ChatMessage, TokenUsage};
/// use crew_runtime::call_model;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let model = Arc::new(ScriptedLlm::new().reporting_usage(TokenUsage::new(12, 1, 13)).answer("hi"));
/// let answer = call_model(&HookRegistry::new(), model, vec![ChatMessage::user("Hello")], &[]).await?;
/// assert_eq!(answer.content, "hi");
/// assert_eq!(answer.usage.map(|usage| usage.total_tokens), Some(13));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ModelAnswer {
    /// What the model answered, as the `POST_MODEL_CALL` hooks left it.
    pub response: ModelResponse,
    /// The tokens the provider reported for the answer, when it reports
    /// them.
    pub usage: Option<TokenUsage>,
}

impl std::ops::Deref for ModelAnswer {
    type Target = ModelResponse;

    fn deref(&self) -> &ModelResponse {
        &self.response
    }
}

impl From<ModelAnswer> for ModelResponse {
    fn from(answer: ModelAnswer) -> Self {
        answer.response
    }
}

/// Calls `llm` once, outside any crew, through `registry`'s
/// `PRE_MODEL_CALL` and `POST_MODEL_CALL` chains, on one snapshot: what the
/// PRE hooks leave in the messages is what the model receives, and what
/// the POST hooks leave of the answer is what is returned (its text and
/// tool calls, with the tokens the provider reported). Hooks see no agent,
/// task or crew; an `agents` filter lets them run (a call without an agent
/// passes it, rule 7).
///
/// Listeners on the registry's bus see a model call, as the reference
/// reports one: `LlmCallStarted` (with the messages as given) before the
/// PRE chain, then `LlmCallCompleted` (the answer as the POST chain left
/// it, and its usage) after the POST chain, or `LlmCallFailed` naming the
/// hook that blocked or aborted the call, or the model's error. Their
/// agent, task and crew are empty.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{ChatMessage, POST_MODEL_CALL, PRE_MODEL_CALL};
/// use crew_runtime::call_model;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     ctx.messages.insert(0, ChatMessage::system("Answer in French."));
/// })?;
/// registry.register_hook(POST_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     ctx.response.as_ref().map(|answer| answer.content.to_uppercase())
/// })?;
/// let model = Arc::new(ScriptedLlm::new().answer("bonjour"));
///
/// let answer = call_model(&registry, model.clone(), vec![ChatMessage::user("Hello")], &[]).await?;
///
/// assert_eq!(answer.content, "BONJOUR");
/// assert_eq!(model.requests()[0].messages[0].content, "Answer in French.");
/// # Ok(())
/// # }
/// ```
pub async fn call_model(
    registry: &HookRegistry,
    llm: Arc<dyn Llm>,
    messages: Vec<ChatMessage>,
    tools: &[ToolDefinition],
) -> Result<ModelAnswer, ModelCallError> {
    let events = registry.events();
    let model = llm.name().to_owned();
    let mut call = LlmCallHookContext::new(messages)
        .with_llm(Arc::new(Named(Arc::clone(&llm))))
        .with_tools(Arc::from(tools))
        .with_iterations(1)
        // The runtime's default person, as a crew's: the engine has none.
        .with_human_input(Arc::new(crate::TerminalInput::new()));
    let mut started = None;
    if events.has_listeners() {
        let messages = Arc::new(std::mem::take(&mut call.messages));
        let meta = EventMeta::new();
        started = Some(meta.event_id);
        events.emit(&Event::LlmCallStarted(LlmCallStartedEvent {
            meta,
            model: model.clone(),
            messages: Arc::clone(&messages),
            agent_role: String::new(),
            task_name: String::new(),
            iteration: None,
            crew: String::new(),
        }));
        call.messages = Arc::try_unwrap(messages).unwrap_or_else(|kept| (*kept).clone());
    }
    let answered = ask(registry, &llm, &mut call).await;
    if events.has_listeners() {
        events.emit(&match &answered {
            Ok(answer) => Event::LlmCallCompleted(LlmCallCompletedEvent {
                meta: EventMeta::new().with_started(started),
                model,
                response: answer.response.content.clone(),
                tool_calls: answer
                    .response
                    .tool_calls
                    .iter()
                    .map(|call| call.name.clone())
                    .collect(),
                usage: answer.usage,
                agent_role: String::new(),
                task_name: String::new(),
                iteration: None,
                crew: String::new(),
            }),
            Err(error) => Event::LlmCallFailed(LlmCallFailedEvent {
                meta: EventMeta::new().with_started(started),
                model,
                error: error.to_string(),
                retry: None,
                max_retries: 0,
                agent_role: String::new(),
                task_name: String::new(),
                iteration: None,
                crew: String::new(),
            }),
        });
    }
    answered
}

/// The chains and the model, on one snapshot of the hooks.
async fn ask(
    registry: &HookRegistry,
    llm: &Arc<dyn Llm>,
    call: &mut LlmCallHookContext,
) -> Result<ModelAnswer, ModelCallError> {
    let mut hooks = registry.dispatcher().begin_call(&MODEL_CALL_POINTS);
    if let DispatchOutcome::Aborted(abort) = hooks.dispatch_async(PRE_MODEL_CALL, call).await {
        return Err(ModelCallError::Blocked(abort));
    }
    hooks.hold();
    let request = LlmRequest::new(&call.messages, &call.tools);
    let (answer, usage) = contain_panic_async(AssertUnwindSafe(llm.complete_with_usage(&request)))
        .await
        .map_err(|panic| LlmError::Panicked(take_panic_message(panic)))??;
    call.response = Some(answer.into());
    if let DispatchOutcome::Aborted(abort) = hooks.dispatch_async(POST_MODEL_CALL, call).await {
        return Err(ModelCallError::Aborted(abort));
    }
    Ok(ModelAnswer {
        response: call.response.take().unwrap_or_default(),
        usage,
    })
}
