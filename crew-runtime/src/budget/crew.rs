//! Budgets on a crew's calls: the builder's `budget`, the hooks that
//! reserve before each call, and the budget integration's side of the
//! crew's extension seam ([`crate::extension`]).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, OnceLock};

use hooks_core::runtime::register_crew_async_hook;
use hooks_core::{
    Capabilities, Capability, CrewInfo, EXECUTION_END, ExecutionEndContext, HookAborted,
    HookOptions, LlmCallHookContext, POST_MODEL_CALL, PRE_MODEL_CALL, PRE_TOOL_CALL, TokenUsage,
    ToolCallHookContext,
};

use super::{Charge, InProcessLedger, Ledger, LedgerError, Price, Prices, Window};
use crate::error::{BuildError, IntegrationError};
use crate::extension::{BuildScope, CrewExtension};
use crate::tool::IdempotencyKey;
use crate::{Crew, CrewBuilder, CrewError};

/// The integration's name in its errors: its cargo feature's.
const INTEGRATION: &str = "budget";

/// The name of the hooks a crew's budgets reserve through, at
/// `PRE_TOOL_CALL` and `PRE_MODEL_CALL`, in the crew's order of hooks
/// where its first [`CrewBuilder::budget`] stands. A call a budget refuses
/// is blocked with the source `budget:<name>`.
///
/// ```
/// assert_eq!(crew_runtime::budget::BUDGET_HOOK_NAME, "budget");
/// ```
pub const BUDGET_HOOK_NAME: &str = "budget";

/// What a budget counts.
///
/// ```
/// use crew_runtime::budget::{Budget, Measure};
/// assert_eq!(Budget::model_calls("turns", 50).measure(), &Measure::ModelCalls);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Measure {
    /// Model calls: each model turn once (its `PRE_MODEL_CALL`), the
    /// client's own retries after a failure included, and a durable
    /// kickoff's turn asked again after a crash too (by its key).
    ModelCalls,
    /// Tool calls: of the tools named, or of every tool when none is.
    ToolCalls {
        /// The tools counted (empty: all).
        tools: Vec<String>,
    },
    /// Tokens of model calls (prompt and answer, as the provider counts
    /// them): each call reserves an upper bound before it starts (the
    /// prompt's length in bytes, which no byte-level tokenizer exceeds,
    /// and a margin per message, plus the model's output cap), and is
    /// settled at the tokens the provider reported.
    Tokens,
    /// Prompt tokens of model calls only: reserved as the prompt's bound
    /// (no output cap needed), settled at the prompt tokens reported.
    PromptTokens,
    /// Answer tokens of model calls only (reasoning tokens included, as
    /// the provider counts them): reserved as the model's output cap,
    /// settled at what the provider counted beyond the prompt.
    CompletionTokens,
    /// What model calls cost, in millionths of the prices' currency unit
    /// (micro-dollars with the shipped [`Prices`]): reserved as the token
    /// bound priced (every prompt token at the input price, the output
    /// cap at the output price), settled at the reported tokens priced.
    Money,
}

/// What a budget counts per: each kickoff, the crew, each user (the
/// kickoff's [`user`](crate::Crew::for_user)) or each tenant (its
/// [`tenant`](crate::Crew::for_tenant)); kickoffs with no user (or no
/// tenant) share one counter.
///
/// ```
/// use crew_runtime::budget::{Budget, Per};
/// let budget = Budget::tool_calls("daily-calls", 500).per(Per::User);
/// assert_eq!(budget.per_of(), Per::User);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Per {
    /// Each kickoff apart.
    Kickoff,
    /// All the crew's kickoffs together (across replicas, with a shared
    /// ledger).
    Crew,
    /// Each user of the crew's kickoffs.
    User,
    /// Each tenant of the crew's kickoffs.
    Tenant,
}

/// A limit on a crew's calls (SPEC §15): so many model calls or tool
/// calls per kickoff, crew or user, over a kickoff's life, a rolling
/// window or a calendar day. Given to a crew with
/// [`CrewBuilder::budget`].
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::budget::{Budget, Per, Window};
///
/// // At most 20 searches per user in any hour.
/// let searches = Budget::tool_calls("searches", 20)
///     .tools(["web_search"])
///     .per(Per::User)
///     .window(Window::Rolling(Duration::from_secs(3_600)));
/// assert_eq!(searches.name(), "searches");
/// assert_eq!(searches.limit(), 20);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Budget {
    name: String,
    measure: Measure,
    per: Per,
    window: Window,
    limit: u64,
    allow_when_unavailable: bool,
    /// A tool call it refuses ends the kickoff (instead of being blocked).
    ends_kickoff: bool,
    /// Tool calls of tools having any of these capabilities count (with
    /// those of the tools named).
    capabilities: Vec<Capability>,
    /// Tools were named on a model-call budget (refused at the build).
    tools_on_model_calls: bool,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("name", &self.name)
            .field("measure", &self.measure)
            .field("per", &self.per)
            .field("window", &self.window)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Budget {
    fn new(name: impl Into<String>, measure: Measure, limit: u64) -> Self {
        Budget {
            name: name.into(),
            measure,
            per: Per::Kickoff,
            window: Window::Lifetime,
            limit,
            allow_when_unavailable: false,
            ends_kickoff: false,
            capabilities: Vec::new(),
            tools_on_model_calls: false,
        }
    }

    /// At most `limit` model calls per kickoff (see [`per`](Budget::per),
    /// [`window`](Budget::window)): a loop that keeps calling its model
    /// ends with [`CrewError::BudgetExceeded`].
    ///
    /// ```
    /// let cap = crew_runtime::budget::Budget::model_calls("turns", 40);
    /// assert_eq!(cap.limit(), 40);
    /// ```
    pub fn model_calls(name: impl Into<String>, limit: u64) -> Self {
        Budget::new(name, Measure::ModelCalls, limit)
    }

    /// At most `limit` tokens per kickoff (prompt and answer, as the
    /// provider counts them). Before each model call the budget reserves
    /// what the call may take at most: the prompt's length in bytes (no
    /// byte-level tokenizer makes more tokens than bytes) with a margin per
    /// message, plus the model's output cap ([`Llm::max_output_tokens`](crate::llm::Llm::max_output_tokens));
    /// after the answer, what the provider reported replaces it (an answer
    /// with no usage reported stays charged in full). A call past the
    /// limit ends the kickoff with [`CrewError::BudgetExceeded`]; a model
    /// with no output cap cannot be bounded, and its calls are refused.
    ///
    /// ```
    /// let cap = crew_runtime::budget::Budget::tokens("tokens", 200_000);
    /// assert_eq!(cap.limit(), 200_000);
    /// ```
    pub fn tokens(name: impl Into<String>, limit: u64) -> Self {
        Budget::new(name, Measure::Tokens, limit)
    }

    /// At most `limit` prompt tokens per kickoff (what is sent to the
    /// model, as the provider counts it): each call reserves the prompt's
    /// bound (see [`Budget::tokens`]), and the prompt tokens reported
    /// replace it. No output cap is needed to bound a call.
    ///
    /// ```
    /// use crew_runtime::budget::{Budget, Measure};
    /// let cap = Budget::prompt_tokens("context", 1_000_000);
    /// assert_eq!(cap.measure(), &Measure::PromptTokens);
    /// ```
    pub fn prompt_tokens(name: impl Into<String>, limit: u64) -> Self {
        Budget::new(name, Measure::PromptTokens, limit)
    }

    /// At most `limit` answer tokens per kickoff (reasoning tokens
    /// included, as the provider counts them): each call reserves the
    /// model's output cap, and what the provider counted beyond the
    /// prompt replaces it. A model with no output cap cannot be bounded,
    /// and its calls are refused.
    ///
    /// ```
    /// use crew_runtime::budget::{Budget, Measure};
    /// let cap = Budget::completion_tokens("answers", 50_000);
    /// assert_eq!(cap.measure(), &Measure::CompletionTokens);
    /// ```
    pub fn completion_tokens(name: impl Into<String>, limit: u64) -> Self {
        Budget::new(name, Measure::CompletionTokens, limit)
    }

    /// At most `limit` millionths of the currency unit (micro-dollars with
    /// the shipped [`Prices`]) spent on model calls per kickoff: each
    /// call reserves what its token bound (see [`Budget::tokens`]) costs,
    /// every prompt token at the input price; the reported tokens, priced,
    /// replace it after the answer. A model the crew's prices do not name
    /// cannot be priced, and its calls are refused
    /// ([`CrewBuilder::budget_prices`] adds or overrides prices).
    ///
    /// ```
    /// use crew_runtime::budget::{Budget, Per, Window};
    /// // $5 a day per user.
    /// let spend = Budget::money("daily-spend", 5_000_000).per(Per::User).window(Window::DayUtc);
    /// assert_eq!(spend.limit(), 5_000_000);
    /// ```
    pub fn money(name: impl Into<String>, limit: u64) -> Self {
        Budget::new(name, Measure::Money, limit)
    }

    /// At most `limit` tool calls per kickoff (of every tool, unless
    /// [`tools`](Budget::tools) names some): a call past it is blocked
    /// with the source `budget:<name>`, and the agent goes on without it.
    ///
    /// ```
    /// let cap = crew_runtime::budget::Budget::tool_calls("calls", 100);
    /// assert_eq!(cap.name(), "calls");
    /// ```
    pub fn tool_calls(name: impl Into<String>, limit: u64) -> Self {
        Budget::new(name, Measure::ToolCalls { tools: Vec::new() }, limit)
    }

    /// Counts only the calls of `tools` (a tool-call budget; the crew's
    /// build refuses a name no agent of the crew has, with the closest
    /// one, and a model-call budget that names tools).
    ///
    /// ```
    /// use crew_runtime::budget::{Budget, Measure};
    /// let budget = Budget::tool_calls("payments", 5).tools(["refund", "charge"]);
    /// assert_eq!(budget.measure(), &Measure::ToolCalls { tools: vec!["refund".into(), "charge".into()] });
    /// ```
    pub fn tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let named = tools.into_iter().map(Into::into);
        match &mut self.measure {
            Measure::ToolCalls { tools } => tools.extend(named),
            // For the build to refuse.
            Measure::ModelCalls
            | Measure::Tokens
            | Measure::PromptTokens
            | Measure::CompletionTokens
            | Measure::Money => {
                self.tools_on_model_calls = true;
            }
        }
        self
    }

    /// Counts per `per` instead of per kickoff.
    ///
    /// ```
    /// use crew_runtime::budget::{Budget, Per};
    /// assert_eq!(Budget::model_calls("all", 10_000).per(Per::Crew).per_of(), Per::Crew);
    /// ```
    pub fn per(mut self, per: Per) -> Self {
        self.per = per;
        self
    }

    /// Counts over `window` instead of all time.
    ///
    /// ```
    /// use crew_runtime::budget::{Budget, Window};
    /// let daily = Budget::tool_calls("daily", 500).window(Window::DayUtc);
    /// assert_eq!(daily.window_of(), Window::DayUtc);
    /// ```
    pub fn window(mut self, window: Window) -> Self {
        self.window = window;
        self
    }

    /// Lets calls through, with a warning, while the ledger's counters
    /// cannot be reached. Without it a budget fails closed: the calls it
    /// covers are refused until they can be counted.
    ///
    /// ```
    /// let lenient = crew_runtime::budget::Budget::model_calls("turns", 40).allow_when_unavailable();
    /// # let _ = lenient;
    /// ```
    pub fn allow_when_unavailable(mut self) -> Self {
        self.allow_when_unavailable = true;
        self
    }

    /// Ends the kickoff with [`CrewError::BudgetExceeded`] when it refuses
    /// a tool call, instead of blocking the call and letting the agent go
    /// on (a model call it refuses always ends the kickoff).
    ///
    /// ```
    /// let strict = crew_runtime::budget::Budget::tool_calls("payments", 3).end_kickoff_when_refused();
    /// # let _ = strict;
    /// ```
    pub fn end_kickoff_when_refused(mut self) -> Self {
        self.ends_kickoff = true;
        self
    }

    /// The budget's name (`budget:<name>` is the source of its blocks).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it counts.
    pub fn measure(&self) -> &Measure {
        &self.measure
    }

    /// What it counts per.
    pub fn per_of(&self) -> Per {
        self.per
    }

    /// The window it counts over.
    pub fn window_of(&self) -> Window {
        self.window
    }

    /// Its limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Counts only the calls of tools having any of `capabilities` (as
    /// they declare them: a tool that declares nothing counts as
    /// destructive and open-world), with those of the tools
    /// [named](Budget::tools). A tool-call budget; the build refuses it on
    /// another.
    ///
    /// ```
    /// use crew_runtime::budget::Budget;
    /// use crew_runtime::Capability;
    /// // At most 10 calls a kickoff of tools that reach the open world.
    /// let budget = Budget::tool_calls("outside", 10).capabilities([Capability::OpenWorld]);
    /// assert_eq!(budget.capabilities_of(), [Capability::OpenWorld]);
    /// ```
    pub fn capabilities(mut self, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        self.capabilities.extend(capabilities);
        if !matches!(self.measure, Measure::ToolCalls { .. }) {
            self.tools_on_model_calls = true;
        }
        self
    }

    /// The capabilities whose tools' calls it counts (none: see
    /// [`Measure::ToolCalls`]).
    pub fn capabilities_of(&self) -> &[Capability] {
        &self.capabilities
    }

    /// Whether a tool call of `tool`, a tool having `has`, counts.
    fn counts_tool(&self, tool: &str, has: Capabilities) -> bool {
        match &self.measure {
            Measure::ToolCalls { tools } => {
                (tools.is_empty() && self.capabilities.is_empty())
                    || tools.iter().any(|t| t == tool)
                    || self.capabilities.iter().any(|c| has.contains(*c))
            }
            Measure::ModelCalls
            | Measure::Tokens
            | Measure::PromptTokens
            | Measure::CompletionTokens
            | Measure::Money => false,
        }
    }

    /// Whether it counts what a model call takes (tokens or money).
    fn bounds_model_calls(&self) -> bool {
        matches!(
            self.measure,
            Measure::Tokens | Measure::PromptTokens | Measure::CompletionTokens | Measure::Money
        )
    }

    /// The key this budget counts a call of `crew`'s kickoff under.
    fn key(&self, crew: Option<&Arc<dyn CrewInfo>>) -> Result<String, String> {
        match self.per {
            Per::Crew => Ok(format!(
                "crew:{}",
                crew.map(|crew| crew.name()).unwrap_or_default()
            )),
            Per::User => Ok(format!(
                "user:{}",
                crew.and_then(|crew| crew.user()).unwrap_or("")
            )),
            Per::Tenant => Ok(format!(
                "tenant:{}",
                crew.and_then(|crew| crew.tenant()).unwrap_or("")
            )),
            Per::Kickoff => crew
                .and_then(|crew| crew.kickoff_id())
                .map(|id| format!("kickoff:{id}"))
                .ok_or_else(|| "the call belongs to no kickoff".to_owned()),
        }
    }

    /// The source of this budget's blocks.
    fn source(&self) -> String {
        format!("budget:{}", self.name)
    }
}

/// A budget refused a call (SPEC §15): sent as an
/// [`Event::Integration`](hooks_core::Event::Integration) of kind
/// [`KIND`](Self::KIND) on the crew's buses, and recorded as
/// `budget_refused` on an audit trail attached to the crew.
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::budget::BudgetRefusedEvent;
///
/// fn on_event(event: &Event) {
///     if let Event::Integration(integration) = event
///         && let Some(refused) = integration.downcast_ref::<BudgetRefusedEvent>()
///     {
///         eprintln!("{} refused a call of {}: {}", refused.budget, refused.call, refused.reason);
///     }
/// }
/// # let _ = on_event;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetRefusedEvent {
    /// The budget's name.
    pub budget: String,
    /// What it counts per (`user:carol`); empty when the call could not
    /// be counted at all.
    pub key: String,
    /// What was refused: `model` for a model call, else the tool's name.
    pub call: String,
    /// Why, in words (the limit and what was used, or why the call could
    /// not be counted).
    pub reason: String,
    /// The crew's name.
    pub crew: String,
    /// The agent whose call it was, when known.
    pub agent: Option<String>,
}

crate::extension::integration_event!(BudgetRefusedEvent, "BudgetRefused");

/// A budget the crew's build refused.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::budget::{Budget, BudgetError};
/// use crew_runtime::prelude::*;
///
/// let search = Tool::dynamic("web_search", "Searches", json!({"type": "object"}), |_| Ok::<_, String>(json!("hits")));
/// let researcher = Agent::builder("Researcher").tool(search).build();
/// let error = Crew::builder()
///     .agent(researcher.clone())
///     .task(Task::builder("Research").agent(&researcher).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .budget(Budget::tool_calls("searches", 10).tools(["web_serch"]))
///     .build()
///     .unwrap_err();
/// let BuildError::Integration(refused) = &error else { panic!("the budget's error") };
/// assert!(matches!(refused.downcast_ref::<BudgetError>(), Some(BudgetError::UnknownTool { .. })));
/// assert!(error.to_string().contains("did you mean `web_search`?"), "{error}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// A budget has no name.
    #[error("a budget has an empty name")]
    EmptyName,
    /// Two budgets of the crew have one name.
    #[error("two budgets are named `{0}`: each needs a name of its own")]
    DuplicateName(String),
    /// A budget names a tool no agent of the crew has.
    #[error("budget `{budget}` names the tool `{tool}`, which no agent of the crew has{}", .closest.as_ref().map(|c| format!("; did you mean `{c}`?")).unwrap_or_default())]
    UnknownTool {
        /// The budget.
        budget: String,
        /// The name it gives.
        tool: String,
        /// The crew's tool closest to it.
        closest: Option<String>,
    },
    /// A model-call, token or money budget names tools or capabilities.
    #[error(
        "budget `{0}` counts model calls, tokens or money and names tools or capabilities: they are for tool-call budgets"
    )]
    ToolsOnModelCalls(String),
    /// A model call that no price in the crew's table names, under a
    /// money budget. The call was refused.
    #[error(
        "budget `{budget}` cannot price a call of the model `{model}`: the crew's prices do not name it; add it with CrewBuilder::budget_prices"
    )]
    Unpriced {
        /// The budget.
        budget: String,
        /// The model's name.
        model: String,
    },
    /// A token budget covers a model call that nothing bounds: the
    /// model's client sets no output cap. The call was refused.
    #[error(
        "budget `{budget}` cannot bound a call of the model `{model}`: its client sets no output cap (max_tokens); give it one"
    )]
    Unbounded {
        /// The budget.
        budget: String,
        /// The model's name.
        model: String,
    },
}

impl CrewBuilder {
    /// Gives the crew a budget (SPEC §15): before each call it covers, the
    /// crew's ledger (an [`InProcessLedger`] unless
    /// [`budget_ledger`](CrewBuilder::budget_ledger) gives another)
    /// reserves it in every budget of the crew covering it, or in none. A
    /// tool call past a budget is blocked with the source
    /// `budget:<name>`; a model call past one ends the kickoff with
    /// [`CrewError::BudgetExceeded`]. The budgets reserve through one
    /// `PRE_TOOL_CALL` and one `PRE_MODEL_CALL` hook named
    /// [`BUDGET_HOOK_NAME`], in the crew's order of hooks where its first
    /// budget is given (put it after the gates that may refuse a call, so
    /// that a refused call is not counted). A call whose counters cannot
    /// be reached is refused, unless each of its budgets
    /// [allows it](Budget::allow_when_unavailable).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::budget::Budget;
    /// use crew_runtime::prelude::*;
    ///
    /// let looping = Arc::new(ScriptedLlm::new().call("lookup", json!({})).call("lookup", json!({})).answer("done"));
    /// let lookup = Tool::dynamic("lookup", "Looks up", json!({"type": "object"}), |_| Ok::<_, String>(json!("found")));
    /// let agent = Agent::builder("Clerk").tool(lookup).llm(looping).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Look it up").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .budget(Budget::model_calls("turns", 2))
    ///     .build()?;
    /// let error = crew.kickoff_blocking(()).unwrap_err();
    /// assert!(matches!(error, CrewError::BudgetExceeded { ref budget, limit: 2, used: 2, .. } if budget == "turns"), "{error}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget(self, budget: Budget) -> Self {
        self.pending_hook(Box::new(move |scope| {
            let first = scope.with_state(|given: &mut GivenBudgets| {
                given.budgets.push(budget);
                let first = !given.hooked;
                given.hooked = true;
                first.then(|| Arc::clone(&given.shared))
            });
            if let Some(shared) = first {
                register_hooks(scope, &shared)?;
            }
            Ok(())
        }))
    }

    /// Keeps the crew's budgets' counters in `ledger` (the store's, to
    /// share them with every replica) instead of in this process.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::budget::{Budget, InProcessLedger};
    /// use crew_runtime::prelude::*;
    ///
    /// let ledger = Arc::new(InProcessLedger::new());
    /// let agent = Agent::builder("Clerk").llm(Arc::new(ScriptedLlm::new().answer("done"))).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Answer").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .budget(Budget::model_calls("turns", 10))
    ///     .budget_ledger(ledger.clone())
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget_ledger(self, ledger: Arc<dyn Ledger>) -> Self {
        self.pending_hook(Box::new(move |scope| {
            scope.with_state(|given: &mut GivenBudgets| given.ledger = Some(ledger));
            Ok(())
        }))
    }

    /// Prices the crew's model calls for its money budgets with `prices`
    /// instead of the shipped table ([`Prices::builtin`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::budget::{Budget, Price, Prices};
    /// use crew_runtime::prelude::*;
    ///
    /// let llm = Arc::new(ScriptedLlm::new().named("house-model").max_tokens(1_000).answer("done"));
    /// let agent = Agent::builder("Clerk").llm(llm).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Answer").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .budget(Budget::money("spend", 1_000_000))
    ///     .budget_prices(Prices::builtin().with("house-model", Price::per_million(1.0, 2.0)))
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget_prices(self, prices: Prices) -> Self {
        self.pending_hook(Box::new(move |scope| {
            scope.with_state(|given: &mut GivenBudgets| given.prices = Some(prices));
            Ok(())
        }))
    }
}

/// What a crew's build collects of [`CrewBuilder::budget`] and
/// [`CrewBuilder::budget_ledger`].
#[derive(Default)]
struct GivenBudgets {
    budgets: Vec<Budget>,
    ledger: Option<Arc<dyn Ledger>>,
    prices: Option<Prices>,
    /// Whether the hooks are registered (at the first budget).
    hooked: bool,
    /// What the hooks read, set once every budget is given.
    shared: Arc<OnceLock<CrewBudgets>>,
}

/// A crew's budgets and their ledger, as its hooks read them.
struct CrewBudgets {
    budgets: Vec<Budget>,
    ledger: Arc<dyn Ledger>,
    prices: Prices,
    /// The crew's name, and its buses: its own registry's (weak: the
    /// registry holds the hooks that hold this) and the global one.
    crew: String,
    buses: (
        std::sync::Weak<hooks_core::HookRegistry>,
        crate::registry::SharedRegistry,
    ),
}

/// The charges of the budgets covering one call, each beside its budget.
struct Covered<'a> {
    charges: Vec<Charge>,
    budgets: Vec<&'a Budget>,
}

/// A model call a budget refused, left in the call's extensions for
/// [`CrewExtension::model_call_refused`].
#[derive(Debug, Clone)]
struct ModelCallRefused(CrewError);

/// A tool call refused by a budget that ends the kickoff, left in the
/// call's extensions for [`CrewExtension::tool_call_refused`].
#[derive(Debug, Clone)]
struct ToolCallRefused(CrewError);

/// Left in a tool call's context once its budgets counted it: the same
/// call checked again (an approved edit re-checked) is not counted twice.
#[derive(Debug, Clone, Copy)]
struct Counted;

/// A new id for a call's reservations, unique across processes: this
/// process's random prefix (drawn once) and a count.
fn new_reservation_id() -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        let mut bytes = [0_u8; 12];
        // Unguessable is not needed; unique is: a failing source leaves
        // the process id and the time to tell processes apart.
        let _ = getrandom::fill(&mut bytes);
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        format!(
            "{}-{}-{since:x}",
            std::process::id(),
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )
    });
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{n}")
}

/// The id a call's reservations are kept under: its idempotency key in a
/// durable kickoff (the same in every process that runs it, so a call
/// whose hooks run again after a crash is counted once), else a new id.
fn reservation_id(extensions: &hooks_core::Extensions) -> String {
    extensions
        .get::<IdempotencyKey>()
        .map_or_else(new_reservation_id, |key| key.as_str().to_owned())
}

/// Registers the budgets' hooks on the crew's registry, at the place of
/// its first budget.
fn register_hooks(
    scope: &BuildScope<'_>,
    shared: &Arc<OnceLock<CrewBudgets>>,
) -> Result<(), BuildError> {
    let tools = Arc::clone(shared);
    let tool_hook = hooks_core::async_hook::<ToolCallHookContext, _, _>(move |ctx| {
        let tools = Arc::clone(&tools);
        Box::pin(async move {
            match tools.get() {
                Some(budgets) => budgets.check_tool_call(ctx).await,
                None => Ok(()),
            }
        })
    });
    register_crew_async_hook(
        scope.registry,
        PRE_TOOL_CALL,
        scope.crew,
        HookOptions::new().name(BUDGET_HOOK_NAME),
        tool_hook,
    )?;
    let settled = Arc::clone(shared);
    let settle_hook = hooks_core::async_hook::<LlmCallHookContext, _, _>(move |call| {
        let settled = Arc::clone(&settled);
        Box::pin(async move {
            if let Some(budgets) = settled.get() {
                budgets.settle_model_call(call).await;
            }
        })
    });
    register_crew_async_hook(
        scope.registry,
        POST_MODEL_CALL,
        scope.crew,
        HookOptions::new().name(BUDGET_HOOK_NAME),
        settle_hook,
    )?;
    let models = Arc::clone(shared);
    let model_hook = hooks_core::async_hook::<LlmCallHookContext, _, _>(move |call| {
        let models = Arc::clone(&models);
        Box::pin(async move {
            match models.get() {
                Some(budgets) => budgets.check_model_call(call).await,
                None => Ok(()),
            }
        })
    });
    register_crew_async_hook(
        scope.registry,
        PRE_MODEL_CALL,
        scope.crew,
        HookOptions::new().name(BUDGET_HOOK_NAME),
        model_hook,
    )?;
    let ended = Arc::clone(shared);
    let end_hook = hooks_core::async_hook::<ExecutionEndContext, _, _>(move |end| {
        let ended = Arc::clone(&ended);
        Box::pin(async move {
            if let Some(budgets) = ended.get() {
                budgets.forget_kickoff(end.crew.as_ref()).await;
            }
        })
    });
    register_crew_async_hook(
        scope.registry,
        EXECUTION_END,
        scope.crew,
        HookOptions::new().name(BUDGET_HOOK_NAME),
        end_hook,
    )?;
    Ok(())
}

impl CrewBudgets {
    /// What a ledger's answer means for a call under `covered`: admitted,
    /// or refused by the budget named (counters down: by the first budget
    /// that does not allow calls then).
    fn admitted<'a>(
        &self,
        answer: Result<(), LedgerError>,
        covered: &Covered<'a>,
    ) -> Result<(), (&'a Budget, LedgerError)> {
        let first = covered.budgets[0];
        match answer {
            Ok(()) => Ok(()),
            Err(LedgerError::Exceeded(over)) => {
                let budget = covered
                    .budgets
                    .iter()
                    .find(|budget| budget.name == over.budget)
                    .map_or(first, |budget| *budget);
                Err((budget, LedgerError::Exceeded(over)))
            }
            Err(error) => {
                if covered
                    .budgets
                    .iter()
                    .all(|budget| budget.allow_when_unavailable)
                {
                    tracing::warn!(target: "crew_runtime::budget", %error, "the budgets' counters cannot be reached: the call goes on uncounted, as its budgets allow");
                    return Ok(());
                }
                let strict = covered
                    .budgets
                    .iter()
                    .find(|budget| !budget.allow_when_unavailable)
                    .map_or(first, |budget| *budget);
                Err((strict, error))
            }
        }
    }

    /// The charges of the budgets `covers` picks, for a call of `crew`'s
    /// kickoff; or why a budget cannot count it.
    fn charges<'a>(
        &'a self,
        crew: Option<&Arc<dyn CrewInfo>>,
        covers: impl Fn(&Budget) -> bool,
    ) -> Result<Covered<'a>, (&'a Budget, LedgerError)> {
        let mut covered = Covered {
            charges: Vec::new(),
            budgets: Vec::new(),
        };
        for budget in self.budgets.iter().filter(|budget| covers(budget)) {
            let key = budget
                .key(crew)
                .map_err(|why| (budget, LedgerError::Invalid(why)))?;
            covered.charges.push(Charge::over(
                budget.name.clone(),
                key,
                budget.window,
                budget.limit,
                1,
            ));
            covered.budgets.push(budget);
        }
        Ok(covered)
    }

    /// Drops the counters of the budgets counted per kickoff, once
    /// `crew`'s kickoff ended: no call counts in them again, and a
    /// long-lived process or store would otherwise keep one per kickoff.
    async fn forget_kickoff(&self, crew: Option<&Arc<dyn CrewInfo>>) {
        let Ok(covered) = self.charges(crew, |budget| budget.per == Per::Kickoff) else {
            return;
        };
        if covered.charges.is_empty() {
            return;
        }
        if let Err(error) = self.ledger.forget(&covered.charges).await {
            tracing::warn!(target: "crew_runtime::budget", %error, "the ended kickoff's budget counters could not be dropped: they stay, counting nothing more");
        }
    }

    async fn check_tool_call(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        if ctx.extensions.get::<Counted>().is_some() {
            return Ok(());
        }
        let tool = ctx.tool_name();
        let has = ctx
            .tool
            .as_deref()
            .map_or(Capabilities::NONE, |tool| tool.annotations().capabilities());
        let agent = ctx.agent.as_ref().map(|agent| agent.role().to_owned());
        let refused = |(budget, error): (&Budget, LedgerError)| {
            self.refused(budget, &error, tool, agent.clone())
        };
        let covered = self
            .charges(ctx.crew.as_ref(), |budget| budget.counts_tool(tool, has))
            .map_err(refused)?;
        if covered.charges.is_empty() {
            return Ok(());
        }
        // A tool call is counted once, as it is: nothing to settle.
        let counted = self
            .ledger
            .count(&reservation_id(&ctx.extensions), &covered.charges)
            .await
            .map(|_| ());
        if let Err((budget, error)) = self.admitted(counted, &covered) {
            let ends = budget
                .ends_kickoff
                .then(|| ToolCallRefused(exceeded(budget, &error)));
            let aborted = refused((budget, error));
            if let Some(ends) = ends {
                ctx.extensions.insert(ends);
            }
            return Err(aborted);
        }
        ctx.extensions.insert(Counted);
        Ok(())
    }

    /// The block of a refused call (`call`: `model`, or the tool's name),
    /// sent as a [`BudgetRefusedEvent`] on the crew's buses.
    fn refused(
        &self,
        budget: &Budget,
        error: &LedgerError,
        call: &str,
        agent: Option<String>,
    ) -> HookAborted {
        let aborted = refusal(budget, error);
        let event = hooks_core::Event::from(BudgetRefusedEvent {
            budget: budget.name.clone(),
            key: match error {
                LedgerError::Exceeded(over) => over.key.clone(),
                _ => String::new(),
            },
            call: call.to_owned(),
            reason: aborted.reason.clone(),
            crew: self.crew.clone(),
            agent,
        });
        let (scoped, global) = &self.buses;
        if global.events().has_listeners() {
            global.events().emit(&event);
        }
        if let Some(scoped) = scoped.upgrade()
            && scoped.events().has_listeners()
        {
            scoped.events().emit(&event);
        }
        aborted
    }

    async fn check_model_call(&self, call: &mut LlmCallHookContext) -> Result<(), HookAborted> {
        let mut covered = match self.charges(call.crew.as_ref(), |budget| {
            budget.measure == Measure::ModelCalls || budget.bounds_model_calls()
        }) {
            Ok(covered) => covered,
            Err((budget, error)) => {
                let _ = self.refused(budget, &error, "model", agent_of(call));
                return Err(refuse_model_call(call, budget, &error));
            }
        };
        if covered.charges.is_empty() {
            return Ok(());
        }
        let bounded = covered
            .budgets
            .iter()
            .any(|budget| budget.bounds_model_calls());
        let mut price = None;
        if bounded {
            let model = call
                .llm
                .as_ref()
                .map(|llm| llm.name().to_owned())
                .unwrap_or_default();
            let cap = call.llm.as_ref().and_then(|llm| llm.max_output_tokens());
            let first = |measure: Measure| {
                covered
                    .budgets
                    .iter()
                    .find(|budget| budget.measure == measure)
                    .copied()
            };
            let unbounded = match cap {
                None => first(Measure::Tokens)
                    .or_else(|| first(Measure::CompletionTokens))
                    .or_else(|| first(Measure::Money))
                    .map(|budget| {
                        (
                            budget,
                            BudgetError::Unbounded {
                                budget: budget.name.clone(),
                                model: model.clone(),
                            },
                        )
                    }),
                Some(_) => None,
            };
            price = self.prices.price(&model);
            let unpriced = match (price, first(Measure::Money)) {
                (None, Some(budget)) => Some((
                    budget,
                    BudgetError::Unpriced {
                        budget: budget.name.clone(),
                        model: model.clone(),
                    },
                )),
                _ => None,
            };
            if let Some((budget, error)) = unbounded.or(unpriced) {
                let aborted = refuse_unboundable(call, budget, error);
                let why = LedgerError::Invalid(aborted.reason.clone());
                let _ = self.refused(budget, &why, "model", agent_of(call));
                return Err(aborted);
            }
            let (prompt, cap) = (prompt_bound(call), cap.unwrap_or(0));
            for (charge, budget) in covered.charges.iter_mut().zip(&covered.budgets) {
                charge.amount = match budget.measure {
                    Measure::Tokens => prompt.saturating_add(cap),
                    Measure::PromptTokens => prompt,
                    Measure::CompletionTokens => cap,
                    Measure::Money => price.map_or(u64::MAX, |price| price.cost(prompt, cap)),
                    _ => continue,
                };
            }
        }
        // A model turn is one call, its retries after a failure included;
        // a durable kickoff's turn asked again after a crash is the same
        // call (its key), counted once.
        let id = reservation_id(&call.extensions);
        let admitted = if bounded {
            self.ledger.reserve(&id, &covered.charges).await.map(|_| ())
        } else {
            self.ledger.count(&id, &covered.charges).await.map(|_| ())
        };
        match self.admitted(admitted, &covered) {
            Ok(()) => {
                if bounded {
                    call.extensions.insert(HeldTokens {
                        id,
                        price,
                        budgets: covered
                            .budgets
                            .iter()
                            .map(|budget| (budget.name.clone(), budget.measure.clone()))
                            .collect(),
                    });
                }
                Ok(())
            }
            Err((budget, error)) => {
                let _ = self.refused(budget, &error, "model", agent_of(call));
                Err(refuse_model_call(call, budget, &error))
            }
        }
    }

    /// Settles a model call's reservation at what the provider reported
    /// (tokens, and their price); with no report, it stays charged in
    /// full.
    async fn settle_model_call(&self, call: &mut LlmCallHookContext) {
        let Some(held) = call.extensions.get::<HeldTokens>() else {
            return;
        };
        let Some(usage) = call.extensions.get::<TokenUsage>() else {
            return;
        };
        let total = usage
            .total_tokens
            .max(usage.prompt_tokens.saturating_add(usage.completion_tokens));
        let costs: Vec<(&str, u64)> = held
            .budgets
            .iter()
            .map(|(name, measure)| {
                let cost = match measure {
                    Measure::Tokens => total,
                    Measure::PromptTokens => usage.prompt_tokens,
                    // What the provider counted beyond the prompt: never
                    // less than the answer's own count.
                    Measure::CompletionTokens => total
                        .saturating_sub(usage.prompt_tokens)
                        .max(usage.completion_tokens),
                    Measure::Money => held.price.map_or(u64::MAX, |price| {
                        // Tokens the provider counted beyond prompt and
                        // answer priced as answer tokens: never less.
                        let extra = total
                            .saturating_sub(usage.prompt_tokens)
                            .saturating_sub(usage.completion_tokens);
                        price.cost(
                            usage.prompt_tokens,
                            usage.completion_tokens.saturating_add(extra),
                        )
                    }),
                    _ => 1,
                };
                (name.as_str(), cost)
            })
            .collect();
        if let Err(error) = self.ledger.settle(&held.id, &costs).await {
            tracing::warn!(target: "crew_runtime::budget", %error, "a model call's cost could not be settled: its reservation stays charged in full");
        }
    }
}

/// The role of the agent whose model call `call` is.
fn agent_of(call: &LlmCallHookContext) -> Option<String> {
    call.agent.as_ref().map(|agent| agent.role().to_owned())
}

/// A model call's reservation, left in its context's extensions for the
/// settlement after the answer: its id, the model's price, and its
/// budgets (name, and what each counts).
#[derive(Debug, Clone)]
struct HeldTokens {
    id: String,
    /// The model's price, for money budgets.
    price: Option<Price>,
    budgets: Vec<(String, Measure)>,
}

/// The prompt's tokens at most: its bytes (no byte-level tokenizer makes
/// more tokens than bytes), the offered tools' definitions, and a margin
/// for each message's framing.
fn prompt_bound(call: &LlmCallHookContext) -> u64 {
    const FRAMING: u64 = 16;
    let bytes = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let messages = call.messages.iter().fold(FRAMING, |sum, message| {
        let calls = message.tool_calls.iter().fold(0_u64, |sum, request| {
            sum.saturating_add(bytes(
                request.name.len() + request.arguments.len() + request.id.len(),
            ))
            .saturating_add(FRAMING)
        });
        sum.saturating_add(bytes(message.content.len()))
            .saturating_add(calls)
            .saturating_add(FRAMING)
    });
    call.tools.iter().fold(messages, |sum, tool| {
        sum.saturating_add(bytes(
            tool.name.len() + tool.description.len() + tool.parameters.to_string().len(),
        ))
        .saturating_add(FRAMING)
    })
}

/// The block of a model call a token or money budget cannot bound (no
/// output cap, no price), with the kickoff's error left in the call's
/// extensions.
fn refuse_unboundable(
    call: &mut LlmCallHookContext,
    budget: &Budget,
    error: BudgetError,
) -> HookAborted {
    let reason = error.to_string();
    call.extensions
        .insert(ModelCallRefused(CrewError::Integration(
            IntegrationError::new(INTEGRATION, "a budget refused a model call", error),
        )));
    tracing::info!(target: "crew_runtime::budget", budget = %budget.name, %reason, "a call was refused");
    HookAborted::new(reason, budget.source())
}

/// The block of a model call, with the kickoff's error left in the
/// call's extensions.
fn refuse_model_call(
    call: &mut LlmCallHookContext,
    budget: &Budget,
    error: &LedgerError,
) -> HookAborted {
    call.extensions
        .insert(ModelCallRefused(exceeded(budget, error)));
    refusal(budget, error)
}

/// The kickoff's error when `budget` refused a call for `error` (counters
/// that could not be reached: `used` is the limit, the key unknown).
fn exceeded(budget: &Budget, error: &LedgerError) -> CrewError {
    let (key, used) = match error {
        LedgerError::Exceeded(over) => (over.key.clone(), over.used),
        _ => (String::new(), budget.limit),
    };
    CrewError::BudgetExceeded {
        budget: budget.name.clone(),
        key,
        limit: budget.limit,
        used,
    }
}

/// The block a budget's refusal is.
fn refusal(budget: &Budget, error: &LedgerError) -> HookAborted {
    let reason = match error {
        LedgerError::Exceeded(over) => over.to_string(),
        other => format!("budget `{}` cannot count the call: {other}", budget.name),
    };
    tracing::info!(target: "crew_runtime::budget", budget = %budget.name, %reason, "a call was refused");
    HookAborted::new(reason, budget.source())
}

/// At every crew's build, after its own hooks: the crew's budgets,
/// checked against its tools, and its extension, if it has any.
pub(crate) fn at_build(
    scope: &BuildScope<'_>,
) -> Result<Option<Arc<dyn CrewExtension>>, BuildError> {
    let Some(given) = scope.take_state::<GivenBudgets>() else {
        return Ok(None);
    };
    if given.budgets.is_empty() {
        return Ok(None);
    }
    check(&given.budgets, scope).map_err(|error| {
        BuildError::Integration(IntegrationError::new(
            INTEGRATION,
            "the crew's budgets were refused",
            error,
        ))
    })?;
    let ledger = given
        .ledger
        .unwrap_or_else(|| Arc::new(InProcessLedger::new()));
    let budgets = CrewBudgets {
        budgets: given.budgets.clone(),
        ledger,
        prices: given.prices.unwrap_or_else(Prices::builtin),
        crew: scope.crew.to_owned(),
        buses: (Arc::downgrade(scope.registry), scope.global.clone()),
    };
    // Set once, here: the hooks registered at the first budget read it.
    let _ = given.shared.set(budgets);
    Ok(Some(Arc::new(CrewBudgetsExtension {
        budgets: given.budgets,
        tools: scope
            .tools
            .iter()
            .map(|tool| (tool.name().to_owned(), tool.annotations().capabilities()))
            .collect(),
    })))
}

/// The checks of a crew's budgets at its build.
fn check(budgets: &[Budget], scope: &BuildScope<'_>) -> Result<(), BudgetError> {
    let tools: BTreeSet<String> = scope
        .tools
        .iter()
        .map(|tool| tool.name().to_owned())
        .collect();
    let mut names = BTreeSet::new();
    for budget in budgets {
        if budget.name.is_empty() {
            return Err(BudgetError::EmptyName);
        }
        if !names.insert(budget.name.as_str()) {
            return Err(BudgetError::DuplicateName(budget.name.clone()));
        }
        if budget.tools_on_model_calls {
            return Err(BudgetError::ToolsOnModelCalls(budget.name.clone()));
        }
        if let Measure::ToolCalls { tools: named } = &budget.measure {
            for tool in named {
                if !tools.contains(tool) {
                    return Err(BudgetError::UnknownTool {
                        budget: budget.name.clone(),
                        tool: tool.clone(),
                        closest: crate::check::closest(tool, &tools),
                    });
                }
            }
        }
    }
    Ok(())
}

/// A crew's budgets, as its run and `explain` see them.
struct CrewBudgetsExtension {
    budgets: Vec<Budget>,
    /// The crew's tools and their capabilities, for `explain`.
    tools: std::collections::HashMap<String, Capabilities>,
}

impl CrewBudgetsExtension {
    /// Whether `aborted` is one of the crew's budgets' blocks: a later
    /// hook's block of the same call is the runtime's to report.
    fn is_own(&self, aborted: &HookAborted) -> bool {
        aborted
            .source
            .strip_prefix("budget:")
            .is_some_and(|name| self.budgets.iter().any(|budget| budget.name == name))
    }
}

impl CrewExtension for CrewBudgetsExtension {
    fn explain(&self, tool: &str, _role: Option<&str>, notes: &mut Vec<String>) {
        for budget in self.budgets.iter().filter(|budget| {
            let has = self.tools.get(tool).copied().unwrap_or(Capabilities::NONE);
            budget.counts_tool(tool, has)
        }) {
            notes.push(format!(
                "budget `{}`: at most {} call(s) per {} over {}",
                budget.name,
                budget.limit,
                match budget.per {
                    Per::Kickoff => "kickoff",
                    Per::Crew => "crew",
                    Per::User => "user",
                    Per::Tenant => "tenant",
                },
                budget.window
            ));
        }
    }

    fn tool_call_refused(
        &self,
        ctx: &ToolCallHookContext,
        blocked: &HookAborted,
    ) -> Option<CrewError> {
        let ToolCallRefused(error) = ctx.extensions.get::<ToolCallRefused>()?;
        self.is_own(blocked).then(|| error.clone())
    }

    fn model_call_refused(
        &self,
        call: &LlmCallHookContext,
        aborted: &HookAborted,
    ) -> Option<CrewError> {
        let ModelCallRefused(error) = call.extensions.get::<ModelCallRefused>()?;
        self.is_own(aborted).then(|| error.clone())
    }
}

impl Crew {
    /// The crew's budgets, in the order given.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::budget::Budget;
    /// use crew_runtime::prelude::*;
    ///
    /// let agent = Agent::builder("Clerk").llm(Arc::new(ScriptedLlm::new().answer("done"))).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Answer").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .budget(Budget::model_calls("turns", 10))
    ///     .build()?;
    /// assert_eq!(crew.budgets()[0].name(), "turns");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budgets(&self) -> &[Budget] {
        self.extension::<CrewBudgetsExtension>()
            .map_or(&[][..], |extension| extension.budgets.as_slice())
    }
}
