//! Policies as data: rules in [Cedar] that decide every tool call of a
//! crew, checked against its tools like code, swapped live without a
//! restart, runnable in shadow mode.
//!
//! A [`Policies`] value holds a policy set. Given to a crew
//! ([`CrewBuilder::policies`](crate::CrewBuilder::policies)) it becomes one
//! of the crew's `PRE_TOOL_CALL` hooks, named `policies`, in the order it
//! was given among the crew's hooks: it runs, blocks and shows in
//! [`Crew::explain`](crate::Crew::explain) like any other hook. The engine
//! runs in process; a call costs no network hop.
//!
//! # What policies see
//!
//! | Cedar | what it is |
//! |---|---|
//! | principal `Agent::"<role>"` | the agent making the call; attributes `crew` (the crew's name) and `user` (who the kickoff runs for, when [`Crew::for_user`](crate::Crew::for_user) names someone; test it with `has`) |
//! | action `Action::"<tool>"` | the call of that tool (its normalized name) |
//! | resource `Tool::"<tool>"` | the tool; attributes `server` (the MCP server's name, or `"local"`) and `capabilities` (a set of `"read_only"`, `"destructive"`, `"idempotent"`, `"open_world"`; a tool that declares nothing counts as destructive, and an MCP server's tool as open-world too: a local tool is closed-world unless it declares `open_world(true)`) |
//! | `context.args` | the call's arguments, typed by the tool's JSON schema: integer → `Long`, string → `String`, boolean → `Bool`, array → `Set`, object → record; an argument the schema does not require is optional (test it with `has`); JSON numbers, unions and references are not visible (a policy that reads one is refused at load with the reason: "`amount` is a JSON number, which policies cannot read: use an integer type"), yet a call must still give them when they are required; a tool with a free-form schema has an empty `args` |
//! | `context.call_id`, `context.task`, `context.iteration` | the call's id, the task's name, the agent's model turn in that task (from 1) |
//!
//! # Decisions
//!
//! A `forbid` wins over any `permit`; with no permit that applies the call
//! is denied (default deny; [`Policies::default_allow`] opts out). A permit
//! annotated `@ask("why")` lets the call through only once a person
//! approves it through the crew's human-input source; an approval that
//! cannot be had blocks (fail closed). A denied call is blocked like any
//! hook's block: the model reads `Tool execution blocked by hook. Tool:
//! <name>`, the `POST_TOOL_CALL` hooks run, and the block's source is
//! `policy:<id>` (the `@id` annotation, else the engine's `policy0`,
//! `policy1`, … by position) with the policy's `@reason` as its reason.
//! A call whose arguments do not fit its tool's schema (a required
//! argument missing, whatever its type, a JSON number included; a wrong
//! type), and a call a policy fails to evaluate (an overflow, say), are
//! denied.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::policy::Policies;
//! use crew_runtime::prelude::*;
//! use serde_json::json;
//!
//! let refund = Tool::dynamic(
//!     "refund",
//!     "Refunds an order",
//!     json!({
//!         "type": "object",
//!         "properties": { "order": { "type": "string" }, "amount": { "type": "integer" } },
//!         "required": ["order", "amount"],
//!     }),
//!     |_| Ok::<_, String>(json!("refunded")),
//! );
//! let policies = Policies::from_text(r#"
//!     @id("support-refunds")
//!     permit(principal == Agent::"Support", action == Action::"refund", resource);
//!
//!     @id("refund-limit")
//!     @reason("refunds above 400 need a manager")
//!     forbid(principal, action == Action::"refund", resource)
//!     when { context.args.amount > 400 };
//! "#)?;
//! let model = Arc::new(
//!     ScriptedLlm::new()
//!         .call("refund", json!({ "order": "A-1", "amount": 900 }))
//!         .answer("done"),
//! );
//! let support = Agent::builder("Support").tool(refund).llm(model.clone()).build();
//! let crew = Crew::builder()
//!     .agent(support.clone())
//!     .task(Task::builder("Refund order A-1").agent(&support).build())
//!     .global_registry(Arc::new(HookRegistry::new()))
//!     .policies(policies)
//!     .build()?;
//! crew.kickoff_blocking(())?;
//! // The model was told the call was blocked.
//! let observations = model.requests()[1].observations().join("\n");
//! assert!(observations.contains("Tool execution blocked by hook. Tool: refund"), "{observations}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [Cedar]: https://www.cedarpolicy.com

mod check;
mod crew;
#[cfg_attr(not(feature = "_store"), allow(dead_code))]
pub(crate) mod edit;
mod engine;
mod events;
mod parse;
mod schema;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use arc_swap::ArcSwap;
use hooks_core::{Event, HookAborted, HookRegistry, ToolCallHookContext};

use crate::guards::ApprovalGate;
use crate::registry::SharedRegistry;
use crate::tool::Tool;

use engine::{Call, Compiled, Verdict};
pub use events::{PolicyDecidedEvent, PolicySetRejectedEvent};
use parse::Parsed;
pub use parse::{MAX_POLICY_BYTES, MAX_POLICY_NESTING, MAX_POLICY_OPERATORS};
use schema::ToolShape;

pub(crate) use crew::at_build;

/// The name of the hook a policy set runs as.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::policy::{POLICY_HOOK_NAME, Policies};
/// use crew_runtime::prelude::*;
///
/// let registry = Arc::new(HookRegistry::new());
/// Policies::from_text("permit(principal, action, resource);")?.register_on(registry.clone())?;
/// assert_eq!(registry.get_hooks(PRE_TOOL_CALL)[0].name, POLICY_HOOK_NAME);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const POLICY_HOOK_NAME: &str = "policies";

/// A policy set: Cedar policies that decide a crew's tool calls.
///
/// Cloning gives another handle on the same set: a reload through any
/// handle reaches every crew the set is attached to.
///
/// ```
/// use crew_runtime::policy::Policies;
///
/// let policies = Policies::from_text(r#"permit(principal, action, resource);"#)?;
/// assert_eq!(policies.len(), 1);
/// assert!(Policies::from_text("").is_err(), "a set with no policies is refused");
/// # Ok::<(), crew_runtime::policy::PolicyError>(())
/// ```
#[derive(Clone)]
pub struct Policies {
    shared: Arc<Shared>,
}

struct Shared {
    /// The running set, what a crew built later checks and compiles.
    parsed: Mutex<Arc<Parsed>>,
    /// Where the running set came from: `text`, or a file's path.
    origin: Mutex<String>,
    shadow: AtomicBool,
    default_allow: AtomicBool,
    offer_all_tools: AtomicBool,
    attachments: Mutex<Vec<Weak<Attachment>>>,
}

impl Policies {
    /// Reads a policy set from Cedar text.
    ///
    /// Fails on text that does not parse (with the line and column),
    /// on a set with no policies (it would deny, or allow, everything),
    /// on two policies with one `@id`, on `@ask` on a `forbid`, and on
    /// text beyond the limits the engine can read without risk
    /// ([`MAX_POLICY_BYTES`], [`MAX_POLICY_NESTING`],
    /// [`MAX_POLICY_OPERATORS`]). The tools and arguments the policies
    /// name are checked when the set is given to a crew.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let error = Policies::from_text("permit(principal, action, resource) when { 1 + };")
    ///     .expect_err("does not parse");
    /// assert!(error.to_string().starts_with("line 1, column 48: unexpected token"), "{error}");
    /// ```
    pub fn from_text(text: &str) -> Result<Policies, PolicyError> {
        let parsed = parse::parse(text)?;
        Ok(Policies::new(parsed, "text".to_owned()))
    }

    /// Reads a policy set from a file (see [`from_text`](Self::from_text)).
    /// A file that cannot be read or is not UTF-8 is an error naming it.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let error = Policies::from_file("/no/such/policies.cedar").expect_err("no file");
    /// assert!(error.to_string().contains("/no/such/policies.cedar"));
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Policies, PolicyError> {
        let path = path.as_ref();
        let text = read_file(path)?;
        let parsed = parse::parse(&text)?;
        Ok(Policies::new(parsed, path.display().to_string()))
    }

    fn new(parsed: Parsed, origin: String) -> Policies {
        Policies {
            shared: Arc::new(Shared {
                parsed: Mutex::new(Arc::new(parsed)),
                origin: Mutex::new(origin),
                shadow: AtomicBool::new(false),
                default_allow: AtomicBool::new(false),
                offer_all_tools: AtomicBool::new(false),
                attachments: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Shadow mode: every decision is computed and reported (a
    /// [`PolicyDecidedEvent`] with `would_deny` or `would_ask`, and a
    /// `tracing` event), and nothing is blocked or asked. Run a new set
    /// against real traffic before enforcing it.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_text("forbid(principal, action, resource);")?.shadow();
    /// assert!(policies.is_shadow());
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn shadow(self) -> Policies {
        self.set_shadow(true);
        self
    }

    /// Switches shadow mode on or off, live, for every crew the set is
    /// attached to (the next call sees it).
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_text("forbid(principal, action, resource);")?.shadow();
    /// policies.set_shadow(false); // enforce from now on
    /// assert!(!policies.is_shadow());
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn set_shadow(&self, shadow: bool) {
        self.shared.shadow.store(shadow, Ordering::Release);
    }

    /// Whether the set runs in shadow mode.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// assert!(!Policies::from_text("permit(principal, action, resource);")?.is_shadow());
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn is_shadow(&self) -> bool {
        self.shared.shadow.load(Ordering::Acquire)
    }

    /// Allows a call no policy decides (only a `forbid` denies), instead
    /// of the default deny.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_text(r#"forbid(principal, action, resource) when { resource.capabilities.contains("destructive") };"#)?
    ///     .default_allow();
    /// assert!(policies.allows_by_default());
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn default_allow(self) -> Policies {
        self.shared.default_allow.store(true, Ordering::Release);
        self
    }

    /// Offers every tool to the models, also those no policy could ever
    /// permit. By default, an enforcing set with default deny leaves such
    /// a tool out of what an agent's model is offered, so that the model
    /// spends no turn on it (a call it makes anyway is still decided, and
    /// blocked, by the policies).
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_text("permit(principal, action, resource);")?.offer_all_tools();
    /// # let _ = policies;
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn offer_all_tools(self) -> Policies {
        self.shared.offer_all_tools.store(true, Ordering::Release);
        self
    }

    /// Whether a call no policy decides is allowed.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// assert!(!Policies::from_text("permit(principal, action, resource);")?.allows_by_default());
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn allows_by_default(&self) -> bool {
        self.shared.default_allow.load(Ordering::Acquire)
    }

    /// How many policies the running set has.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_text("permit(principal, action, resource);\nforbid(principal, action, resource);")?;
    /// assert_eq!(policies.len(), 2);
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.current().policies.len()
    }

    /// Always `false`: a set with no policies is refused.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// assert!(!Policies::from_text("permit(principal, action, resource);")?.is_empty());
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.current().policies.is_empty()
    }

    /// The ids of the running set's policies, in text order.
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_text("@id(\"open\")\npermit(principal, action, resource);\nforbid(principal, action, resource);")?;
    /// assert_eq!(policies.ids(), ["open", "policy1"]);
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn ids(&self) -> Vec<String> {
        self.current()
            .policies
            .iter()
            .map(|p| p.id.clone())
            .collect()
    }

    fn current(&self) -> Arc<Parsed> {
        Arc::clone(
            &self
                .shared
                .parsed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Replaces the set with the policies of `text`, atomically, in every
    /// crew it is attached to: each call is decided by the old set or by
    /// the new one, never by part of each. The new text is parsed and
    /// checked against every such crew's tools first; if that fails the
    /// running set stays, the error is returned and reported (a
    /// [`PolicySetRejectedEvent`], a `tracing` warning, and standard error
    /// when no listener hears it).
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_text("permit(principal, action, resource);")?;
    /// policies.reload_text("forbid(principal, action, resource);")?;
    /// assert!(policies.reload_text("permit(").is_err());
    /// assert_eq!(policies.len(), 1, "the running set stays");
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn reload_text(&self, text: &str) -> Result<(), PolicyError> {
        self.reload(parse::parse(text), "text".to_owned(), &|| {})
    }

    /// [`reload_text`](Self::reload_text) that calls `mid_swap` once the
    /// new set is checked and compiled, with the reload's lock held, just
    /// before the swap: for tests that calls go on meanwhile.
    #[doc(hidden)]
    pub fn reload_text_pausing(&self, text: &str, mid_swap: &dyn Fn()) -> Result<(), PolicyError> {
        self.reload(parse::parse(text), "text".to_owned(), mid_swap)
    }

    /// Replaces the set with the policies of a file (see
    /// [`reload_text`](Self::reload_text)).
    ///
    /// ```
    /// use crew_runtime::policy::Policies;
    ///
    /// let dir = std::env::temp_dir().join(format!("policies-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let file = dir.join("policies.cedar");
    /// std::fs::write(&file, "permit(principal, action, resource);")?;
    /// let policies = Policies::from_file(&file)?;
    /// std::fs::write(&file, "@id(\"closed\") forbid(principal, action, resource);")?;
    /// policies.reload_file(&file)?;
    /// assert_eq!(policies.ids(), ["closed"]);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reload_file(&self, path: impl AsRef<Path>) -> Result<(), PolicyError> {
        let path = path.as_ref();
        let parsed = read_file(path).and_then(|text| parse::parse(&text));
        self.reload(parsed, path.display().to_string(), &|| {})
    }

    fn reload(
        &self,
        parsed: Result<Parsed, PolicyError>,
        origin: String,
        mid_swap: &dyn Fn(),
    ) -> Result<(), PolicyError> {
        let attachments: Vec<Arc<Attachment>> = {
            let mut attachments = self
                .shared
                .attachments
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            attachments.retain(|attachment| attachment.strong_count() > 0);
            attachments.iter().filter_map(Weak::upgrade).collect()
        };
        let compiled = parsed.and_then(|parsed| {
            let parsed = Arc::new(parsed);
            // Crews with the same tools share one check and compilation.
            let mut by_tools: Vec<(&BTreeMap<String, ToolShape>, bool, Arc<Compiled>)> = Vec::new();
            let mut compiled = Vec::with_capacity(attachments.len());
            for attachment in &attachments {
                let known = by_tools
                    .iter()
                    .find(|(tools, global, _)| {
                        **tools == attachment.tools && *global == attachment.global
                    })
                    .map(|(_, _, compiled)| Arc::clone(compiled));
                let done = match known {
                    Some(done) => done,
                    None => {
                        let done = Arc::new(attachment.compile(&parsed)?);
                        by_tools.push((&attachment.tools, attachment.global, Arc::clone(&done)));
                        done
                    }
                };
                compiled.push(done);
            }
            Ok((parsed, compiled))
        });
        let (parsed, compiled) = match compiled {
            Ok(done) => done,
            Err(error) => {
                report_rejected(&attachments, &origin, &error);
                return Err(error);
            }
        };
        // Every crew's new set is ready: swap them in.
        let mut running = self
            .shared
            .parsed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        mid_swap();
        for (attachment, compiled) in attachments.iter().zip(compiled) {
            attachment.compiled.store(compiled);
            attachment.generation.fetch_add(1, Ordering::AcqRel);
        }
        *running = parsed;
        *self
            .shared
            .origin
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = origin;
        Ok(())
    }

    /// Reloads the set from `path` whenever that file changes (written in
    /// place, or replaced as editors and deployment tools do), for as long
    /// as the returned watcher lives. Each reload is
    /// [`reload_file`](Self::reload_file): a file that fails to read,
    /// parse or check is refused whole and reported (a
    /// [`PolicySetRejectedEvent`], a `tracing` warning, standard error when
    /// nobody listens), and the running set stays until a good one comes.
    /// The file is not read now: load it first, with
    /// [`from_file`](Self::from_file).
    ///
    /// ```no_run
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_file("policies.cedar")?;
    /// let _watching = policies.watch("policies.cedar")?;
    /// // Give `policies` to crews; edits of the file reach them live.
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn watch(&self, path: impl AsRef<Path>) -> Result<PolicyWatcher, PolicyError> {
        use notify::Watcher as _;

        let path = path.as_ref().to_owned();
        let failed = |reason: String| PolicyError::Read {
            path: path.clone(),
            reason,
        };
        let file_name = path
            .file_name()
            .ok_or_else(|| failed("it names no file".to_owned()))?
            .to_owned();
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        };
        let policies = self.clone();
        let watched = path.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else {
                    return;
                };
                let changed = matches!(
                    event.kind,
                    notify::EventKind::Create(_) | notify::EventKind::Modify(_)
                ) && event
                    .paths
                    .iter()
                    .any(|changed| changed.file_name() == Some(file_name.as_os_str()));
                if changed {
                    // Refusals are reported by the reload itself.
                    let _ = policies.reload_file(&watched);
                }
            })
            .map_err(|error| failed(format!("it cannot be watched: {error}")))?;
        // The directory, not the file: a file replaced by a rename is a new
        // file, which a watch on the old one would miss.
        watcher
            .watch(&directory, notify::RecursiveMode::NonRecursive)
            .map_err(|error| failed(format!("it cannot be watched: {error}")))?;
        Ok(PolicyWatcher {
            _watcher: watcher,
            path,
        })
    }

    /// Registers the set for every crew built on `registry` from now on:
    /// a `PRE_TOOL_CALL` hook named `policies` there, in registration
    /// order among that registry's hooks. Each crew's build checks the
    /// set against that crew's tools, leaving out for it the policies on
    /// tools it lacks (an unknown argument or a wrong type on a tool it
    /// has fails the build). A call the runtime did not make (dispatched
    /// by hand, outside any crew) is denied: the policies cannot know its
    /// crew's tools.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::policy::Policies;
    /// use crew_runtime::prelude::*;
    ///
    /// let registry = Arc::new(HookRegistry::new());
    /// Policies::from_text(r#"forbid(principal, action == Action::"delete_file", resource);
    ///                        permit(principal, action, resource);"#)?
    ///     .register_on(registry.clone())?;
    /// let delete = Tool::dynamic("delete_file", "Deletes", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("deleted"))
    /// });
    /// let model = Arc::new(ScriptedLlm::new().call("delete_file", json!({})).answer("done"));
    /// let janitor = Agent::builder("Janitor").tool(delete).llm(model.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(janitor.clone())
    ///     .task(Task::builder("Tidy").agent(&janitor).build())
    ///     .global_registry(registry)
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// assert!(model.requests()[1].observations()[0].contains("Tool execution blocked by hook"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_on(
        &self,
        registry: impl Into<SharedRegistry>,
    ) -> Result<hooks_core::HookId, hooks_core::RegisterError> {
        let registry = registry.into();
        let shared = Arc::clone(&self.shared);
        let hook = hooks_core::async_hook::<ToolCallHookContext, _, _>(move |ctx| {
            let shared = Arc::clone(&shared);
            Box::pin(async move {
                let attachment = ctx
                    .extensions
                    .get::<CrewPolicies>()
                    .and_then(|crew| crew.of_set(&shared))
                    .cloned();
                match attachment {
                    Some(attachment) => attachment.check(ctx).await,
                    None => Err(HookAborted::new(
                        "the call was not made by a crew, so its tools are unknown to the \
                         policies: denied",
                        format!("policy:{}", engine::DEFAULT_DENY_SOURCE),
                    )),
                }
            })
        });
        let id = registry.register_async_hook_with(
            hooks_core::PRE_TOOL_CALL,
            hooks_core::HookOptions::new().name(POLICY_HOOK_NAME),
            hook,
        )?;
        registered(&registry)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sets
            .push(Arc::downgrade(&self.shared));
        Ok(id)
    }

    /// [`register_on`](Self::register_on) the process-wide registry.
    ///
    /// ```no_run
    /// use crew_runtime::policy::Policies;
    ///
    /// Policies::from_file("policies.cedar")?.register_global()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_global(&self) -> Result<hooks_core::HookId, hooks_core::RegisterError> {
        self.register_on(hooks_core::global_registry())
    }

    /// Attaches a set registered on a crew's global registry: like
    /// [`attach`](Self::attach), its policies on tools the crew lacks left
    /// out for that crew.
    pub(crate) fn attach_global(
        &self,
        crew: &str,
        tools: &[&Tool],
    ) -> Result<Arc<Attachment>, PolicyError> {
        self.attach_as(crew, tools, true)
    }

    /// Checks the running set against a crew's tools and compiles it for
    /// them: what a crew's build does with the set it is given.
    pub(crate) fn attach(
        &self,
        crew: &str,
        tools: &[&Tool],
    ) -> Result<Arc<Attachment>, PolicyError> {
        self.attach_as(crew, tools, false)
    }

    fn attach_as(
        &self,
        crew: &str,
        tools: &[&Tool],
        global: bool,
    ) -> Result<Arc<Attachment>, PolicyError> {
        let shapes: BTreeMap<String, ToolShape> = tools
            .iter()
            .map(|tool| (tool.name().to_owned(), ToolShape::of(tool)))
            .collect();
        let schema = schema::cedar_schema(&shapes).map_err(|reason| PolicyError::Invalid {
            problems: vec![PolicyProblem::general(format!(
                "the crew's tools give no policy schema: {reason}"
            ))],
        })?;
        let compiled = compile(&self.current(), &shapes, &schema, global)?;
        let attachment = Arc::new(Attachment {
            global,
            shared: Arc::clone(&self.shared),
            crew: crew.to_owned(),
            tools: shapes,
            schema,
            compiled: ArcSwap::from_pointee(compiled),
            generation: std::sync::atomic::AtomicU64::new(0),
            buses: std::sync::OnceLock::new(),
        });
        self.shared
            .attachments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&attachment));
        Ok(attachment)
    }
}

impl fmt::Debug for Policies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policies")
            .field("ids", &self.ids())
            .field("shadow", &self.is_shadow())
            .field("default_allow", &self.allows_by_default())
            .finish_non_exhaustive()
    }
}

/// Keeps a policy file watched ([`Policies::watch`]); dropping it stops
/// the watch.
pub struct PolicyWatcher {
    _watcher: notify::RecommendedWatcher,
    path: PathBuf,
}

impl PolicyWatcher {
    /// The file watched.
    ///
    /// ```no_run
    /// use crew_runtime::policy::Policies;
    ///
    /// let policies = Policies::from_file("policies.cedar")?;
    /// let watching = policies.watch("policies.cedar")?;
    /// assert!(watching.path().ends_with("policies.cedar"));
    /// # Ok::<(), crew_runtime::policy::PolicyError>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Debug for PolicyWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyWatcher")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// What a registry holds of policies: the sets registered on it
/// ([`Policies::register_on`]) and the problems already reported for it.
/// Kept on the registry itself (its extensions), so it goes with it.
#[derive(Default)]
struct Registered {
    sets: Vec<Weak<Shared>>,
    reported: std::collections::HashSet<String>,
}

/// The policy record of `registry`, created if needed.
fn registered(registry: &HookRegistry) -> Arc<Mutex<Registered>> {
    registry
        .extensions()
        .get_or_insert_with(Mutex::<Registered>::default)
}

/// Reports each problem not reported before for `registry`: a `tracing`
/// warning and a line on standard error.
pub(crate) fn report_once(registry: &HookRegistry, problems: &[PolicyProblem]) {
    let record = registered(registry);
    let mut record = record.lock().unwrap_or_else(PoisonError::into_inner);
    for problem in problems {
        let line = problem.to_string();
        if record.reported.contains(&line) {
            continue;
        }
        tracing::warn!(problem = %line, "a registered policy names a tool no crew has");
        eprintln!("warning: registered policies: {line}");
        record.reported.insert(line);
    }
}

/// The sets registered on `registry`, in registration order.
pub(crate) fn registered_on(registry: &HookRegistry) -> Vec<Policies> {
    let record = registered(registry);
    let mut record = record.lock().unwrap_or_else(PoisonError::into_inner);
    record.sets.retain(|set| set.strong_count() > 0);
    record
        .sets
        .iter()
        .filter_map(Weak::upgrade)
        .map(|shared| Policies { shared })
        .collect()
}

/// What a crew's tool calls carry for the global `policies` hooks: the
/// crew's attachments of the sets registered on its registry. Private:
/// no hook can forge or remove it.
#[derive(Clone)]
pub(crate) struct CrewPolicies(Arc<[Arc<Attachment>]>);

impl CrewPolicies {
    /// The global attachments among `attachments`, if any.
    pub(crate) fn of(attachments: &[Arc<Attachment>]) -> Option<CrewPolicies> {
        let global: Vec<Arc<Attachment>> = attachments
            .iter()
            .filter(|attachment| attachment.global)
            .cloned()
            .collect();
        (!global.is_empty()).then(|| CrewPolicies(global.into()))
    }

    fn of_set(&self, shared: &Arc<Shared>) -> Option<&Arc<Attachment>> {
        self.0
            .iter()
            .find(|attachment| Arc::ptr_eq(&attachment.shared, shared))
    }
}

fn read_file(path: &Path) -> Result<String, PolicyError> {
    let read = |reason: String| PolicyError::Read {
        path: path.to_owned(),
        reason,
    };
    let metadata = std::fs::metadata(path).map_err(|error| read(error.to_string()))?;
    if metadata.len() > MAX_POLICY_BYTES as u64 {
        return Err(PolicyError::TooLarge {
            bytes: usize::try_from(metadata.len()).unwrap_or(usize::MAX),
            limit: MAX_POLICY_BYTES,
        });
    }
    let bytes = std::fs::read(path).map_err(|error| read(error.to_string()))?;
    String::from_utf8(bytes).map_err(|error| {
        read(format!(
            "it is not UTF-8 text (invalid byte at offset {})",
            error.utf8_error().valid_up_to()
        ))
    })
}

fn report_rejected(attachments: &[Arc<Attachment>], origin: &str, error: &PolicyError) {
    tracing::warn!(origin, %error, "policy set refused; the running set stays");
    let event = Event::from(PolicySetRejectedEvent {
        origin: origin.to_owned(),
        error: error.to_string(),
    });
    let mut heard = false;
    for attachment in attachments {
        heard |= attachment.emit(&event);
    }
    if !heard {
        eprintln!("policy set from {origin} refused; the running set stays:\n{error}");
    }
}

/// A policy set checked against one crew's tools, as that crew's hook
/// holds it.
pub(crate) struct Attachment {
    /// Attached through a registry, for every crew built on it: policies
    /// on tools the crew lacks are left out rather than refused.
    global: bool,
    shared: Arc<Shared>,
    crew: String,
    tools: BTreeMap<String, ToolShape>,
    schema: cedar_policy::Schema,
    /// One snapshot per call; a reload swaps it whole.
    compiled: ArcSwap<Compiled>,
    /// Counts the swaps: what was derived from a snapshot is kept with
    /// the generation it was derived from.
    generation: std::sync::atomic::AtomicU64,
    /// The event buses of the crew: its own registry's, the global one's.
    buses: std::sync::OnceLock<(Weak<HookRegistry>, SharedRegistry)>,
}

/// Checks `parsed` against a crew's tools and compiles it for them. The
/// engine's validator recurses: it runs on a thread with a large stack.
fn compile(
    parsed: &Arc<Parsed>,
    tools: &BTreeMap<String, ToolShape>,
    schema: &cedar_policy::Schema,
    global: bool,
) -> Result<Compiled, PolicyError> {
    let (parsed, tools, schema) = (Arc::clone(parsed), tools.clone(), schema.clone());
    parse::on_large_stack(move || {
        let parsed = if global {
            Arc::new(check::without_policies_on_unknown_tools(&parsed, &tools))
        } else {
            parsed
        };
        let problems = check::check(&parsed, &tools, &schema);
        if !problems.is_empty() {
            return Err(PolicyError::Invalid { problems });
        }
        Compiled::new(&parsed, &tools).map_err(|reason| PolicyError::Invalid {
            problems: vec![PolicyProblem::general(reason)],
        })
    })?
}

impl Attachment {
    fn compile(&self, parsed: &Arc<Parsed>) -> Result<Compiled, PolicyError> {
        compile(parsed, &self.tools, &self.schema, self.global)
    }

    /// Where the crew's events go.
    pub(crate) fn set_buses(&self, scoped: &Arc<HookRegistry>, global: &SharedRegistry) {
        let _ = self.buses.set((Arc::downgrade(scoped), global.clone()));
    }

    /// Emits `event` on the crew's buses; whether anyone listens.
    fn emit(&self, event: &Event) -> bool {
        let Some((scoped, global)) = self.buses.get() else {
            return false;
        };
        let mut heard = false;
        if global.events().has_listeners() {
            global.events().emit(event);
            heard = true;
        }
        if let Some(scoped) = scoped.upgrade()
            && scoped.events().has_listeners()
        {
            scoped.events().emit(event);
            heard = true;
        }
        heard
    }

    fn listened(&self) -> bool {
        self.buses.get().is_some_and(|(scoped, global)| {
            global.events().has_listeners()
                || scoped
                    .upgrade()
                    .is_some_and(|scoped| scoped.events().has_listeners())
        })
    }

    /// What [`Crew::explain`](crate::Crew::explain) says of the set for
    /// a call of `tool` by `role`: the policies that could decide it, in
    /// text order.
    pub(crate) fn explain(&self, tool: &str, role: Option<&str>) -> String {
        let compiled = self.compiled.load();
        let tool = hooks_core::normalize_tool_name(tool);
        let mode = if self.shared.shadow.load(Ordering::Acquire) {
            ", shadow mode"
        } else {
            ""
        };
        let deciding = compiled.deciding(&tool, role);
        if deciding.is_empty() {
            let otherwise = if self.shared.default_allow.load(Ordering::Acquire) {
                "allowed by default"
            } else {
                "denied by default"
            };
            format!("policies{mode}: none decides `{tool}`: {otherwise}")
        } else {
            format!("policies{mode}: {} decide `{tool}`", deciding.join(", "))
        }
    }

    /// What the set decides for one concrete call (see
    /// [`Crew::explain_call`](crate::Crew::explain_call)).
    pub(crate) fn explain_call(
        &self,
        tool: &str,
        role: &str,
        user: Option<&str>,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> String {
        let tool = hooks_core::normalize_tool_name(tool);
        let call = Call {
            tool: &tool,
            role,
            crew: &self.crew,
            user,
            args,
            call_id: "",
            task: "",
            iteration: 1,
        };
        let default_allow = self.shared.default_allow.load(Ordering::Acquire);
        let mode = if self.shared.shadow.load(Ordering::Acquire) {
            " (shadow mode: reported only)"
        } else {
            ""
        };
        match self.compiled.load().decide(&call, default_allow) {
            None => format!("policies: `{tool}` is no tool of this crew"),
            Some(Verdict::Allow {
                policies,
                ask: None,
            }) if policies.is_empty() => {
                format!("policies: allowed by default{mode}")
            }
            Some(Verdict::Allow {
                policies,
                ask: None,
            }) => {
                format!("policies: allowed by {}{mode}", policies.join(", "))
            }
            Some(Verdict::Allow {
                ask: Some((why, id)),
                ..
            }) => format!("policies: asked by {id} ({why}){mode}"),
            Some(Verdict::Deny { source, reason, .. }) => {
                format!("policies: denied by {source} ({reason}){mode}")
            }
        }
    }

    /// Whether the set leaves out of what models are offered the tools it
    /// could never permit: an enforcing set, with default deny, that does
    /// not offer all tools.
    pub(crate) fn hides_tools(&self) -> bool {
        !self.shared.shadow.load(Ordering::Acquire)
            && !self.shared.default_allow.load(Ordering::Acquire)
            && !self.shared.offer_all_tools.load(Ordering::Acquire)
    }

    /// For a set registered for every crew: the tools it names that no
    /// crew built on the registry has (`known`: their tools), each as a
    /// problem of the running set, reported once per registry; empty for
    /// a crew's own set.
    pub(crate) fn tools_no_crew_has(
        &self,
        known: &std::collections::BTreeSet<String>,
    ) -> Vec<PolicyProblem> {
        if !self.global {
            return Vec::new();
        }
        let parsed = Policies {
            shared: Arc::clone(&self.shared),
        }
        .current();
        check::tools_no_crew_has(&parsed, known)
    }

    /// The running snapshot's generation (see [`Attachment::offers`]).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether `role`'s model is offered `tool`.
    pub(crate) fn offers(&self, tool: &str, role: &str) -> bool {
        !self.hides_tools() || self.compiled.load().could_permit(tool, role)
    }

    /// Decides one call, asks a person where a permit says `@ask`, and
    /// blocks what is denied (in shadow mode, only reports).
    pub(crate) async fn check(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        let compiled = self.compiled.load_full();
        let shadow = self.shared.shadow.load(Ordering::Acquire);
        let default_allow = self.shared.default_allow.load(Ordering::Acquire);
        let Some(verdict) = self.verdict(&compiled, ctx, default_allow) else {
            return Ok(());
        };
        self.report(ctx, &verdict, shadow);
        if shadow {
            return Ok(());
        }
        // A question asked about this call from here on (here, or by a
        // later gate) keeps the set, for the inbox to check an edit by.
        if let Some(asked_under) = compiled.asked_under(ctx.tool_name(), default_allow) {
            ctx.extensions.insert(Arc::clone(asked_under));
        }
        match verdict {
            Verdict::Allow { ask: None, .. } => Ok(()),
            Verdict::Deny { source, reason, .. } => {
                Err(HookAborted::new(reason, format!("policy:{source}")))
            }
            Verdict::Allow {
                ask: Some((why, id)),
                ..
            } => {
                let source = format!("policy:{id}");
                let question = format!(
                    "{why}\nAllow `{}` for {}? (yes/no)",
                    ctx.tool_name(),
                    ctx.agent_role().unwrap_or("the agent")
                );
                let answer = ctx
                    .request_approval_with_reason(&question, "yes/no", &why)
                    .await
                    .map_err(|error| {
                        HookAborted::new(format!("{why}: no approval ({error})"), source.clone())
                    })?;
                if !ApprovalGate::is_yes(&answer.text) {
                    return Err(HookAborted::new(format!("{why}: not approved"), source));
                }
                if let Some(edit) = answer.edited_input {
                    // The tool receives what the approver approved, and the
                    // policies decide the edit as well: a person cannot
                    // approve what a `forbid` refuses.
                    ctx.tool_input = edit;
                    if let Some(Verdict::Deny { source, reason, .. }) =
                        self.verdict(&compiled, ctx, default_allow)
                    {
                        return Err(HookAborted::new(
                            format!("the approved edit is denied: {reason}"),
                            format!("policy:{source}"),
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// What the policies say of the call as `ctx` has it now.
    /// Why an enforcing `forbid` of these policies refuses the call in
    /// `ctx` now, if one does: what a durable kickoff asks before it runs a
    /// call in doubt again (a rule added since the call began stops it).
    pub(crate) fn forbids(&self, ctx: &ToolCallHookContext) -> Option<String> {
        if self.shared.shadow.load(Ordering::Acquire) {
            return None;
        }
        let compiled = self.compiled.load_full();
        let default_allow = self.shared.default_allow.load(Ordering::Acquire);
        match self.verdict(&compiled, ctx, default_allow)? {
            Verdict::Deny { source, reason, .. } => Some(format!("{reason} (policy:{source})")),
            Verdict::Allow { .. } => None,
        }
    }

    fn verdict(
        &self,
        compiled: &Compiled,
        ctx: &ToolCallHookContext,
        default_allow: bool,
    ) -> Option<Verdict> {
        let crew = ctx.crew.as_deref();
        let task = ctx.task.as_deref();
        let call = Call {
            tool: ctx.tool_name(),
            role: ctx.agent_role().unwrap_or_default(),
            crew: crew.map_or(self.crew.as_str(), |crew| crew.name()),
            user: crew.and_then(|crew| crew.user()),
            args: &ctx.tool_input,
            call_id: ctx.call_id().unwrap_or_default(),
            task: task.map(|task| task.name()).unwrap_or_default(),
            iteration: ctx.iteration(),
        };
        compiled.decide(&call, default_allow)
    }

    fn report(&self, ctx: &ToolCallHookContext, verdict: &Verdict, shadow: bool) {
        let (decision, policies, reason) = match verdict {
            Verdict::Allow {
                policies,
                ask: None,
            } => ("allow", policies, None),
            Verdict::Allow {
                policies,
                ask: Some((why, _)),
            } => (
                if shadow { "would_ask" } else { "ask" },
                policies,
                Some(why),
            ),
            Verdict::Deny {
                policies, reason, ..
            } => (
                if shadow { "would_deny" } else { "deny" },
                policies,
                Some(reason),
            ),
        };
        tracing::info!(
            gen_ai.tool.name = ctx.tool_name(),
            decision,
            shadow,
            policies = ?policies,
            reason = reason.map(String::as_str),
            "policy decision"
        );
        if self.listened() {
            self.emit(&Event::from(PolicyDecidedEvent {
                tool_name: ctx.tool_name().to_owned(),
                agent_role: ctx.agent_role().map(str::to_owned),
                decision,
                shadow,
                policies: policies.clone(),
                reason: reason.cloned(),
            }));
        }
    }
}

/// Why a policy set was refused.
///
/// ```
/// use crew_runtime::policy::{Policies, PolicyError};
///
/// assert_eq!(Policies::from_text("// nothing yet").unwrap_err(), PolicyError::Empty);
///
/// let missing = Policies::from_file("/no/such/policies.cedar").unwrap_err();
/// assert!(matches!(missing, PolicyError::Read { .. }));
///
/// let broken = Policies::from_text("permit(principal, action, resource").unwrap_err();
/// assert!(matches!(broken, PolicyError::Invalid { .. }));
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The policy file could not be read.
    #[error("cannot read the policy file {}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The text is longer than the engine may read.
    #[error("the policy text is {bytes} bytes, more than the {limit} accepted")]
    TooLarge {
        /// The text's length.
        bytes: usize,
        /// [`MAX_POLICY_BYTES`].
        limit: usize,
    },
    /// The text has no policy.
    #[error(
        "the policy set has no policies: it would deny every call (or allow every one); write at least one `permit` or `forbid`"
    )]
    Empty,
    /// The text does not parse, or its policies do not fit the crew's
    /// tools.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// Every problem found, by place in the text.
        problems: Vec<PolicyProblem>,
    },
}

crate::error::debug_as_display!(PolicyError);

/// One problem of a policy set: which policy, where, what.
///
/// ```
/// use crew_runtime::policy::{PolicyError, Policies};
///
/// let error = Policies::from_text("@id(\"a\")\npermit(principal, action, resource);\n@id(\"a\")\nforbid(principal, action, resource);")
///     .expect_err("two policies named `a`");
/// let PolicyError::Invalid { problems } = error else { panic!("a problem of the text") };
/// assert_eq!(problems[0].policy.as_deref(), Some("a"));
/// assert_eq!((problems[0].line, problems[0].column), (3, 1));
/// assert_eq!(problems[0].to_string(), "policy `a` (line 3, column 1): another policy has the id `a`");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyProblem {
    /// The policy's id (`@id`, else `policy0`, …), when the problem is in
    /// one.
    pub policy: Option<String>,
    /// The line, from 1 (0 when the problem has no place).
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
    /// What is wrong, with a "did you mean" where a known name is close.
    pub message: String,
}

impl PolicyProblem {
    fn general(message: impl Into<String>) -> PolicyProblem {
        PolicyProblem {
            policy: None,
            line: 0,
            column: 0,
            message: message.into(),
        }
    }

    fn at(source: &str, policy: Option<String>, offset: Option<usize>, message: String) -> Self {
        let (line, column) =
            offset.map_or((0, 0), |offset| crate::check::line_column(source, offset));
        PolicyProblem {
            policy,
            line,
            column,
            message,
        }
    }
}

impl fmt::Display for PolicyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.policy, self.line) {
            (Some(policy), 0) => write!(f, "policy `{policy}`: ")?,
            (Some(policy), line) => {
                write!(
                    f,
                    "policy `{policy}` (line {line}, column {}): ",
                    self.column
                )?;
            }
            (None, 0) => {}
            (None, line) => write!(f, "line {line}, column {}: ", self.column)?,
        }
        f.write_str(&self.message)
    }
}
