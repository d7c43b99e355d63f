//! A scripted model for durable kickoffs, shared by the examples that
//! resume them: it answers from where the conversation stands.

use crew_runtime::Role;
use crew_runtime::llm::{Llm, LlmError, LlmRequest, ModelTurn};
use crew_runtime::prelude::ScriptedLlm;

/// A scripted model that answers from where the conversation stands. A
/// resumed kickoff's journal replays the answers it already had, so a
/// process that takes a kickoff over asks for the turn after them: each
/// request plays the plan `plan` makes for it (from the request, a task's
/// topic say) from its start, and answers with the turn at the
/// conversation's place (its number of assistant messages).
pub(crate) struct Replaying<F>(pub(crate) F);

#[crew_runtime::async_trait]
impl<F> Llm for Replaying<F>
where
    F: Fn(&LlmRequest<'_>) -> ScriptedLlm + Send + Sync,
{
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        let plan = (self.0)(request).without_recording();
        let taken = request
            .messages
            .iter()
            .filter(|message| message.role == Role::Assistant)
            .count();
        for _ in 0..taken {
            plan.complete(&LlmRequest::new(&[], &[])).await?;
        }
        plan.complete(request).await
    }
}
