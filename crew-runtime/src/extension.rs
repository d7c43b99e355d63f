//! The one seam through which an integration (a cargo feature such as
//! `policy`) adds to a crew: hooks registered at the crew's build, a check
//! of the names it relies on at the first kickoff, notes for
//! [`Crew::explain`](crate::Crew::explain), a filter on the tools the
//! models are offered, and what a tool call's context carries for its
//! hooks. The core calls [`CrewExtension`]s at those places and names no
//! integration; an integration's `#[cfg(feature)]` stands in `lib.rs`
//! ([`crate::AT_BUILD`]) and in its own module only.
//!
//! Crate-private on purpose: every integration lives in this crate, and a
//! public trait would freeze these places as API before a second
//! integration has shown what they should be.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;

use hooks_core::{
    CrewOutput, HookAborted, HookRegistry, Inputs, LlmCallHookContext, ToolCallHookContext,
};

use crate::Crew;
use crate::check::KnownNames;
use crate::error::{BuildError, IntegrationError};
use crate::llm::ToolDefinition;
use crate::registry::SharedRegistry;
use crate::run::journal::JournalFuture;
use crate::tool::Tool;

/// What an integration adds to one built crew. Every method has a default
/// that adds nothing; a crew holds the extensions its build produced
/// (none, for a crew that uses no integration: the run then only checks an
/// empty list).
pub(crate) trait CrewExtension: Any + Send + Sync {
    /// At the first kickoff of the crew, once every crew of the program is
    /// likely built: checks the names the extension relies on against
    /// those of every crew built on `registry` (`known`), reporting what
    /// is wrong; in `strict` mode a problem fails the kickoff.
    fn check_names(
        &self,
        _registry: &HookRegistry,
        _known: &KnownNames,
        _strict: bool,
    ) -> Result<(), IntegrationError> {
        Ok(())
    }

    /// Lines [`Crew::explain`](crate::Crew::explain) adds, after the
    /// hooks, for a call of `tool` by `role`.
    fn explain(&self, _tool: &str, _role: Option<&str>, _notes: &mut Vec<String>) {}

    /// The tools the model of the agent `role` is offered, of `offered`
    /// (its agent's tools, or what an earlier extension left of them);
    /// `None` leaves them as they are.
    fn offered_tools(
        &self,
        _role: &str,
        _offered: &Arc<[ToolDefinition]>,
    ) -> Option<Arc<[ToolDefinition]>> {
        None
    }

    /// Whether the extension runs the crew's kickoffs itself (a durable
    /// crew's journal does); then [`Crew::kickoff`](crate::Crew::kickoff)
    /// hands them to [`kickoff`](Self::kickoff).
    fn runs_kickoffs(&self) -> bool {
        false
    }

    /// Runs a kickoff of `crew` on `inputs` (see
    /// [`runs_kickoffs`](Self::runs_kickoffs)): by default, as any kickoff.
    fn kickoff<'a>(&'a self, crew: &'a Crew, inputs: Inputs) -> JournalFuture<'a, CrewOutput> {
        Box::pin(crew.kickoff_with(inputs, None))
    }

    /// Why the extension's rules refuse the call in `ctx` now, if they
    /// do: asked, with no person, before a durable kickoff runs a call in
    /// doubt again (its PRE chain ran in a process now gone).
    fn refuses_again(&self, _ctx: &ToolCallHookContext) -> Option<String> {
        None
    }

    /// Puts into a tool call's context, before its hooks run, what the
    /// extension's hooks read of the crew (its slot in the run's state).
    fn enter_tool_call(&self, _ctx: &mut ToolCallHookContext) {}

    /// The error the kickoff ends with when the extension's own hook
    /// blocked the model call in `call` (`aborted`) at `PRE_MODEL_CALL`,
    /// if the extension has one for it (a budget's
    /// [`CrewError::BudgetExceeded`](crate::CrewError::BudgetExceeded));
    /// `None` leaves the runtime's `AbortedAt`.
    fn model_call_refused(
        &self,
        _call: &LlmCallHookContext,
        _aborted: &HookAborted,
    ) -> Option<crate::CrewError> {
        None
    }

    /// The error the kickoff ends with, once the call's end is reported,
    /// when the extension's own hook blocked the tool call in `ctx`
    /// (`blocked`) and the extension says a block of its ends the
    /// kickoff; `None` (the default): the agent goes on without the call.
    fn tool_call_refused(
        &self,
        _ctx: &ToolCallHookContext,
        _blocked: &HookAborted,
    ) -> Option<crate::CrewError> {
        None
    }
}

/// What an integration does at every crew's build, once the crew's own
/// hooks are registered: the extension it adds to that crew, if any.
pub(crate) type AtBuild = fn(&BuildScope<'_>) -> Result<Option<Arc<dyn CrewExtension>>, BuildError>;

/// The extension of type `T` among `extensions`, if the crew has one.
pub(crate) fn find<T: CrewExtension>(extensions: &[Arc<dyn CrewExtension>]) -> Option<&T> {
    extensions.iter().find_map(|extension| {
        let extension: &dyn Any = &**extension;
        extension.downcast_ref::<T>()
    })
}

/// A hook of the crew's own, registered on its registry at the build.
pub(crate) type PendingHook =
    Box<dyn FnOnce(&BuildScope<'_>) -> Result<(), BuildError> + Send + Sync>;

/// What a crew's own hooks, and the integrations, are registered with at
/// its build.
pub(crate) struct BuildScope<'a> {
    /// The crew's own registry.
    pub(crate) registry: &'a Arc<HookRegistry>,
    /// The crew's name.
    pub(crate) crew: &'a str,
    /// The crew's tools, each name once.
    #[allow(dead_code, reason = "read by the integrations compiled in, if any")]
    pub(crate) tools: Vec<&'a Tool>,
    /// The global registry the crew dispatches through.
    #[allow(dead_code, reason = "read by the integrations compiled in, if any")]
    pub(crate) global: &'a SharedRegistry,
    /// What the build's hooks leave for the integrations' [`AtBuild`]
    /// steps, one value per type.
    #[allow(dead_code, reason = "read by the integrations compiled in, if any")]
    state: RefCell<Vec<Box<dyn Any>>>,
}

impl<'a> BuildScope<'a> {
    pub(crate) fn new(
        registry: &'a Arc<HookRegistry>,
        crew: &'a str,
        tools: Vec<&'a Tool>,
        global: &'a SharedRegistry,
    ) -> BuildScope<'a> {
        BuildScope {
            registry,
            crew,
            tools,
            global,
            state: RefCell::new(Vec::new()),
        }
    }

    /// Runs `f` on the build's value of type `T` (a default one at first).
    #[allow(dead_code, reason = "used by the integrations compiled in, if any")]
    pub(crate) fn with_state<T: Default + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut state = self.state.borrow_mut();
        if let Some(value) = state.iter_mut().find_map(|value| value.downcast_mut::<T>()) {
            return f(value);
        }
        let mut value = T::default();
        let result = f(&mut value);
        state.push(Box::new(value));
        result
    }

    /// Takes the build's value of type `T` out, if a hook left one.
    #[allow(dead_code, reason = "used by the integrations compiled in, if any")]
    pub(crate) fn take_state<T: 'static>(&self) -> Option<T> {
        let mut state = self.state.borrow_mut();
        let position = state.iter().position(|value| value.is::<T>())?;
        state.swap_remove(position).downcast::<T>().ok().map(|t| *t)
    }
}

/// Makes an integration's event type an [`Event`](hooks_core::Event): its
/// kind name on the bus (`KIND`) and a `From` that sends it as an
/// [`Event::Integration`](hooks_core::Event::Integration) with new
/// metadata. One line per event type, so every integration's events are
/// sent alike. (Unused in a build without the integrations that send
/// events.)
#[allow(unused_macros)]
macro_rules! integration_event {
    ($event:ident, $kind:literal) => {
        impl $event {
            /// Its kind name on the bus
            /// ([`IntegrationEvent::kind`](hooks_core::events::IntegrationEvent::kind)).
            pub const KIND: &'static str = $kind;
        }

        /// Sends it as an [`Event::Integration`](hooks_core::Event::Integration)
        /// with new metadata.
        impl From<$event> for hooks_core::Event {
            fn from(event: $event) -> hooks_core::Event {
                hooks_core::Event::Integration(hooks_core::events::IntegrationEvent::new(
                    $event::KIND,
                    event,
                ))
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use integration_event;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn a_crew_that_uses_no_integration_holds_no_extension() {
        let writer = Agent::builder("Writer").build();
        let crew = Crew::builder()
            .agent(writer.clone())
            .task(Task::builder("Write").agent(&writer).build())
            .global_registry(Arc::new(HookRegistry::new()))
            .build()
            .expect("builds");
        // Every integration compiled in ran at the build, and added nothing:
        // the run only checks an empty list.
        assert!(crew.extensions().is_empty());
    }

    #[test]
    fn the_build_state_keeps_one_value_per_type_until_it_is_taken() {
        let registry = Arc::new(HookRegistry::new());
        let global = SharedRegistry::from(Arc::new(HookRegistry::new()));
        let scope = BuildScope::new(&registry, "crew", Vec::new(), &global);
        scope.with_state(|names: &mut Vec<&str>| names.push("first"));
        scope.with_state(|count: &mut u32| *count += 1);
        scope.with_state(|names: &mut Vec<&str>| names.push("second"));
        assert_eq!(
            scope.take_state::<Vec<&str>>(),
            Some(vec!["first", "second"])
        );
        assert_eq!(scope.take_state::<Vec<&str>>(), None, "taken");
        assert_eq!(scope.take_state::<u32>(), Some(1));
    }
}
