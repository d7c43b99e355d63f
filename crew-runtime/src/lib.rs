//! Agents, tasks, crews and tools whose every tool call runs through
//! tool-call hooks.

pub mod llm;
