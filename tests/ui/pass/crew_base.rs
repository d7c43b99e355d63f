//! `#[crew_base]` with agents, tasks, hook methods of every style and a
//! crew method, on a stand-in crew type implementing `CrewScope`.

use hooks_core::__private::{CrewScope, DefaultTaskName};
use hooks_core::{HookAborted, HookOrigin, HookRegistry, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext};
use hooks_core::runtime::{ToolOutput};
use hooks_macros::{after_tool_call, agent, before_tool_call, crew, crew_base, on, task};

struct Agent {
    role: String,
}

struct Task {
    description: String,
    name: Option<String>,
}

impl DefaultTaskName for Task {
    fn named_by_default(mut self, name: &'static str) -> Self {
        self.name.get_or_insert_with(|| name.to_owned());
        self
    }
}

struct Crew {
    agents: Vec<Agent>,
    tasks: Vec<Task>,
    hooks: HookRegistry,
}

impl CrewScope for Crew {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.hooks
    }
}

#[derive(Clone)]
struct ResearchCrew {
    topic: String,
}

#[crew_base]
impl ResearchCrew {
    #[agent]
    fn researcher(&self) -> Agent {
        Agent { role: "Researcher".into() }
    }

    #[task]
    fn research(&self) -> Task {
        Task { description: format!("Research {}", self.topic), name: None }
    }

    #[task]
    fn report(&self) -> Task {
        Task { description: format!("Report on {}", self.topic), name: Some("final report".into()) }
    }

    /// A documented hook method stays an ordinary method.
    #[on(PRE_TOOL_CALL, tools = ["Web Search"], agents = ["Researcher"], order = 2)]
    fn validate_query(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        if ctx.tool_input.contains_key("query") {
            Ok(())
        } else {
            Err(HookAborted::new(format!("no query about {}", self.topic), "validate_query"))
        }
    }

    #[before_tool_call(fail_closed)]
    fn legacy_gate(&self, _ctx: &ToolCallHookContext) -> Option<bool> {
        None
    }

    #[after_tool_call]
    fn tag(&self, ctx: &ToolCallHookContext) -> Option<String> {
        ctx.tool_result.as_ref().map(|result| format!("{result} [{}]", self.topic))
    }

    #[on(hooks_core::InterceptionPoint::POST_TOOL_CALL, order = -1)]
    fn audit(&self, _ctx: &mut ToolCallHookContext) -> Result<Option<String>, HookAborted> {
        Ok(None)
    }

    /// Builds the crew: attributes for callers stay on the method callers
    /// see, body lints stay with the body.
    #[crew]
    #[must_use]
    #[allow(clippy::needless_return)]
    pub fn crew(&self) -> Crew {
        if self.topic.is_empty() {
            // An early return still gets the hooks attached.
            return Crew { agents: Vec::new(), tasks: Vec::new(), hooks: HookRegistry::new() };
        }
        Crew { agents: self.agents(), tasks: self.tasks(), hooks: HookRegistry::new() }
    }

    fn helper(&self) -> usize {
        self.topic.len()
    }
}

#[derive(Clone)]
struct Rooted;

#[crew_base(crate = ::hooks_core)]
impl Rooted {
    #[on(PRE_TOOL_CALL)]
    fn noop(&self, _ctx: &mut ToolCallHookContext) {}

    #[after_tool_call(crate = ::hooks_core, tools = ["read_file"])]
    fn own_root(&self, _ctx: &ToolCallHookContext) {}

    // A crew type the caller cannot name.
    #[crew]
    fn crew(&self) -> impl CrewScope {
        Crew { agents: Vec::new(), tasks: Vec::new(), hooks: HookRegistry::new() }
    }
}

#[derive(Clone)]
struct Fallible {
    fail: bool,
}

fn build(fail: bool) -> Result<Crew, String> {
    if fail {
        return Err("no agents".to_owned());
    }
    Ok(Crew { agents: Vec::new(), tasks: Vec::new(), hooks: HookRegistry::new() })
}

#[crew_base]
impl Fallible {
    #[on(PRE_TOOL_CALL)]
    fn noop(&self, _ctx: &mut ToolCallHookContext) {}

    // The crew may come out of a builder that can fail.
    #[crew]
    fn crew(&self) -> Result<Crew, String> {
        let crew = build(self.fail)?;
        Ok(crew)
    }
}

fn main() {
    let base = ResearchCrew { topic: "rust".into() };
    assert_eq!(base.helper(), 4);
    assert_eq!(base.agents().len(), 1);
    let crew = base.crew();
    assert_eq!(crew.agents[0].role, "Researcher");
    let descriptions: Vec<&str> = crew.tasks.iter().map(|t| t.description.as_str()).collect();
    assert_eq!(descriptions, ["Research rust", "Report on rust"]);
    // `tasks()` names a task after its method unless it has a name.
    let names: Vec<Option<&str>> = crew.tasks.iter().map(|t| t.name.as_deref()).collect();
    assert_eq!(names, [Some("research"), Some("final report")]);

    let pre: Vec<String> = crew.hooks.get_hooks(PRE_TOOL_CALL).into_iter().map(|h| h.name).collect();
    assert_eq!(pre, ["ResearchCrew::legacy_gate", "ResearchCrew::validate_query"]);
    let post: Vec<String> = crew.hooks.get_hooks(POST_TOOL_CALL).into_iter().map(|h| h.name).collect();
    assert_eq!(post, ["ResearchCrew::audit", "ResearchCrew::tag"]);
    let validate = &crew.hooks.get_hooks(PRE_TOOL_CALL)[1];
    assert_eq!(validate.tools, ["web_search"]);
    assert_eq!(validate.agents, ["Researcher"]);
    assert_eq!(validate.origin, HookOrigin::Crew { crew: "ResearchCrew".into() });

    let mut ctx = ToolCallHookContext::new("read_file", Default::default());
    let report = crew
        .hooks
        .run_tool_call(&mut ctx, |_| ToolOutput::text("contents"))
        .expect("no abort");
    assert_eq!(report.observation, "contents [rust]");

    let empty = ResearchCrew { topic: String::new() }.crew();
    assert_eq!(empty.hooks.get_hooks(PRE_TOOL_CALL).len(), 2);

    let built = Fallible { fail: false }.crew().expect("built");
    assert_eq!(built.hooks.get_hooks(PRE_TOOL_CALL).len(), 1);
    assert_eq!(Fallible { fail: true }.crew().err().as_deref(), Some("no agents"));

    let rooted = Rooted.crew();
    assert_eq!(rooted.crew_hooks().get_hooks(PRE_TOOL_CALL).len(), 1);
    assert_eq!(rooted.crew_hooks().get_hooks(POST_TOOL_CALL)[0].tools, ["read_file"]);
}
