//! What a kickoff returns.

use std::fmt;

/// What one task came to.
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

/// What a whole kickoff came to: the final output (the last task's) and
/// every task's output in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrewOutput {
    /// The final output: the last task's answer.
    pub raw: String,
    /// Each task's output, in the order the tasks ran.
    pub tasks_output: Vec<TaskOutput>,
}

impl fmt::Display for CrewOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}
