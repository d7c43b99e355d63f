//! Agents, tasks, crews and tools whose every tool call runs through
//! tool-call hooks.

pub mod llm;
/// A client for OpenAI-compatible chat-completions servers (OpenAI, Ollama,
/// vLLM, llama.cpp) with native tool calling.
pub mod openai;
