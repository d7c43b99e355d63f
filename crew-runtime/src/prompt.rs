//! What an agent tells its model at the start of a task.

use crate::agent::Agent;
use crate::llm::ChatMessage;
use crate::task::Task;

/// Between the outputs of several context tasks.
const CONTEXT_SEPARATOR: &str = "\n\n----------\n\n";

/// The context text of a task: the outputs of the tasks it takes context
/// from (what `PRE_STEP` hooks see as the payload).
pub(crate) fn context_text(context: &[&str]) -> String {
    context.join(CONTEXT_SEPARATOR)
}

/// The system message: who the agent is.
pub(crate) fn system_message(agent: &Agent) -> ChatMessage {
    let mut text = format!("You are {}.", agent.role());
    if !agent.backstory().is_empty() {
        text.push(' ');
        text.push_str(agent.backstory());
    }
    if !agent.goal().is_empty() {
        text.push_str("\nYour personal goal is: ");
        text.push_str(agent.goal());
    }
    ChatMessage::system(text)
}

/// The user message: the task (inputs filled in) and its context text.
pub(crate) fn task_message(task: &Task, context: &str) -> ChatMessage {
    let mut text = format!("Current Task: {}", task.description());
    if !task.expected_output().is_empty() {
        text.push_str("\n\nThis is the expected criteria for your final answer: ");
        text.push_str(task.expected_output());
    }
    if !context.is_empty() {
        text.push_str("\n\nThis is the context you're working with:\n");
        text.push_str(context);
    }
    text.push_str("\n\nBegin! Use the tools you have when they help, then give your final answer.");
    ChatMessage::user(text)
}

/// The context text a `PRE_STEP` hook gave a standalone agent's run, as a
/// message of its own.
pub(crate) fn context_message(context: &str) -> ChatMessage {
    ChatMessage::user(format!(
        "This is the context you're working with:\n{context}"
    ))
}
