//! A model that replays a fixed plan: the embedded default, so examples and
//! tests run offline and deterministically.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::llm::{self, ChatMessage, Llm, LlmError, LlmRequest, ModelTurn, ToolCallRequest};

/// One tool call in a [`ScriptedLlm`] plan.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::ScriptedCall;
///
/// let echo = Tool::dynamic("echo", "Echoes", json!({"type": "object"}), |args: Value| {
///     Ok::<_, String>(args["text"].clone())
/// });
/// // One turn asking for two calls at once: the second with arguments that
/// // are not JSON, as a confused model sends them (the tool does not run).
/// let llm = Arc::new(
///     ScriptedLlm::new()
///         .calls([ScriptedCall::new("echo", json!({"text": "hi"})), ScriptedCall::raw("echo", "{oops")])
///         .answer("done"),
/// );
/// let agent = Agent::builder("Echoer").tool(echo).llm(llm.clone()).build();
/// let crew = Crew::builder()
///     .agent(agent.clone())
///     .task(Task::builder("Echo").agent(&agent).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// crew.kickoff_blocking(())?;
/// let observations = llm.observations();
/// assert_eq!(observations[0], "hi");
/// assert!(observations[1].starts_with("Invalid arguments for tool `echo`: they are not valid JSON"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedCall {
    name: String,
    arguments: String,
}

impl ScriptedCall {
    /// A call of `name` with these JSON arguments.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ScriptedCall::raw(name, arguments.to_string())
    }

    /// A call whose arguments are this exact text (which may be invalid
    /// JSON, or JSON that is not an object: what a confused model sends).
    pub fn raw(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        ScriptedCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

impl<N: Into<String>> From<(N, Value)> for ScriptedCall {
    fn from((name, arguments): (N, Value)) -> Self {
        ScriptedCall::new(name, arguments)
    }
}

type AnswerFn = dyn FnOnce(&LlmRequest<'_>) -> String + Send;

enum PlannedTurn {
    Fixed(ModelTurn),
    Answer(Box<AnswerFn>),
    Fail(LlmError),
}

/// A request the scripted model received: what the model saw.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// let lookup = Tool::dynamic("lookup", "Looks a word up", json!({"type": "object"}), |_| {
///     Ok::<_, String>(json!("hola means hello"))
/// });
/// let llm = Arc::new(ScriptedLlm::new().call("lookup", json!({"word": "hola"})).answer("hello"));
/// let translator = Agent::builder("Translator").tool(lookup).llm(llm.clone()).build();
/// let crew = Crew::builder()
///     .agent(translator.clone())
///     .task(Task::builder("Translate {word}").agent(&translator).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// crew.kickoff_blocking([("word", "hola")])?;
///
/// let requests = llm.requests();
/// assert_eq!(requests.len(), 2);
/// assert_eq!(requests[0].tools, ["lookup"]);
/// assert!(requests[0].task_prompt().unwrap().contains("Translate hola"));
/// assert_eq!(requests[1].observations(), ["hola means hello"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// The names of the tools on offer.
    pub tools: Vec<String>,
}

impl RecordedRequest {
    /// The tool observations answering the model's previous turn, in call
    /// order (the trailing `Role::Tool` messages), as
    /// [`LlmRequest::observations`] reads them.
    pub fn observations(&self) -> Vec<&str> {
        llm::observations(&self.messages)
    }

    /// The first user message (the task as the agent was given it), as
    /// [`LlmRequest::task_prompt`] reads it.
    pub fn task_prompt(&self) -> Option<&str> {
        llm::task_prompt(&self.messages)
    }

    /// The latest user message, as [`LlmRequest::last_user_message`] reads
    /// it.
    ///
    /// ```
    /// use crew_runtime::RecordedRequest;
    /// use crew_runtime::llm::ChatMessage;
    ///
    /// let request = RecordedRequest {
    ///     messages: vec![ChatMessage::user("Draft a reply"), ChatMessage::user("Be brief")],
    ///     tools: Vec::new(),
    /// };
    /// assert_eq!(request.last_user_message(), Some("Be brief"));
    /// ```
    pub fn last_user_message(&self) -> Option<&str> {
        llm::last_user_message(&self.messages)
    }
}

/// A model that replays a plan of turns, one per request, and records every
/// request it receives. When the plan is used up it answers
/// [`LlmError::ScriptExhausted`].
///
/// Share it as an `Arc` to read the recorded requests after a run:
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::{ScriptedCall, ScriptedLlm};
/// use serde_json::json;
///
/// let llm = Arc::new(
///     ScriptedLlm::new()
///         .call("web_search", json!({"query": "rust"}))
///         .calls([
///             ScriptedCall::new("read_page", json!({"url": "a"})),
///             ScriptedCall::raw("read_page", "{not json"),
///         ])
///         .answer("done"),
/// );
/// assert_eq!(llm.remaining(), 3);
/// ```
pub struct ScriptedLlm {
    name: String,
    plan: Mutex<VecDeque<PlannedTurn>>,
    requests: Mutex<Vec<RecordedRequest>>,
    asked: AtomicUsize,
    record: bool,
    next_call: usize,
    streaming: bool,
    latency: Option<std::time::Duration>,
    usage: Option<hooks_core::TokenUsage>,
    max_tokens: Option<u64>,
}

impl ScriptedLlm {
    /// A model with an empty plan, recording requests.
    pub fn new() -> Self {
        ScriptedLlm {
            name: "scripted".to_owned(),
            plan: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            asked: AtomicUsize::new(0),
            record: true,
            next_call: 0,
            streaming: false,
            latency: None,
            usage: None,
            max_tokens: None,
        }
    }

    /// The name logs show (default `scripted`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Stops recording requests (each recording copies the whole
    /// conversation; a long benchmark does not want that).
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// Streams its answers: when the request has a listener
    /// ([`LlmRequest::stream`]), each answer's text reaches it word by
    /// word (spaces kept), as a server streaming its answer would send it,
    /// before the whole turn is returned.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::llm::{DeltaSink, LlmRequest};
    ///
    /// struct Collect(Mutex<Vec<String>>);
    /// impl DeltaSink for Collect {
    ///     fn delta(&self, text: &str) {
    ///         self.0.lock().unwrap_or_else(|e| e.into_inner()).push(text.to_owned());
    ///     }
    /// }
    /// let llm = ScriptedLlm::new().streaming().answer("Rust is fast.");
    /// let sink = Collect(Mutex::new(Vec::new()));
    /// let request = LlmRequest { stream: Some(&sink), ..LlmRequest::new(&[], &[]) };
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// runtime.block_on(llm.complete(&request))?;
    /// assert_eq!(*sink.0.lock().unwrap_or_else(|e| e.into_inner()), ["Rust ", "is ", "fast."]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn streaming(mut self) -> Self {
        self.streaming = true;
        self
    }

    /// Reports `usage` for each of its answers, as a provider reports the
    /// tokens of each response: for tests of token counting.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::TokenUsage;
    ///
    /// let model = Arc::new(
    ///     ScriptedLlm::new().reporting_usage(TokenUsage::new(100, 20, 120)).answer("a").answer("b"),
    /// );
    /// let writer = Agent::builder("Writer").llm(model).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("One").agent(&writer).build())
    ///     .task(Task::builder("Two").agent(&writer).build())
    ///     .build()?;
    /// assert_eq!(crew.kickoff_blocking(())?.token_usage, TokenUsage::new(200, 40, 240));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reporting_usage(mut self, usage: hooks_core::TokenUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Declares that no answer has more than `tokens` tokens, as a client
    /// with a `max_tokens` option does ([`Llm::max_output_tokens`]): what
    /// a token budget reserves for each answer. The scripted answers are
    /// not cut to it.
    ///
    /// ```
    /// use crew_runtime::llm::Llm;
    /// use crew_runtime::ScriptedLlm;
    /// assert_eq!(ScriptedLlm::new().max_tokens(256).max_output_tokens(), Some(256));
    /// ```
    pub fn max_tokens(mut self, tokens: u64) -> Self {
        self.max_tokens = Some(tokens);
        self
    }

    /// Waits `latency` (on the runtime's timer) before each answer, as a
    /// model server would take time: for tests of timeouts, cancellation
    /// and concurrency.
    pub fn latency(mut self, latency: std::time::Duration) -> Self {
        self.latency = Some(latency);
        self
    }

    /// A turn asking for one tool call.
    pub fn call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.calls([ScriptedCall::new(name, arguments)])
    }

    /// A turn asking for one tool call whose arguments are this exact text.
    pub fn call_raw(self, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        self.calls([ScriptedCall::raw(name, arguments)])
    }

    /// A turn asking for several tool calls at once (they run concurrently).
    /// Calls get the ids `call_1`, `call_2`, … in plan order.
    pub fn calls<C: Into<ScriptedCall>>(mut self, calls: impl IntoIterator<Item = C>) -> Self {
        let calls = calls
            .into_iter()
            .map(|call| {
                let ScriptedCall { name, arguments } = call.into();
                self.next_call += 1;
                ToolCallRequest {
                    id: format!("call_{}", self.next_call),
                    name,
                    arguments,
                }
            })
            .collect();
        self.turn(ModelTurn::ToolCalls {
            content: String::new(),
            calls,
        })
    }

    /// A final answer.
    pub fn answer(self, text: impl Into<String>) -> Self {
        self.turn(ModelTurn::FinalAnswer(text.into()))
    }

    /// A final answer computed from the request (to echo an observation,
    /// say). The request reads what an answer needs:
    /// [`observations`](LlmRequest::observations),
    /// [`task_prompt`](LlmRequest::task_prompt),
    /// [`last_user_message`](LlmRequest::last_user_message) and
    /// [`tool_names`](LlmRequest::tool_names).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let lookup = Tool::dynamic("lookup", "Looks an order up", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("order 42: shipped"))
    /// });
    /// let llm = Arc::new(
    ///     ScriptedLlm::new()
    ///         .call("lookup", json!({"order": 42}))
    ///         .answer_with(|request| format!("Dear customer, {}", request.observations().join("; "))),
    /// );
    /// let desk = Agent::builder("Support").tool(lookup).llm(llm).build();
    /// let crew = Crew::builder()
    ///     .agent(desk.clone())
    ///     .task(Task::builder("Answer the ticket").agent(&desk).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// assert_eq!(crew.kickoff_blocking(())?.raw, "Dear customer, order 42: shipped");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn answer_with(
        self,
        answer: impl FnOnce(&LlmRequest<'_>) -> String + Send + 'static,
    ) -> Self {
        self.push(PlannedTurn::Answer(Box::new(answer)))
    }

    /// A turn that fails with `error`, as a model server that is down or
    /// overloaded answers: for tests of failures and retries. The request
    /// is recorded (and counted) like any other.
    ///
    /// ```
    /// use crew_runtime::ScriptedLlm;
    /// use crew_runtime::llm::{Llm, LlmError, LlmRequest, ModelTurn};
    ///
    /// let llm = ScriptedLlm::new().fail(LlmError::Transport("connection reset".into())).answer("hi");
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let request = LlmRequest::new(&[], &[]);
    /// assert_eq!(
    ///     runtime.block_on(llm.complete(&request)),
    ///     Err(LlmError::Transport("connection reset".into()))
    /// );
    /// assert_eq!(runtime.block_on(llm.complete(&request)), Ok(ModelTurn::FinalAnswer("hi".into())));
    /// assert_eq!(llm.asked(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fail(self, error: LlmError) -> Self {
        self.push(PlannedTurn::Fail(error))
    }

    /// Any turn.
    pub fn turn(self, turn: ModelTurn) -> Self {
        self.push(PlannedTurn::Fixed(turn))
    }

    fn push(self, turn: PlannedTurn) -> Self {
        self.plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(turn);
        self
    }

    /// The requests received so far (empty when recording is off).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every tool observation the model was given, in the order it got
    /// them: those answering its first turn, then its second, and so on
    /// (empty when recording is off).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let echo = Tool::dynamic("echo", "Echoes", json!({"type": "object"}), |args: Value| {
    ///     Ok::<_, String>(args["text"].clone())
    /// });
    /// let llm = Arc::new(
    ///     ScriptedLlm::new()
    ///         .call("echo", json!({"text": "one"}))
    ///         .call("echo", json!({"text": "two"}))
    ///         .answer("done"),
    /// );
    /// let agent = Agent::builder("Echoer").tool(echo).llm(llm.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Echo twice").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// assert_eq!(llm.observations(), ["one", "two"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn observations(&self) -> Vec<String> {
        self.requests()
            .iter()
            .flat_map(|request| request.observations().into_iter().map(str::to_owned))
            .collect()
    }

    /// How many requests it received.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::Relaxed)
    }

    /// How many planned turns are left.
    pub fn remaining(&self) -> usize {
        self.plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Default for ScriptedLlm {
    fn default() -> Self {
        ScriptedLlm::new()
    }
}

#[async_trait::async_trait]
impl Llm for ScriptedLlm {
    fn name(&self) -> &str {
        &self.name
    }

    fn max_output_tokens(&self) -> Option<u64> {
        self.max_tokens
    }

    async fn complete_with_usage(
        &self,
        request: &LlmRequest<'_>,
    ) -> Result<(ModelTurn, Option<hooks_core::TokenUsage>), LlmError> {
        Ok((self.complete(request).await?, self.usage))
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        let asked = self.asked.fetch_add(1, Ordering::Relaxed) + 1;
        if self.record {
            self.requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(RecordedRequest {
                    messages: request.messages.to_vec(),
                    tools: request.tools.iter().map(|t| t.name.clone()).collect(),
                });
        }
        if let Some(latency) = self.latency {
            tokio::time::sleep(latency).await;
        }
        // The lock is released before an answer function runs, so it may
        // take as long as it likes.
        let next = self
            .plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let turn = match next {
            Some(PlannedTurn::Fixed(turn)) => turn,
            Some(PlannedTurn::Answer(answer)) => ModelTurn::FinalAnswer(answer(request)),
            Some(PlannedTurn::Fail(error)) => return Err(error),
            None => return Err(LlmError::ScriptExhausted { asked }),
        };
        if let (true, Some(sink)) = (self.streaming, request.stream) {
            let text = match &turn {
                ModelTurn::FinalAnswer(text) => text,
                ModelTurn::ToolCalls { content, .. } => content,
            };
            for word in text.split_inclusive(' ') {
                sink.delta(word);
                // Each piece arrives on its own, as over a network.
                tokio::task::yield_now().await;
            }
        }
        Ok(turn)
    }
}

impl fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field("name", &self.name)
            .field("remaining", &self.remaining())
            .field("asked", &self.asked())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(llm: &ScriptedLlm, messages: &[ChatMessage]) -> Result<ModelTurn, LlmError> {
        futures_executor::block_on(llm.complete(&LlmRequest::new(messages, &[])))
    }

    #[test]
    fn replays_the_plan_then_is_exhausted() {
        let llm = ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .calls([("a", json!({})), ("b", json!([1]))])
            .call_raw("x", "{not json")
            .answer("done");
        let messages = [ChatMessage::user("go")];
        let first = ask(&llm, &messages);
        assert_eq!(
            first,
            Ok(ModelTurn::ToolCalls {
                content: String::new(),
                calls: vec![ToolCallRequest {
                    id: "call_1".into(),
                    name: "web_search".into(),
                    arguments: r#"{"query":"rust"}"#.into(),
                }],
            })
        );
        let Ok(ModelTurn::ToolCalls { calls, .. }) = ask(&llm, &messages) else {
            panic!("expected tool calls");
        };
        let ids: Vec<_> = calls
            .iter()
            .map(|c| (c.id.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(ids, [("call_2", "{}"), ("call_3", "[1]")]);
        let Ok(ModelTurn::ToolCalls { calls, .. }) = ask(&llm, &messages) else {
            panic!("expected tool calls");
        };
        assert_eq!(calls[0].arguments, "{not json");
        assert_eq!(
            ask(&llm, &messages),
            Ok(ModelTurn::FinalAnswer("done".into()))
        );
        assert_eq!(
            ask(&llm, &messages),
            Err(LlmError::ScriptExhausted { asked: 5 })
        );
        assert_eq!(llm.requests().len(), 5);
    }

    #[test]
    fn answer_with_sees_the_request() {
        let llm = ScriptedLlm::new()
            .answer_with(|request| format!("saw {} messages", request.messages.len()));
        let messages = [ChatMessage::system("s"), ChatMessage::user("u")];
        assert_eq!(
            ask(&llm, &messages),
            Ok(ModelTurn::FinalAnswer("saw 2 messages".into()))
        );
    }

    #[test]
    fn answer_with_reads_observations_prompt_and_tools_from_the_request() {
        let llm = ScriptedLlm::new().answer_with(|request| {
            format!(
                "{:?} {:?} {:?} {:?}",
                request.observations(),
                request.task_prompt(),
                request.last_user_message(),
                request.tool_names()
            )
        });
        let messages = [
            ChatMessage::system("s"),
            ChatMessage::user("task"),
            ChatMessage::assistant("x"),
            ChatMessage::user("follow-up"),
            ChatMessage::tool("1", "first"),
            ChatMessage::tool("2", "second"),
        ];
        let tools = [hooks_core::ToolDefinition {
            name: "lookup".into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }];
        let turn = futures_executor::block_on(llm.complete(&LlmRequest::new(&messages, &tools)));
        assert_eq!(
            turn,
            Ok(ModelTurn::FinalAnswer(
                r#"["first", "second"] Some("task") Some("follow-up") ["lookup"]"#.into()
            ))
        );
    }

    #[test]
    fn observations_are_the_trailing_tool_messages() {
        let request = RecordedRequest {
            messages: vec![
                ChatMessage::user("task"),
                ChatMessage::tool("old", "earlier"),
                ChatMessage::assistant("x"),
                ChatMessage::tool("1", "first"),
                ChatMessage::tool("2", "second"),
            ],
            tools: Vec::new(),
        };
        assert_eq!(request.observations(), ["first", "second"]);
        assert_eq!(request.task_prompt(), Some("task"));
    }

    #[test]
    fn without_recording_keeps_no_requests() {
        let llm = ScriptedLlm::new().without_recording().answer("a");
        let _ = ask(&llm, &[ChatMessage::user("u")]);
        assert!(llm.requests().is_empty());
        assert_eq!(llm.asked(), 1);
    }
}
