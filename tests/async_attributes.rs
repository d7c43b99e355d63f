//! `async fn` hooks as attributes: registered at link time in their place
//! among the synchronous ones, their decisions read as a synchronous
//! hook's would be.

use hooks_core::{
    DispatchOutcome, HookAborted, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext,
    global_registry,
};
use hooks_macros::{after_tool_call, before_tool_call, on};

#[on(PRE_TOOL_CALL, tools = ["async_attr_probe"], order = 1)]
fn first(ctx: &mut ToolCallHookContext) {
    ctx.tool_input.insert("trail".into(), "first".into());
}

#[on(PRE_TOOL_CALL, tools = ["async_attr_probe"], order = 2)]
async fn second(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    std::future::ready(()).await;
    let trail = ctx.tool_input["trail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ctx.tool_input
        .insert("trail".into(), format!("{trail},second").into());
    if ctx.tool_input.contains_key("deny") {
        return Err("denied after an await".into());
    }
    Ok(())
}

#[before_tool_call(tools = ["async_attr_probe"], order = 3)]
async fn third(ctx: &mut ToolCallHookContext) -> bool {
    let trail = ctx.tool_input["trail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ctx.tool_input
        .insert("trail".into(), format!("{trail},third").into());
    true
}

#[after_tool_call(tools = ["async_attr_probe"])]
async fn redact(ctx: &mut ToolCallHookContext) -> Option<String> {
    ctx.tool_result
        .as_deref()
        .map(|r| r.replace("secret", "[hidden]"))
}

fn call(deny: bool) -> ToolCallHookContext {
    let mut ctx = ToolCallHookContext::new("async_attr_probe", Default::default());
    if deny {
        ctx.tool_input.insert("deny".into(), true.into());
    }
    ctx
}

#[test]
fn async_attribute_hooks_run_in_order_with_sync_ones() {
    let mut ctx = call(false);
    assert_eq!(
        global_registry().dispatch(PRE_TOOL_CALL, &mut ctx),
        DispatchOutcome::Proceeded
    );
    assert_eq!(ctx.tool_input["trail"], "first,second,third");
}

#[test]
fn an_async_attribute_hook_blocks_with_its_name_as_source() {
    let mut ctx = call(true);
    match global_registry().dispatch(PRE_TOOL_CALL, &mut ctx) {
        DispatchOutcome::Aborted(abort) => {
            assert_eq!(abort.reason, "denied after an await");
            assert_eq!(abort.source, "second");
        }
        other => panic!("expected a block, got {other:?}"),
    }
    assert_eq!(ctx.tool_input["trail"], "first,second", "the chain stopped");
}

#[test]
fn an_async_after_hook_replaces_the_result() {
    let mut ctx = call(false);
    ctx.tool_result = Some("the secret plan".into());
    assert_eq!(
        global_registry().dispatch(POST_TOOL_CALL, &mut ctx),
        DispatchOutcome::Modified
    );
    assert_eq!(ctx.tool_result.as_deref(), Some("the [hidden] plan"));
}

mod crew_scoped {
    //! `async fn` hook methods of a `#[crew_base]` crew, awaited in a
    //! kickoff on the instance's state.

    use std::sync::Arc;

    use crew_runtime::StepContext;
    use crew_runtime::prelude::*;

    #[derive(Clone)]
    struct GuardedCrew {
        forbidden: &'static str,
        llm: Arc<ScriptedLlm>,
    }

    #[crew_base]
    impl GuardedCrew {
        #[agent]
        fn clerk(&self) -> Agent {
            let delete = Tool::dynamic("delete", "Deletes", json!({"type": "object"}), |_| async {
                Ok::<_, String>(json!("deleted"))
            });
            Agent::builder("Clerk")
                .tool(delete)
                .llm(self.llm.clone())
                .build()
        }

        #[task]
        fn tidy(&self) -> Task {
            Task::builder("Tidy up").agent(&self.clerk()).build()
        }

        #[on(PRE_TOOL_CALL, tools = ["delete"])]
        async fn check_path(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
            // Stands for a policy service the hook awaits.
            tokio::task::yield_now().await;
            let path = ctx.tool_input["path"].as_str().unwrap_or_default();
            if path.starts_with(self.forbidden) {
                return Err(HookAborted::new(format!("{path} is protected"), "paths"));
            }
            Ok(())
        }

        #[on(POST_STEP)]
        async fn sign(&self, ctx: &mut StepContext) -> Option<String> {
            Some(format!(
                "{} (checked against {})",
                ctx.payload, self.forbidden
            ))
        }

        #[crew]
        fn crew(&self) -> Result<Crew, BuildError> {
            Crew::builder()
                .agents(self.agents())
                .tasks(self.tasks())
                .global_registry(Arc::new(HookRegistry::new()))
                .build()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_hook_methods_run_in_the_crews_kickoff() {
        let llm = Arc::new(
            ScriptedLlm::new()
                .call("delete", json!({"path": "/etc/passwd"}))
                .call("delete", json!({"path": "/tmp/scratch"}))
                .answer("tidied"),
        );
        let crew = GuardedCrew {
            forbidden: "/etc",
            llm: llm.clone(),
        }
        .crew()
        .expect("builds");
        let output = crew.kickoff(()).await.expect("runs");
        assert_eq!(output.raw, "tidied (checked against /etc)");
        let requests = llm.requests();
        assert_eq!(
            requests[1].observations(),
            ["Tool execution blocked by hook. Tool: delete"]
        );
        assert_eq!(requests[2].observations(), ["deleted"]);
    }
}

mod timeouts {
    //! `timeout_ms = N` on an `async fn` hook: the hook's own time limit,
    //! kept by a crew's awaiting dispatch; past it the hook counts as
    //! panicked (here fail-closed: the call is blocked).

    use std::sync::Arc;
    use std::time::Duration;

    use crew_runtime::prelude::*;
    use crew_runtime::{get_hooks, global_registry};

    #[on(PRE_TOOL_CALL, tools = ["async_attr_timeout_probe"], timeout_ms = 40, fail_closed)]
    async fn never_decides(_ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        std::future::pending().await
    }

    #[derive(Clone)]
    struct SlowCrew {
        llm: Arc<ScriptedLlm>,
    }

    #[crew_base]
    impl SlowCrew {
        #[agent]
        fn clerk(&self) -> Agent {
            let archive = Tool::dynamic("archive", "Archives", json!({"type": "object"}), |_| {
                Ok::<_, String>(json!("archived"))
            });
            Agent::builder("Clerk")
                .tool(archive)
                .llm(self.llm.clone())
                .build()
        }

        #[task]
        fn file(&self) -> Task {
            Task::builder("File it").agent(&self.clerk()).build()
        }

        #[on(PRE_TOOL_CALL, timeout_ms = 40, fail_closed)]
        async fn wait_for_ever(&self, _ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
            std::future::pending().await
        }

        #[crew]
        fn crew(&self) -> Result<Crew, BuildError> {
            Crew::builder()
                .agents(self.agents())
                .tasks(self.tasks())
                .global_registry(Arc::new(HookRegistry::new()))
                // Only the hook's own limit can be reached in a test.
                .hook_timeout(Duration::from_secs(3600))
                .build()
        }
    }

    #[test]
    fn the_attribute_records_the_hooks_own_limit() {
        let listed = get_hooks(PRE_TOOL_CALL);
        let hook = listed
            .iter()
            .find(|hook| hook.name == "never_decides")
            .expect("registered at link time");
        assert_eq!(hook.timeout, Some(Duration::from_millis(40)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_time_hook_is_cut_short_at_its_own_limit() {
        let mut ctx = ToolCallHookContext::new("async_attr_timeout_probe", Default::default());
        let dispatcher = global_registry()
            .dispatcher()
            .with_hook_timeout(Duration::from_secs(3600));
        let call = dispatcher.begin_call(&[PRE_TOOL_CALL.into()]);
        let outcome = call.dispatch_async(PRE_TOOL_CALL, &mut ctx).await;
        let abort = outcome.aborted().expect("fail-closed: blocked");
        assert_eq!(abort.source, "never_decides");
        assert_eq!(
            abort.reason,
            "fail-closed hook timed out: still running after 40ms"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crew_hook_method_is_cut_short_at_its_own_limit() {
        let llm = Arc::new(
            ScriptedLlm::new()
                .call("archive", json!({}))
                .answer("filed"),
        );
        let crew = SlowCrew { llm: llm.clone() }.crew().expect("builds");
        let output = crew.kickoff(()).await.expect("runs");
        assert_eq!(output.raw, "filed");
        assert_eq!(
            llm.requests()[1].observations(),
            ["Tool execution blocked by hook. Tool: archive"]
        );
    }
}
