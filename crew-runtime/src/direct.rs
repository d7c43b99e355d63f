//! A model called directly, outside any crew, through the hooks of a
//! registry: what CrewAI does when `llm.call()` runs its before and after
//! model-call hooks.

use std::sync::Arc;

use hooks_core::runtime::{MODEL_CALL_POINTS, contain_panic_async, take_panic_message};
use hooks_core::{
    DispatchOutcome, HookAborted, HookRegistry, LlmCallHookContext, LlmInfo, ModelResponse,
    POST_MODEL_CALL, PRE_MODEL_CALL,
};
use std::panic::AssertUnwindSafe;

use crate::llm::{ChatMessage, Llm, LlmError, LlmRequest, ToolDefinition};

/// Why a direct model call gave no answer.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
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

/// Calls `llm` once, outside any crew, through `registry`'s
/// `PRE_MODEL_CALL` and `POST_MODEL_CALL` chains, on one snapshot: what the
/// PRE hooks leave in the messages is what the model receives, and what
/// the POST hooks leave of the answer is what is returned (its text and
/// tool calls). Hooks see no agent, task or crew; an `agents` filter lets
/// them run (a call without an agent passes it, rule 7).
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
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
) -> Result<ModelResponse, ModelCallError> {
    let mut hooks = registry.dispatcher().begin_call(&MODEL_CALL_POINTS);
    let mut call = LlmCallHookContext::new(messages)
        .with_llm(Arc::new(Named(Arc::clone(&llm))))
        .with_tools(Arc::from(tools))
        .with_iterations(1);
    if let DispatchOutcome::Aborted(abort) = hooks.dispatch_async(PRE_MODEL_CALL, &mut call).await {
        return Err(ModelCallError::Blocked(abort));
    }
    hooks.hold();
    let request = LlmRequest::new(&call.messages, &call.tools);
    let answer = contain_panic_async(AssertUnwindSafe(llm.complete(&request)))
        .await
        .map_err(|panic| LlmError::Panicked(take_panic_message(panic)))??;
    call.response = Some(answer.into());
    if let DispatchOutcome::Aborted(abort) = hooks.dispatch_async(POST_MODEL_CALL, &mut call).await
    {
        return Err(ModelCallError::Aborted(abort));
    }
    Ok(call.response.take().unwrap_or_default())
}
