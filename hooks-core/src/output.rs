//! What a kickoff returns.

use std::fmt;

/// What one task came to.
///
/// ```
/// use hooks_core::TaskOutput;
///
/// let output = TaskOutput {
///     description: "Research Rust hooks".into(),
///     agent: "Researcher".into(),
///     raw: "Hooks run before and after each tool call.".into(),
///     ..TaskOutput::default()
/// };
/// assert_eq!(output.to_string(), output.raw);
/// assert!(!output.iteration_limit_reached);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskOutput {
    /// The task's description, inputs filled in.
    pub description: String,
    /// The task's expected output, inputs filled in.
    pub expected_output: String,
    /// The role of the agent that did it.
    pub agent: String,
    /// The agent's final answer (or, when it ran out of turns, a note
    /// saying so).
    pub raw: String,
    /// Whether the agent reached its `max_iter` without a final answer; then
    /// `raw` is a note saying so, and the crew went on with the next task.
    pub iteration_limit_reached: bool,
}

impl fmt::Display for TaskOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// Tokens a model reported for one response, or summed over a kickoff.
///
/// Providers report prompt, completion and total tokens; the total is kept
/// as the provider gave it (it may count more than prompt + completion,
/// cached or reasoning tokens say).
///
/// ```
/// use hooks_core::TokenUsage;
///
/// let mut kickoff = TokenUsage::default();
/// kickoff += TokenUsage::new(120, 30, 150);
/// kickoff += TokenUsage::new(200, 10, 210);
/// assert_eq!(kickoff, TokenUsage::new(320, 40, 360));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TokenUsage {
    /// Tokens of the request.
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    pub completion_tokens: u64,
    /// All tokens, as the provider counted them.
    pub total_tokens: u64,
}

impl TokenUsage {
    /// Usage with these counts.
    pub fn new(prompt_tokens: u64, completion_tokens: u64, total_tokens: u64) -> Self {
        TokenUsage {
            prompt_tokens,
            completion_tokens,
            total_tokens,
        }
    }
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, other: TokenUsage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
    }
}

/// What a whole kickoff came to: the final output (the last task's) and
/// every task's output in order.
///
/// ```
/// use hooks_core::{CrewOutput, TaskOutput, TokenUsage};
///
/// let research = TaskOutput { raw: "notes".into(), ..TaskOutput::default() };
/// let report = TaskOutput { raw: "the report".into(), ..TaskOutput::default() };
/// let output = CrewOutput {
///     raw: report.raw.clone(),
///     tasks_output: vec![research, report],
///     token_usage: TokenUsage::new(900, 100, 1_000),
/// };
/// // The final output is the last task's.
/// assert_eq!(output.to_string(), "the report");
/// assert_eq!(output.tasks_output[0].raw, "notes");
/// assert_eq!(output.token_usage.total_tokens, 1_000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrewOutput {
    /// The final output: the last task's answer.
    pub raw: String,
    /// Each task's output, in the order the tasks ran.
    pub tasks_output: Vec<TaskOutput>,
    /// The tokens of every model response of this kickoff, summed (each
    /// response counted once; zero where the models report none).
    pub token_usage: TokenUsage,
}

impl fmt::Display for CrewOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}
