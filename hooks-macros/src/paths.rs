//! Every runtime path the generated code names, in one place.
//!
//! Generated code goes through one door, `<root>::__private`, where
//! `hooks-core` re-exports everything it needs (`linkme` included, so users
//! never depend on it). The only other paths are `::core` items every crate
//! has (`TypeId`, `Clone::clone`, `file!`/`line!`/...).
//!
//! # Finding the root
//!
//! Users depend on one crate, `crew-runtime`, which re-exports `hooks-core`;
//! some depend on `hooks-core` alone. An attribute cannot know by itself
//! which of the two the calling crate can name, so the root is chosen at
//! expansion time from the calling package's `Cargo.toml` (read through
//! `proc-macro-crate`, which also follows renames and workspace
//! dependencies):
//!
//! 1. `crate = path` on the attribute always wins (`#[on(PRE_TOOL_CALL, crate = ::my_facade::hooks_core)]`),
//!    for crates that re-export the attributes under another name.
//! 2. A package that depends on `hooks-core` (under any name) gets
//!    `::<that name>`. Inside `hooks-core` itself (its tests and doctests)
//!    the root is `::hooks_core`; library code of `hooks-core` that used the
//!    attributes would need `extern crate self as hooks_core;`.
//! 3. Otherwise a package that depends on `crew-runtime` gets
//!    `::<that name>::hooks_core`: `crew-runtime` re-exports the engine
//!    crate as `crew_runtime::hooks_core`.
//! 4. Otherwise `::hooks_core`, so rustc's "unresolved crate" error names
//!    the crate to add.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{Ident, Path};

use hooks_core::Capability;

use crate::parse::Point;

/// The paths generated code names, rooted at the engine crate.
pub(crate) struct Paths {
    root: TokenStream,
}

impl Paths {
    /// The paths for this expansion: rooted at `krate` when given, else
    /// found as the module docs describe.
    pub(crate) fn new(krate: Option<&Path>) -> Paths {
        let root = match krate {
            Some(path) => path.to_token_stream(),
            None => default_root(),
        };
        Paths { root }
    }

    fn private(&self) -> TokenStream {
        let root = &self.root;
        quote!(#root::__private)
    }

    /// The `linkme` crate, re-exported so users need not depend on it.
    pub(crate) fn linkme(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::linkme)
    }

    /// The link-time slice of `point`'s hooks.
    pub(crate) fn static_slice(&self, point: Point) -> TokenStream {
        let private = self.private();
        let slice = Ident::new(point.slice(), Span::call_site());
        quote!(#private::#slice)
    }

    /// The record type of a link-time hook at `point`.
    pub(crate) fn static_hook(&self, point: Point) -> TokenStream {
        let private = self.private();
        let point = self.point_type(point);
        quote!(#private::StaticHook<#point>)
    }

    /// The record type, in expression position (its point inferred from
    /// the static's type).
    pub(crate) fn static_hook_record(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::StaticHook)
    }

    /// The marker type of `point`.
    pub(crate) fn point_type(&self, point: Point) -> TokenStream {
        let private = self.private();
        let marker = Ident::new(point.marker(), Span::call_site());
        quote!(#private::points::#marker)
    }

    /// `point`'s context type, as the engine's `Point` trait names it.
    pub(crate) fn context(&self, point: Point) -> TokenStream {
        let private = self.private();
        let point = self.point_type(point);
        quote!(<#point as #private::Point>::Context)
    }

    /// What a hook at `point` returns once adapted.
    pub(crate) fn decision(&self, point: Point) -> TokenStream {
        let private = self.private();
        let point = self.point_type(point);
        quote!(#private::Decision<<#point as #private::Point>::Replacement>)
    }

    /// `HookStyle`.
    pub(crate) fn hook_style(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::HookStyle)
    }

    /// `FailureMode`.
    pub(crate) fn failure_mode(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::FailureMode)
    }

    /// Reads an `#[on]` (or legacy after) hook's return value.
    pub(crate) fn on_reader(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::on)
    }

    /// Reads a legacy before hook's return value.
    pub(crate) fn legacy_before(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::legacy_before)
    }

    /// Names a function by its fn-item type.
    pub(crate) fn type_id_of(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::type_id_of)
    }

    /// The trait giving a built crew's own registry (of a crew or a
    /// `Result` holding one).
    pub(crate) fn built_crew(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::BuiltCrew)
    }

    /// Runs a `#[crew]` method's body naming the `#[crew_base]` type being
    /// built.
    pub(crate) fn building_crew_base(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::building_crew_base)
    }

    /// The trait naming a task (or a `Result` holding one) after its
    /// `#[task]` method unless it has a name.
    pub(crate) fn default_task_name(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::DefaultTaskName)
    }

    /// Registers a crew-scoped hook method.
    /// `StaticCall`: a link-time hook's function, sync or async.
    pub(crate) fn static_call(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::StaticCall)
    }

    /// `HookFuture`: the boxed future of an `async` hook.
    pub(crate) fn hook_future(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::HookFuture)
    }

    /// `Box`, to pin an `async` hook's future.
    pub(crate) fn hook_box(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::HookBox)
    }

    /// Registers an `async` hook method on a crew's registry.
    pub(crate) fn register_scoped_async(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::register_scoped_async)
    }

    pub(crate) fn register_scoped(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::register_scoped)
    }

    /// `Capability::<Variant>`, the value of one capability filter entry.
    pub(crate) fn capability(&self, capability: Capability) -> TokenStream {
        let private = self.private();
        // An exhaustive match: a new capability does not compile until it
        // has its variant here.
        let variant = match capability {
            Capability::ReadOnly => "ReadOnly",
            Capability::Destructive => "Destructive",
            Capability::Idempotent => "Idempotent",
            Capability::OpenWorld => "OpenWorld",
        };
        let variant = Ident::new(variant, Span::call_site());
        quote!(#private::Capability::#variant)
    }

    /// A `Capabilities` constant holding `capabilities`.
    pub(crate) fn capabilities(&self, capabilities: &[Capability]) -> TokenStream {
        let private = self.private();
        let each = capabilities.iter().map(|c| self.capability(*c));
        quote!(#private::Capabilities::NONE #(.with(#each))*)
    }

    /// `HookOptions`.
    pub(crate) fn hook_options(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::HookOptions)
    }

    /// Copies a crew instance for its hook methods, checking its bounds.
    pub(crate) fn share_crew_instance(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::share_crew_instance)
    }

    /// `Option::None`.
    pub(crate) fn none(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::Option::None)
    }

    /// `Option::Some`.
    pub(crate) fn some(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::Option::Some)
    }

    /// `std::sync::Arc`, holding a crew instance for its hook methods.
    pub(crate) fn shared_arc(&self) -> TokenStream {
        let private = self.private();
        quote!(#private::SharedArc)
    }
}

/// `Duration`, for `timeout_ms = N`.
pub(crate) fn duration() -> TokenStream {
    quote!(::core::time::Duration)
}

/// `TypeId`.
pub(crate) fn type_id() -> TokenStream {
    quote!(::core::any::TypeId)
}

/// `Vec`, for `agents()` and `tasks()`.
pub(crate) fn vec() -> TokenStream {
    quote!(::std::vec::Vec)
}

/// `vec!`, for `agents()` and `tasks()`.
pub(crate) fn vec_macro() -> TokenStream {
    quote!(::std::vec!)
}

/// The position macros recorded in a link-time hook.
pub(crate) fn source_position() -> [TokenStream; 4] {
    [
        quote!(::core::module_path!()),
        quote!(::core::file!()),
        quote!(::core::line!()),
        quote!(::core::column!()),
    ]
}

/// The root as the calling package's manifest allows (see the module docs).
fn default_root() -> TokenStream {
    root_for(crate_name("crew-hooks-core").ok(), || {
        crate_name("crew-runtime").ok()
    })
}

/// The root, given how the calling package names `hooks-core` and
/// `crew-runtime` (looked up only when needed).
fn root_for(
    hooks_core: Option<FoundCrate>,
    crew_runtime: impl FnOnce() -> Option<FoundCrate>,
) -> TokenStream {
    match hooks_core {
        Some(FoundCrate::Name(name)) => {
            let name = Ident::new(&name, Span::call_site());
            quote!(::#name)
        }
        // `hooks-core`'s own tests and doctests name it like any user.
        Some(FoundCrate::Itself) => quote!(::hooks_core),
        None => match crew_runtime() {
            Some(FoundCrate::Name(name)) => {
                let name = Ident::new(&name, Span::call_site());
                quote!(::#name::hooks_core)
            }
            // `crew-runtime` depends on `hooks-core`, so it never gets here;
            // the fallback lets rustc name the missing crate.
            Some(FoundCrate::Itself) | None => quote!(::hooks_core),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(hooks_core: Option<FoundCrate>, crew_runtime: Option<FoundCrate>) -> String {
        root_for(hooks_core, || crew_runtime)
            .to_string()
            .replace(' ', "")
    }

    #[test]
    fn a_direct_dependency_on_hooks_core_is_used_under_its_name() {
        let runtime = Some(FoundCrate::Name("crew_runtime".into()));
        assert_eq!(
            root(Some(FoundCrate::Name("hooks_core".into())), runtime.clone()),
            "::hooks_core"
        );
        assert_eq!(
            root(Some(FoundCrate::Name("engine".into())), runtime),
            "::engine"
        );
        assert_eq!(root(Some(FoundCrate::Itself), None), "::hooks_core");
    }

    #[test]
    fn users_of_crew_runtime_alone_go_through_its_re_export() {
        let runtime = Some(FoundCrate::Name("crew_runtime".into()));
        assert_eq!(root(None, runtime), "::crew_runtime::hooks_core");
        let renamed = Some(FoundCrate::Name("crews".into()));
        assert_eq!(root(None, renamed), "::crews::hooks_core");
    }

    #[test]
    fn without_either_the_path_names_the_crate_to_add() {
        assert_eq!(root(None, None), "::hooks_core");
    }

    #[test]
    fn crate_argument_overrides_the_manifest() {
        let path: Path = syn::parse_quote!(crate::facade::engine);
        let paths = Paths::new(Some(&path));
        assert_eq!(
            paths
                .static_slice(Point::PreToolCall)
                .to_string()
                .replace(' ', ""),
            "crate::facade::engine::__private::PRE_TOOL_CALL_HOOKS"
        );
    }
}
