//! Budgets on a crew's calls (SPEC §15, "Reserve, then settle"): a model
//! call past a budget ends the kickoff with `CrewError::BudgetExceeded`, a
//! tool call past one is blocked with the source `budget:<name>`, in all
//! the budgets covering a call or in none; counters fail closed; the
//! crew's build checks its budgets; the store's ledger shares them.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crew_runtime::budget::{
    BUDGET_HOOK_NAME, Budget, BudgetError, Charge, InProcessLedger, Ledger, LedgerError, Measure,
    Per, Reserved, Window,
};
use crew_runtime::prelude::*;
use crew_runtime::{
    CrewBuilder, HumanAnswer, HumanInputError, HumanInputRequest, HumanInputSource,
    InterceptionPoint, TokenUsage,
};
use futures_util::future::BoxFuture;

/// A tool that counts its runs.
fn counted(name: &str, runs: &Arc<AtomicUsize>) -> Tool {
    let runs = Arc::clone(runs);
    Tool::dynamic(
        name,
        "Looks something up",
        json!({"type": "object"}),
        move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(json!("found"))
        },
    )
}

/// A model that calls `tool` `calls` times, then answers.
fn calling(tool: &str, calls: usize) -> Arc<ScriptedLlm> {
    let mut llm = ScriptedLlm::new();
    for _ in 0..calls {
        llm = llm.call(tool, json!({}));
    }
    Arc::new(llm.answer("done"))
}

/// The sources of the blocks a crew's tool calls met, from its bus.
fn blocks(hooks: &HookRegistry) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    hooks.events().subscribe(move |event| {
        if let Event::HookDispatched(dispatched) = event
            && dispatched.point == InterceptionPoint::PRE_TOOL_CALL
            && let Some(source) = &dispatched.abort_source
        {
            sink.lock().expect("seen").push(source.clone());
        }
    });
    seen
}

/// An agent `Clerk` with the tool `lookup` (counting its runs in `runs`),
/// on `llm`.
fn clerk(runs: &Arc<AtomicUsize>, llm: Arc<dyn Llm>) -> Agent {
    Agent::builder("Clerk")
        .tool(counted("lookup", runs))
        .llm(llm)
        .build()
}

fn crew_of(agent: &Agent, hooks: &Arc<HookRegistry>) -> CrewBuilder {
    Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Look it up").agent(agent).build())
        .global_registry(Arc::clone(hooks))
}

#[test]
fn a_model_call_past_a_budget_ends_the_kickoff_with_budget_exceeded() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = clerk(&runs, calling("lookup", 10));
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(Budget::model_calls("turns", 3))
        .build()
        .expect("builds");
    let error = crew
        .kickoff_blocking(())
        .expect_err("stopped by the budget");
    match &error {
        CrewError::BudgetExceeded {
            budget,
            key,
            limit,
            used,
        } => {
            assert_eq!((budget.as_str(), limit, used), ("turns", &3, &3));
            assert!(key.starts_with("kickoff:"), "{key}");
        }
        other => panic!("BudgetExceeded, not {other:?}"),
    }
    assert!(error.to_string().contains("budget `turns`"), "{error}");
    // Three model calls ran, each asking for one lookup.
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    // Each kickoff counts apart.
    let again = crew.kickoff_blocking(()).expect_err("stopped again");
    assert!(matches!(again, CrewError::BudgetExceeded { used: 3, .. }));
}

#[test]
fn a_tool_call_past_a_budget_is_blocked_with_the_source_budget_and_its_name() {
    let runs = Arc::new(AtomicUsize::new(0));
    let hooks = Arc::new(HookRegistry::new());
    let seen = blocks(&hooks);
    let agent = clerk(&runs, calling("lookup", 5));
    let crew = crew_of(&agent, &hooks)
        .budget(Budget::tool_calls("lookups", 2))
        .build()
        .expect("builds");
    let output = crew.kickoff_blocking(()).expect("the agent goes on");
    assert_eq!(output.raw, "done");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "two calls ran");
    assert_eq!(
        *seen.lock().expect("seen"),
        ["budget:lookups", "budget:lookups", "budget:lookups"]
    );
}

#[test]
fn a_budget_of_some_tools_counts_only_those_and_explain_names_it() {
    let (searches, reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({}))
            .call("read_file", json!({}))
            .call("web_search", json!({}))
            .call("read_file", json!({}))
            .answer("done"),
    );
    let agent = Agent::builder("Researcher")
        .tool(counted("web_search", &searches))
        .tool(counted("read_file", &reads))
        .llm(llm)
        .build();
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(
            Budget::tool_calls("searches", 1)
                .tools(["web_search"])
                .window(Window::DayUtc),
        )
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(searches.load(Ordering::SeqCst), 1);
    assert_eq!(reads.load(Ordering::SeqCst), 2);
    assert!(explains(
        &crew,
        "web_search",
        "budget `searches`: at most 1"
    ));
    let explained = crew.explain("web_search", "Researcher");
    assert!(
        explained
            .hooks
            .iter()
            .any(|explained| explained.hook.name == BUDGET_HOOK_NAME),
        "{explained:?}"
    );
    assert!(!explains(&crew, "read_file", "budget `searches`"));
}

/// Whether `crew.explain` of a call of `tool` by the Researcher has a
/// note saying `said`.
fn explains(crew: &Crew, tool: &str, said: &str) -> bool {
    crew.explain(tool, "Researcher")
        .notes
        .iter()
        .any(|note| note.contains(said))
}

#[test]
fn a_per_user_budget_counts_each_user_across_kickoffs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = clerk(
        &runs,
        Arc::new(
            ScriptedLlm::new()
                .call("lookup", json!({}))
                .answer("one")
                .call("lookup", json!({}))
                .answer("two")
                .call("lookup", json!({}))
                .answer("three")
                .call("lookup", json!({}))
                .answer("four"),
        ),
    );
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(Budget::tool_calls("daily", 2).per(Per::User))
        .build()
        .expect("builds");
    let carol = crew.for_user("carol");
    carol.kickoff_blocking(()).expect("first");
    carol.kickoff_blocking(()).expect("second");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // Carol's third is blocked; dave has his own.
    carol.kickoff_blocking(()).expect("the agent goes on");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    crew.for_user("dave").kickoff_blocking(()).expect("dave's");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[test]
fn one_call_under_two_budgets_one_full_is_reserved_in_neither() {
    let runs = Arc::new(AtomicUsize::new(0));
    let ledger = Arc::new(InProcessLedger::new());
    let agent = clerk(&runs, calling("lookup", 3));
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(Budget::tool_calls("all-calls", 100).per(Per::Crew))
        .budget(Budget::tool_calls("lookups", 1).per(Per::Crew))
        .budget_ledger(ledger.clone())
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The two refused calls reserved nothing in the roomy budget either.
    let roomy = Charge::new("all-calls", "crew:crew", 100, 1);
    let held = futures_executor::block_on(ledger.used(&roomy)).expect("reads");
    assert_eq!(held, 1);
}

/// A ledger whose counters cannot be reached.
struct Down;

impl Ledger for Down {
    fn reserve<'a>(
        &'a self,
        _call: &'a str,
        _charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        Box::pin(async { Err(LedgerError::Unavailable("connection refused".into())) })
    }

    fn settle<'a>(
        &'a self,
        _call: &'a str,
        _costs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<(), LedgerError>> {
        Box::pin(async { Err(LedgerError::Unavailable("connection refused".into())) })
    }

    fn used<'a>(&'a self, _charge: &'a Charge) -> BoxFuture<'a, Result<u64, LedgerError>> {
        Box::pin(async { Err(LedgerError::Unavailable("connection refused".into())) })
    }
}

#[test]
fn a_budget_whose_counters_are_down_fails_closed_unless_it_allows_calls() {
    let runs = Arc::new(AtomicUsize::new(0));
    let hooks = Arc::new(HookRegistry::new());
    let seen = blocks(&hooks);
    let agent = || clerk(&runs, calling("lookup", 2));
    let strict = crew_of(&agent(), &hooks)
        .budget(Budget::tool_calls("lookups", 100))
        .budget_ledger(Arc::new(Down))
        .build()
        .expect("builds");
    strict.kickoff_blocking(()).expect("the agent goes on");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "refused: fail closed");
    assert_eq!(
        *seen.lock().expect("seen"),
        ["budget:lookups", "budget:lookups"]
    );

    // A model-call budget down ends the kickoff.
    let turns = crew_of(&agent(), &Arc::new(HookRegistry::new()))
        .budget(Budget::model_calls("turns", 100))
        .budget_ledger(Arc::new(Down))
        .build()
        .expect("builds");
    let error = turns.kickoff_blocking(()).expect_err("refused");
    assert!(matches!(error, CrewError::BudgetExceeded { ref budget, .. } if budget == "turns"));

    let lenient = crew_of(&agent(), &Arc::new(HookRegistry::new()))
        .budget(Budget::tool_calls("lookups", 100).allow_when_unavailable())
        .budget(Budget::model_calls("turns", 100).allow_when_unavailable())
        .budget_ledger(Arc::new(Down))
        .build()
        .expect("builds");
    lenient.kickoff_blocking(()).expect("runs, uncounted");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_crews_build_refuses_budgets_it_cannot_count() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = clerk(&runs, calling("lookup", 1));
    let refused = |budgets: Vec<Budget>| {
        let mut builder = crew_of(&agent, &Arc::new(HookRegistry::new()));
        for budget in budgets {
            builder = builder.budget(budget);
        }
        let error = builder.build().expect_err("refused");
        let BuildError::Integration(integration) = &error else {
            panic!("the budget's error, not {error:?}");
        };
        assert_eq!(integration.integration(), "budget");
        (
            integration
                .downcast_ref::<BudgetError>()
                .cloned()
                .expect("a BudgetError"),
            error.to_string(),
        )
    };
    let (error, shown) = refused(vec![Budget::tool_calls("calls", 1).tools(["lookpu"])]);
    assert!(
        matches!(error, BudgetError::UnknownTool { ref closest, .. } if closest.as_deref() == Some("lookup"))
    );
    assert!(shown.contains("did you mean `lookup`?"), "{shown}");
    let (error, _) = refused(vec![
        Budget::tool_calls("calls", 1),
        Budget::model_calls("calls", 1),
    ]);
    assert_eq!(error, BudgetError::DuplicateName("calls".into()));
    let (error, _) = refused(vec![Budget::model_calls("turns", 1).tools(["lookup"])]);
    assert_eq!(error, BudgetError::ToolsOnModelCalls("turns".into()));
    let (error, _) = refused(vec![Budget::model_calls("", 1)]);
    assert_eq!(error, BudgetError::EmptyName);
}

/// Two crews on one store, as two replicas: a per-crew budget counted
/// once for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_the_stores_ledger_share_their_budget() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let runs = Arc::new(AtomicUsize::new(0));
    let mut crews = Vec::new();
    for _ in 0..2 {
        let store = crew_runtime::store::Store::connect(&url)
            .await
            .expect("opens");
        let agent = clerk(&runs, calling("lookup", 2));
        crews.push(
            crew_of(&agent, &Arc::new(HookRegistry::new()))
                .name("refunds")
                .budget(Budget::tool_calls("lookups", 3).per(Per::Crew))
                .budget_ledger(Arc::new(store))
                .build()
                .expect("builds"),
        );
    }
    for crew in &crews {
        crew.kickoff(()).await.expect("runs");
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "three of the four calls ran"
    );
}

#[test]
fn a_call_refused_by_a_hook_before_the_budget_is_not_counted() {
    let runs = Arc::new(AtomicUsize::new(0));
    let hooks = Arc::new(HookRegistry::new());
    let seen = blocks(&hooks);
    let agent = clerk(&runs, calling("lookup", 3));
    let asked = Arc::new(AtomicUsize::new(0));
    let gate = move |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
        if asked.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(HookAborted::new("not the first one", "first-refused"));
        }
        Ok(())
    };
    let crew = crew_of(&agent, &hooks)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("first-refused"),
            gate,
        )
        .budget(Budget::tool_calls("one", 1))
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");
    // The gate refused the first call before the budget saw it: the
    // second is the one the budget admits, the third it refuses.
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.lock().expect("seen"), ["first-refused", "budget:one"]);
}

/// A crew of one agent on `llm`, with `budget` (counted per crew) on
/// `ledger`, priced by `prices`.
fn budgeted_crew(
    llm: ScriptedLlm,
    budget: Budget,
    prices: crew_runtime::budget::Prices,
    ledger: &Arc<InProcessLedger>,
) -> (Crew, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = clerk(&runs, Arc::new(llm));
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(budget.per(Per::Crew))
        .budget_prices(prices)
        .budget_ledger(ledger.clone())
        .build()
        .expect("builds");
    (crew, runs)
}

/// A crew with a token budget of `limit`.
fn token_crew(
    llm: ScriptedLlm,
    limit: u64,
    ledger: &Arc<InProcessLedger>,
) -> (Crew, Arc<AtomicUsize>) {
    budgeted_crew(
        llm,
        Budget::tokens("tokens", limit),
        crew_runtime::budget::Prices::builtin(),
        ledger,
    )
}

fn tokens_used(ledger: &InProcessLedger, limit: u64) -> u64 {
    futures_executor::block_on(ledger.used(&Charge::new("tokens", "crew:crew", limit, 1)))
        .expect("reads")
}

#[test]
fn a_token_budget_reserves_the_prompt_and_the_cap_and_settles_at_what_was_reported() {
    let ledger = Arc::new(InProcessLedger::new());
    let mut llm = ScriptedLlm::new()
        .max_tokens(400)
        .reporting_usage(TokenUsage::new(50, 10, 60));
    for _ in 0..5 {
        llm = llm.call("lookup", json!({}));
    }
    // Six turns each reserving at least the cap (2 400 in all, over the
    // limit), each settled at the 60 the provider reported.
    let (crew, runs) = token_crew(llm.answer("done"), 1_500, &ledger);
    crew.kickoff_blocking(())
        .expect("within the budget once settled");
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    assert_eq!(tokens_used(&ledger, 1_500), 6 * 60);
}

#[test]
fn a_token_budget_past_its_limit_ends_the_kickoff_before_the_call() {
    let ledger = Arc::new(InProcessLedger::new());
    let llm = ScriptedLlm::new()
        .max_tokens(4_000)
        .reporting_usage(TokenUsage::new(50, 10, 60))
        .answer("done");
    let (crew, _) = token_crew(llm, 1_000, &ledger);
    let error = crew.kickoff_blocking(()).expect_err("refused");
    assert!(
        matches!(error, CrewError::BudgetExceeded { ref budget, limit: 1_000, used: 0, .. } if budget == "tokens"),
        "{error}"
    );
    assert_eq!(tokens_used(&ledger, 1_000), 0, "nothing reserved");
}

#[test]
fn a_token_budget_refuses_a_model_with_no_output_cap() {
    let ledger = Arc::new(InProcessLedger::new());
    let llm = ScriptedLlm::new().answer("done");
    let (crew, _) = token_crew(llm, 1_000_000, &ledger);
    let error = crew.kickoff_blocking(()).expect_err("refused");
    let CrewError::Integration(integration) = &error else {
        panic!("the budget's error, not {error:?}");
    };
    assert!(matches!(
        integration.downcast_ref::<BudgetError>(),
        Some(BudgetError::Unbounded { budget, model }) if budget == "tokens" && model == "scripted"
    ));
    assert!(error.to_string().contains("no output cap"), "{error}");
}

#[test]
fn an_answer_with_no_usage_reported_stays_charged_in_full_in_its_budget() {
    let ledger = Arc::new(InProcessLedger::new());
    let llm = ScriptedLlm::new().max_tokens(300).answer("done");
    let (crew, _) = token_crew(llm, 100_000, &ledger);
    crew.kickoff_blocking(()).expect("runs");
    let used = tokens_used(&ledger, 100_000);
    assert!(
        used > 300,
        "the prompt's bound and the cap stay charged: {used}"
    );
}

/// Each refusal is an event on the crew's bus and a record on its audit
/// trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_budget_refusal_is_an_event_and_an_audit_record() {
    use crew_runtime::audit::{self, AuditTrail};
    use crew_runtime::budget::BudgetRefusedEvent;

    let dir = tempfile::tempdir().expect("a directory");
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let store = crew_runtime::store::Store::connect(&url)
        .await
        .expect("opens");
    let runs = Arc::new(AtomicUsize::new(0));
    let hooks = Arc::new(HookRegistry::new());
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&refusals);
    hooks.events().subscribe(move |event| {
        if let Event::Integration(integration) = event
            && let Some(refused) = integration.downcast_ref::<BudgetRefusedEvent>()
        {
            sink.lock().expect("seen").push(refused.clone());
        }
    });
    let agent = clerk(&runs, calling("lookup", 2));
    let crew = crew_of(&agent, &hooks)
        .budget(Budget::tool_calls("lookups", 1).per(Per::User))
        .build()
        .expect("builds");
    let trail = AuditTrail::open(store.clone()).expect("a trail");
    trail.attach(&crew);
    crew.for_user("carol").kickoff(()).await.expect("runs");
    trail.flush().await.expect("written");
    let seen = refusals.lock().expect("seen").clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (
            seen[0].budget.as_str(),
            seen[0].key.as_str(),
            seen[0].call.as_str()
        ),
        ("lookups", "user:carol", "lookup")
    );
    assert_eq!(seen[0].agent.as_deref(), Some("Clerk"));
    let records = audit::tail(&store, "default", 100).await.expect("reads");
    let refused: Vec<_> = records
        .iter()
        .filter(|record| record.kind == "budget_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{records:?}");
    assert_eq!(refused[0].data["budget"], "lookups");
    assert_eq!(refused[0].data["call"], "lookup");
    assert!(
        records
            .iter()
            .any(|record| record.kind == "blocked" && record.data["source"] == "budget:lookups")
    );
}

#[test]
fn a_budgets_file_with_a_misspelled_field_is_refused_with_line_column_and_did_you_mean() {
    let toml = "[[budget]]\nname = \"lookups\"\ncounts = \"tool_calls\"\n  limt = 2\n";
    let error = Budget::from_toml(toml).expect_err("refused");
    assert_eq!((error.line, error.column), (4, 3), "{error}");
    assert!(error.message.contains("unknown field `limt`"), "{error}");
    assert!(
        error.to_string().contains("did you mean `limit`?"),
        "{error}"
    );

    let json =
        "{\"budget\": [\n  {\"name\": \"lookups\", \"counts\": \"tool_call\", \"limit\": 2}\n]}";
    let error = Budget::from_json(json).expect_err("refused");
    assert_eq!(error.line, 2, "{error}");
    assert!(
        error.to_string().contains("did you mean `tool_calls`?"),
        "{error}"
    );

    // A value of the wrong kind, a window that is none, a field missing.
    for (text, said) in [
        (
            "[[budget]]\nname = \"a\"\ncounts = \"tokens\"\nlimit = \"ten\"\n",
            "expected u64",
        ),
        (
            "[[budget]]\nname = \"a\"\ncounts = \"tokens\"\nlimit = 10\nwindow = \"1w\"\n",
            "window `1w`",
        ),
        ("[[budget]]\nname = \"a\"\nlimit = 10\n", "counts"),
    ] {
        let error = Budget::from_toml(text).expect_err("refused");
        assert!(error.line > 0, "{error}");
        assert!(error.to_string().contains(said), "{said}: {error}");
    }
    let error = Budget::from_toml(
        "[[budget]]\nname = \"a\"\ncounts = \"tokens\"\nlimit = 10\nwindow = \"1w\"\n",
    )
    .expect_err("refused");
    assert_eq!(error.line, 5, "{error}");
}

#[test]
fn budgets_from_a_file_limit_a_crew_as_budgets_in_code_do() {
    let runs = Arc::new(AtomicUsize::new(0));
    let hooks = Arc::new(HookRegistry::new());
    let seen = blocks(&hooks);
    let agent = clerk(&runs, calling("lookup", 3));
    let budgets = Budget::from_toml(
        r#"
        [[budget]]
        name = "lookups"
        counts = "tool_calls"
        tools = ["lookup"]
        limit = 2
        per = "user"
        window = "day"
        "#,
    )
    .expect("loads");
    let mut builder = crew_of(&agent, &hooks);
    for budget in budgets {
        builder = builder.budget(budget);
    }
    let crew = builder.build().expect("builds");
    crew.for_user("carol").kickoff_blocking(()).expect("runs");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(*seen.lock().expect("seen"), ["budget:lookups"]);
}

/// A crew with a money budget of `limit` micro-units, priced by `prices`.
fn money_crew(
    llm: ScriptedLlm,
    limit: u64,
    prices: crew_runtime::budget::Prices,
    ledger: &Arc<InProcessLedger>,
) -> (Crew, Arc<AtomicUsize>) {
    budgeted_crew(llm, Budget::money("spend", limit), prices, ledger)
}

#[test]
fn a_money_budget_reserves_the_priced_bound_and_settles_at_the_reported_tokens_priced() {
    use crew_runtime::budget::{Price, Prices};
    let ledger = Arc::new(InProcessLedger::new());
    // $1 in and $2 out per million tokens; answers of at most 1 000.
    let prices = Prices::empty().with("house-model", Price::per_million(1.0, 2.0));
    let mut llm = ScriptedLlm::new()
        .named("house-model-2026-01")
        .max_tokens(1_000)
        .reporting_usage(TokenUsage::new(50, 10, 60));
    for _ in 0..5 {
        llm = llm.call("lookup", json!({}));
    }
    // Each turn reserves over 2 000 micro-dollars (the cap alone), six of
    // them over the limit; each settles at 50 × 1 + 10 × 2 = 70.
    let (crew, runs) = money_crew(llm.answer("done"), 5_000, prices, &ledger);
    crew.kickoff_blocking(())
        .expect("within the budget once settled");
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    let spent =
        futures_executor::block_on(ledger.used(&Charge::new("spend", "crew:crew", 5_000, 1)))
            .expect("reads");
    assert_eq!(spent, 6 * 70);
}

#[test]
fn a_money_budget_refuses_a_model_with_no_price() {
    let ledger = Arc::new(InProcessLedger::new());
    let llm = ScriptedLlm::new().max_tokens(100).answer("done");
    let (crew, _) = money_crew(
        llm,
        1_000_000,
        crew_runtime::budget::Prices::builtin(),
        &ledger,
    );
    let error = crew.kickoff_blocking(()).expect_err("refused");
    let CrewError::Integration(integration) = &error else {
        panic!("the budget's error, not {error:?}");
    };
    assert!(matches!(
        integration.downcast_ref::<BudgetError>(),
        Some(BudgetError::Unpriced { budget, model }) if budget == "spend" && model == "scripted"
    ));
}

#[test]
fn a_per_tenant_budget_counts_every_user_of_a_tenant_together() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut llm = ScriptedLlm::new();
    for _ in 0..4 {
        llm = llm.call("lookup", json!({})).answer("done");
    }
    let agent = clerk(&runs, Arc::new(llm));
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(Budget::tool_calls("per-tenant", 2).per(Per::Tenant))
        .build()
        .expect("builds");
    let acme = crew.for_tenant("acme");
    acme.for_user("alice").kickoff_blocking(()).expect("alice");
    acme.for_user("bob").kickoff_blocking(()).expect("bob");
    // Acme's two calls are spent, whoever asks; globex has its own.
    acme.for_user("carol")
        .kickoff_blocking(())
        .expect("blocked, goes on");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    crew.for_tenant("globex")
        .kickoff_blocking(())
        .expect("globex's");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[test]
fn a_budget_of_some_capabilities_counts_the_calls_of_the_tools_declaring_them() {
    let (fetches, reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let open_world = crew_runtime::ToolAnnotations::new()
        .read_only(true)
        .open_world(true);
    let closed = crew_runtime::ToolAnnotations::new()
        .read_only(true)
        .open_world(false);
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch_url", json!({}))
            .call("read_file", json!({}))
            .call("fetch_url", json!({}))
            .call("read_file", json!({}))
            .answer("done"),
    );
    let agent = Agent::builder("Researcher")
        .tool(counted("fetch_url", &fetches).with_annotations(open_world))
        .tool(counted("read_file", &reads).with_annotations(closed))
        .llm(llm)
        .build();
    let budgets = Budget::from_toml(
        "[[budget]]\nname = \"outside\"\ncounts = \"tool_calls\"\ncapabilities = [\"open_world\"]\nlimit = 1\n",
    )
    .expect("loads");
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(budgets.into_iter().next().expect("one"))
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    assert_eq!(reads.load(Ordering::SeqCst), 2);
    assert!(explains(&crew, "fetch_url", "budget `outside`"));
    assert!(!explains(&crew, "read_file", "budget `outside`"));
    let error = Budget::from_toml(
        "[[budget]]\nname = \"x\"\ncounts = \"tool_calls\"\ncapabilities = [\"open_wrld\"]\nlimit = 1\n",
    )
    .expect_err("refused");
    assert!(
        error.to_string().contains("did you mean `open_world`?"),
        "{error}"
    );
    assert_eq!(error.line, 4);
}

#[test]
fn a_budget_that_ends_the_kickoff_when_it_refuses_a_tool_call_does() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = clerk(&runs, calling("lookup", 3));
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(Budget::tool_calls("lookups", 1).end_kickoff_when_refused())
        .build()
        .expect("builds");
    let error = crew.kickoff_blocking(()).expect_err("ended");
    assert!(
        matches!(error, CrewError::BudgetExceeded { ref budget, limit: 1, used: 1, .. } if budget == "lookups"),
        "{error}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Approves every call, with its `order` changed to `B-2`.
struct EditsTheOrder;

#[crew_runtime::async_trait]
impl HumanInputSource for EditsTheOrder {
    async fn ask(&self, _: HumanInputRequest) -> Result<String, HumanInputError> {
        Ok("yes".to_owned())
    }

    async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
        let mut input = request
            .tool_input
            .and_then(|input| input.as_object().cloned())
            .unwrap_or_default();
        input.insert("order".to_owned(), json!("B-2"));
        Ok(HumanAnswer::new("yes").with_edited_input(input))
    }
}

#[test]
fn an_approved_edit_checked_again_by_the_budget_is_counted_once() {
    // The budget stands before the gate: the edited call goes through it
    // again (SPEC §11), and is admitted as the call it already counted.
    let ran = Arc::new(Mutex::new(Vec::new()));
    let tool = {
        let ran = Arc::clone(&ran);
        Tool::dynamic(
            "refund",
            "Refunds an order",
            json!({"type": "object"}),
            move |args| {
                ran.lock().expect("ran").push(args["order"].clone());
                Ok::<_, String>(json!("refunded"))
            },
        )
    };
    let agent = Agent::builder("Clerk")
        .tool(tool)
        .llm(Arc::new(
            ScriptedLlm::new()
                .call("refund", json!({"order": "A-1"}))
                .answer("done"),
        ))
        .build();
    let hooks = Arc::new(HookRegistry::new());
    let seen = blocks(&hooks);
    let ledger = Arc::new(InProcessLedger::new());
    let crew = crew_of(&agent, &hooks)
        .human_input(Arc::new(EditsTheOrder))
        .budget(Budget::tool_calls("one", 1).per(Per::Crew))
        .budget_ledger(ledger.clone())
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            crew_runtime::guards::ApprovalGate::for_tools(["refund"]).pre_hook(),
        )
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(*ran.lock().expect("ran"), [json!("B-2")], "the edit ran");
    assert!(seen.lock().expect("seen").is_empty(), "nothing blocked");
    let used = futures_executor::block_on(ledger.used(&Charge::new("one", "crew:crew", 1, 1)))
        .expect("reads");
    assert_eq!(used, 1, "counted once");
}

#[test]
fn a_kickoffs_own_budget_counters_are_dropped_when_it_ends() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = clerk(&runs, calling("lookup", 3));
    let ledger = Arc::new(InProcessLedger::new());
    let crew = crew_of(&agent, &Arc::new(HookRegistry::new()))
        .budget(Budget::tool_calls("calls", 2))
        .budget(Budget::model_calls("turns", 100).per(Per::Crew))
        .budget_ledger(ledger.clone())
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the kickoff's limit held");
    // Its own counter went with it; the crew's stays.
    let shown = format!("{ledger:?}");
    assert!(shown.contains("counters: 1"), "{shown}");
    let turns = futures_executor::block_on(ledger.used(&Charge::new("turns", "crew:crew", 100, 1)))
        .expect("reads");
    assert_eq!(turns, 4);
}

#[test]
fn prompt_and_completion_token_budgets_count_their_own_part_of_each_call() {
    // Each turn: 50 prompt tokens, 10 answer tokens, and 5 more the
    // provider counted (reasoning) in its total.
    let script = || {
        ScriptedLlm::new()
            .reporting_usage(TokenUsage::new(50, 10, 65))
            .call("lookup", json!({}))
            .call("lookup", json!({}))
            .answer("done")
    };
    let used = |ledger: &InProcessLedger, name: &str| {
        futures_executor::block_on(ledger.used(&Charge::new(name, "crew:crew", 1, 1)))
            .expect("reads")
    };
    let prices = crew_runtime::budget::Prices::builtin;

    // A prompt-token budget bounds a call with no output cap.
    let ledger = Arc::new(InProcessLedger::new());
    let (crew, runs) = budgeted_crew(
        script(),
        Budget::prompt_tokens("prompt", 10_000),
        prices(),
        &ledger,
    );
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(used(&ledger, "prompt"), 3 * 50);

    // An answer-token budget needs the cap, and counts all beyond the
    // prompt.
    let ledger = Arc::new(InProcessLedger::new());
    let (crew, _) = budgeted_crew(
        script(),
        Budget::completion_tokens("answers", 10_000),
        prices(),
        &ledger,
    );
    let error = crew.kickoff_blocking(()).expect_err("unbounded");
    assert!(error.to_string().contains("no output cap"), "{error}");
    let (crew, _) = budgeted_crew(
        script().max_tokens(100),
        Budget::completion_tokens("answers", 10_000),
        prices(),
        &ledger,
    );
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(used(&ledger, "answers"), 3 * 15);
}

#[test]
fn a_budgets_file_names_prompt_and_completion_token_budgets() {
    let budgets = Budget::from_toml(
        "[[budget]]\nname = \"p\"\ncounts = \"prompt_tokens\"\nlimit = 9\n\n\
         [[budget]]\nname = \"c\"\ncounts = \"completion_tokens\"\nlimit = 9\n",
    )
    .expect("loads");
    assert_eq!(budgets[0].measure(), &Measure::PromptTokens);
    assert_eq!(budgets[1].measure(), &Measure::CompletionTokens);
    let error =
        Budget::from_toml("[[budget]]\nname = \"p\"\ncounts = \"prompt_token\"\nlimit = 9\n")
            .expect_err("refused");
    assert!(
        error.to_string().contains("did you mean `prompt_tokens`?"),
        "{error}"
    );
}
