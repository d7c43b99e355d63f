//! `#[crew_base]` on an impl block, and the `#[agent]`, `#[task]`, `#[crew]`
//! markers it reads.
//!
//! The impl block comes back with:
//! - `agents(&self) -> Vec<A>` and `tasks(&self) -> Vec<T>`, calling every
//!   `#[agent]` / `#[task]` method in declaration order; `tasks()` names
//!   each task without a name of its own after its method (SPEC §10);
//! - the `#[crew]` method wrapped so that the crew it builds gets this
//!   instance's hook methods on the crew's own registry (never the global
//!   one), registered once per built crew, sorted by `order` then
//!   declaration order. The user's body moves unchanged into a hidden
//!   `__crew_base_<name>` method, so `return` and `?` in it keep working;
//!   it may return the crew or a `Result` holding it (hooks are attached
//!   to an `Ok` crew);
//! - `agents()` / `tasks()` get the `#[crew]` method's visibility;
//! - every attribute it read rewritten to `#[attr(__crew_base_collected)]`,
//!   which expands to the method unchanged.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote};
use syn::ext::IdentExt;
use syn::{
    Attribute, Ident, ImplItem, ImplItemFn, Item, ItemImpl, MacroDelimiter, Meta, MetaList, Type,
};

use crate::emit::{adapted_call, respan, style};
use crate::errors::Errors;
use crate::parse::{self, HookArgs, HookKind, Point};
use crate::paths::{self, Paths};
use crate::validate::{self, HookSignature};

/// Expands `#[agent]`, `#[task]` or `#[crew]` found outside `#[crew_base]`
/// (inside, `#[crew_base]` has rewritten them to pass the method through).
pub(crate) fn marker(name: &str, args: TokenStream, item: TokenStream) -> TokenStream {
    if parse::is_collected(&args) {
        return item;
    }
    let error = syn::Error::new(
        Span::call_site(),
        format!(
            "`#[{name}]` only has a meaning on a method of an impl block marked `#[crew_base]`; \
             add `#[crew_base]` to the impl block"
        ),
    )
    .to_compile_error();
    quote!(#item #error)
}

/// What a method of the impl block is, by its attribute.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Agent,
    Task,
    Crew,
    Hook(HookKind),
}

impl Role {
    fn of(attribute: &Attribute) -> Option<Role> {
        let path = attribute.path();
        let last = &path.segments.last()?.ident;
        if last == "agent" {
            Some(Role::Agent)
        } else if last == "task" {
            Some(Role::Task)
        } else if last == "crew" {
            Some(Role::Crew)
        } else {
            HookKind::from_path(path).map(Role::Hook)
        }
    }

    fn attribute(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Task => "task",
            Role::Crew => "crew",
            Role::Hook(kind) => kind.attribute(),
        }
    }
}

/// An `#[agent]` or `#[task]` method.
struct Builder {
    ident: Ident,
    output: Type,
}

/// A hook method.
struct HookMethod {
    ident: Ident,
    args: HookArgs,
    point: Point,
    signature: HookSignature,
}

/// What the impl block holds.
#[derive(Default)]
struct Collected {
    agents: Vec<Builder>,
    tasks: Vec<Builder>,
    /// Index in `items` of the valid `#[crew]` method.
    crew: Option<usize>,
    /// Whether some method was marked `#[crew]` (valid or not).
    crew_marked: bool,
    hooks: Vec<HookMethod>,
}

/// Expands `#[crew_base]`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::new();
    let krate = parse::crew_base_args(args, &mut errors);
    let mut block = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Impl(block)) => block,
        Ok(_) => {
            errors.at(
                Span::call_site(),
                "`#[crew_base]` goes on an inherent impl block: `#[crew_base] impl MyCrew { ... }`",
            );
            let compile_errors = errors.to_compile_errors();
            return quote!(#item #compile_errors);
        }
        Err(_) => {
            let compile_errors = errors.to_compile_errors();
            return quote!(#item #compile_errors);
        }
    };
    if let Some((_, trait_path, _)) = &block.trait_ {
        errors.spanned(
            trait_path,
            "`#[crew_base]` goes on an inherent impl block (`impl MyCrew { ... }`), not on a trait impl",
        );
        // Only the error above: the methods' markers just pass through.
        for item in &mut block.items {
            if let ImplItem::Fn(method) = item {
                method
                    .attrs
                    .iter_mut()
                    .filter(|attribute| Role::of(attribute).is_some())
                    .for_each(mark_collected);
            }
        }
    } else {
        let collected = collect(&mut block, &mut errors);
        generate(
            &mut block,
            collected,
            &Paths::new(krate.as_ref()),
            &mut errors,
        );
    }
    let compile_errors = errors.to_compile_errors();
    quote!(#block #compile_errors)
}

/// Reads every method's role, checks it, and rewrites the attributes read
/// into their pass-through form.
fn collect(block: &mut ItemImpl, errors: &mut Errors) -> Collected {
    let mut collected = Collected::default();
    for (index, item) in block.items.iter_mut().enumerate() {
        let ImplItem::Fn(method) = item else {
            continue;
        };
        let mut role: Option<(Role, Option<HookArgs>)> = None;
        for attribute in &mut method.attrs {
            let Some(this) = Role::of(attribute) else {
                continue;
            };
            let args = read_arguments(attribute, this, errors);
            if let Some((first, _)) = &role {
                errors.spanned(
                    &*attribute,
                    format!(
                        "a method has one role in a `#[crew_base]` impl, and this one is already `#[{}]`",
                        first.attribute()
                    ),
                );
            } else {
                role = Some((this, args));
            }
            mark_collected(attribute);
        }
        match role {
            None => {}
            Some((Role::Agent, _)) => {
                let example = "fn researcher(&self) -> Agent";
                if let Some(output) =
                    validate::builder_method(&method.sig, "agent", example, errors)
                {
                    collected.agents.push(Builder {
                        ident: method.sig.ident.clone(),
                        output,
                    });
                }
            }
            Some((Role::Task, _)) => {
                let example = "fn research(&self) -> Task";
                if let Some(output) = validate::builder_method(&method.sig, "task", example, errors)
                {
                    collected.tasks.push(Builder {
                        ident: method.sig.ident.clone(),
                        output,
                    });
                }
            }
            Some((Role::Crew, _)) => {
                if collected.crew_marked {
                    errors.spanned(
                        &method.sig.ident,
                        "more than one `#[crew]` method: a `#[crew_base]` impl builds its crew in one method",
                    );
                    continue;
                }
                collected.crew_marked = true;
                let example = "fn crew(&self) -> Crew";
                if validate::builder_method(&method.sig, "crew", example, errors).is_some() {
                    collected.crew = Some(index);
                }
            }
            Some((Role::Hook(_), args)) => {
                let point = args.as_ref().and_then(|args| args.point);
                let signature = validate::hook_method(&method.sig, point, errors);
                if let (Some(args), Some(signature)) = (&args, &signature) {
                    args.check_timeout(signature.is_async, errors);
                }
                if let (Some(args), Some(signature)) = (args, signature)
                    && let Some(point) = args.point
                {
                    collected.hooks.push(HookMethod {
                        ident: method.sig.ident.clone(),
                        args,
                        point,
                        signature,
                    });
                }
            }
        }
    }
    collected
}

/// Parses a role attribute's arguments: hook arguments for hooks, none for
/// the markers.
fn read_arguments(attribute: &Attribute, role: Role, errors: &mut Errors) -> Option<HookArgs> {
    let tokens = match &attribute.meta {
        Meta::Path(_) => TokenStream::new(),
        Meta::List(list) => list.tokens.clone(),
        Meta::NameValue(_) => {
            errors.spanned(
                attribute,
                format!(
                    "write `#[{}(...)]`, not `#[{} = ...]`",
                    role.attribute(),
                    role.attribute()
                ),
            );
            return None;
        }
    };
    match role {
        Role::Hook(kind) => Some(parse::hook_args(kind, tokens, errors)),
        Role::Agent | Role::Task | Role::Crew => {
            if !tokens.is_empty() {
                errors.spanned(
                    &tokens,
                    format!("`#[{}]` takes no arguments", role.attribute()),
                );
            }
            None
        }
    }
}

/// Rewrites `#[path(...)]` into `#[path(__crew_base_collected)]`.
fn mark_collected(attribute: &mut Attribute) {
    let path = attribute.path().clone();
    let marker = Ident::new(parse::COLLECTED, Span::call_site());
    attribute.meta = Meta::List(MetaList {
        path,
        delimiter: MacroDelimiter::Paren(Default::default()),
        tokens: quote!(#marker),
    });
}

/// Adds `agents()`, `tasks()` and the hook-attaching `#[crew]` wrapper.
fn generate(block: &mut ItemImpl, collected: Collected, paths: &Paths, errors: &mut Errors) {
    let Collected {
        agents,
        tasks,
        crew,
        crew_marked,
        mut hooks,
    } = collected;
    let crew_method = crew.and_then(|index| match &block.items[index] {
        ImplItem::Fn(method) => Some(method.clone()),
        _ => None,
    });
    let visibility = crew_method
        .as_ref()
        .map(|method| method.vis.to_token_stream())
        .unwrap_or_default();

    let mut generated: Vec<ImplItem> = Vec::new();
    if let Some(method) = list_method(&agents, "agents", "agent", &visibility, None) {
        generated.push(method);
    }
    // With errors reported, the tasks are listed as they are: a method
    // whose marker is wrong would only add a follow-on error.
    let naming = errors.is_empty().then(|| paths.default_task_name());
    if let Some(method) = list_method(&tasks, "tasks", "task", &visibility, naming.as_ref()) {
        generated.push(method);
    }

    if !hooks.is_empty() {
        match (crew, crew_method) {
            (Some(index), Some(method)) => {
                // Registration order: `order`, then declaration order
                // (the sort is stable).
                hooks.sort_by_key(|hook| hook.args.order);
                let crew_name = type_name(&block.self_ty);
                let [inner, wrapper] =
                    wrap_crew(&method, &block.self_ty, &crew_name, &hooks, paths);
                block.items[index] = wrapper;
                generated.push(inner);
            }
            _ if crew_marked => {
                // The `#[crew]` method has an error of its own already.
            }
            _ => {
                for hook in &hooks {
                    errors.spanned(
                        &hook.ident,
                        "hook methods of a `#[crew_base]` impl are attached to the crew its `#[crew]` method \
                         builds, and this impl has none: add `#[crew] fn crew(&self) -> Crew { ... }`",
                    );
                }
            }
        }
    }
    block.items.extend(generated);
}

/// `fn agents(&self) -> Vec<A> { vec![Self::a(self), ...] }`; with
/// `naming` (the tasks), each value goes through that trait with its
/// method's name: `<T as DefaultTaskName>::named_by_default(Self::t(self), "t")`.
fn list_method(
    builders: &[Builder],
    name: &str,
    marker: &str,
    visibility: &TokenStream,
    naming: Option<&TokenStream>,
) -> Option<ImplItem> {
    let first = builders.first()?;
    let element = &first.output;
    let name = Ident::new(name, Span::call_site());
    let calls = builders.iter().map(|builder| {
        let ident = &builder.ident;
        let span = builder
            .output
            .to_token_stream()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |token| token.span());
        let call = match naming {
            // The return type named as the trait's self type: a type that
            // is no task is reported on the method's return type.
            Some(naming) => {
                let output = &builder.output;
                let method_name = ident.unraw().to_string();
                quote!(<#output as #naming>::named_by_default(Self::#ident(self), #method_name))
            }
            None => quote!(Self::#ident(self)),
        };
        respan(call, span)
    });
    let vec = paths::vec();
    let vec_macro = paths::vec_macro();
    let doc = format!("Every `#[{marker}]` method's value, in declaration order.");
    Some(ImplItem::Verbatim(quote! {
        #[doc = #doc]
        #visibility fn #name(&self) -> #vec<#element> {
            #vec_macro[#(#calls),*]
        }
    }))
}

/// Splits the `#[crew]` method in two: the user's method, renamed and
/// hidden, and a wrapper under the user's name that calls it and attaches
/// the hook methods to the crew it returns.
fn wrap_crew(
    method: &ImplItemFn,
    self_ty: &Type,
    crew_name: &str,
    hooks: &[HookMethod],
    paths: &Paths,
) -> [ImplItem; 2] {
    let inner_ident = format_ident!("__crew_base_{}", method.sig.ident.unraw());

    let mut inner = method.clone();
    inner.sig.ident = inner_ident.clone();
    inner.vis = syn::Visibility::Inherited;
    // What speaks to callers (docs, `#[must_use]`, `#[deprecated]`) and the
    // marker go to the wrapper users call; body lints (`#[allow]`, ...)
    // stay with the body; `#[cfg]` goes to both.
    inner
        .attrs
        .retain(|attribute| !for_callers(attribute) || is_cfg(attribute));
    inner.attrs.push(syn::parse_quote!(#[doc(hidden)]));

    let built_crew = paths.built_crew();
    let some = paths.some();
    // The self type named as the type argument: a crew type that is not
    // `Clone + Send + Sync + 'static` is reported on the impl's self type.
    let share_crew_instance = paths.share_crew_instance();
    let keep_instance = quote!(#share_crew_instance::<#self_ty>(self));
    // Naming the return type as the trait's self type makes rustc report
    // a type that is no crew on the `#[crew]` method's return type (an
    // `impl Trait` return cannot be named here, and is checked by the plain
    // call instead).
    let (crew_hooks, built_crew_name, hooks_attached) = match &method.sig.output {
        syn::ReturnType::Type(_, ty) if !matches!(**ty, Type::ImplTrait(_)) => (
            quote!(<#ty as #built_crew>::built_crew_hooks),
            quote!(<#ty as #built_crew>::built_crew_name),
            quote!(<#ty as #built_crew>::built_crew_hooks_attached),
        ),
        _ => (
            quote!(#built_crew::built_crew_hooks),
            quote!(#built_crew::built_crew_name),
            quote!(#built_crew::built_crew_hooks_attached),
        ),
    };
    let building_crew_base = paths.building_crew_base();
    let registrations = hooks
        .iter()
        .map(|hook| registration(hook, crew_name, paths));

    let attrs = method
        .attrs
        .iter()
        .filter(|attribute| for_callers(attribute));
    let vis = &method.vis;
    let sig = &method.sig;
    let wrapper = quote! {
        #(#attrs)*
        #vis #sig {
            // A crew built without a name is named after the type.
            let __crew = #building_crew_base(#crew_name, || Self::#inner_ident(self));
            if let #some(__registry) = #crew_hooks(&__crew) {
                // The hook methods carry the crew's one name.
                let __crew_name: &str = match #built_crew_name(&__crew) {
                    #some(name) => name,
                    _ => #crew_name,
                };
                let __this = #keep_instance;
                #(#registrations)*
            }
            #hooks_attached(&__crew);
            __crew
        }
    };
    [ImplItem::Fn(inner), ImplItem::Verbatim(wrapper)]
}

/// Whether an attribute of the `#[crew]` method belongs on the wrapper.
fn for_callers(attribute: &Attribute) -> bool {
    let path = attribute.path();
    Role::of(attribute).is_some()
        || is_cfg(attribute)
        || ["doc", "must_use", "deprecated"]
            .iter()
            .any(|name| path.is_ident(name))
}

fn is_cfg(attribute: &Attribute) -> bool {
    attribute.path().is_ident("cfg")
}

/// One hook method's registration on the crew's registry.
fn registration(hook: &HookMethod, crew_name: &str, paths: &Paths) -> TokenStream {
    // A hook method's own `crate = path` roots its registration.
    let own_paths;
    let paths = match &hook.args.krate {
        Some(krate) => {
            own_paths = Paths::new(Some(krate));
            &own_paths
        }
        None => paths,
    };
    let register = paths.register_scoped();
    let decision = paths.decision(hook.point);
    let point_type = paths.point_type(hook.point);
    let context = paths.context(hook.point);
    let shared_arc = paths.shared_arc();
    let ident = &hook.ident;
    let context_name = Ident::new("__ctx", Span::call_site());
    let call = adapted_call(
        paths,
        hook.args.kind,
        hook.point,
        &hook.signature,
        quote!(Self::#ident),
        quote!(&*__this,),
        &context_name,
    );
    let style = style(paths, hook.args.kind);
    let options = options(hook, crew_name, paths);
    if hook.signature.is_async {
        let register = paths.register_scoped_async();
        let boxed = paths.hook_box();
        return quote! {
            let _ = #register(#point_type, __registry, __crew_name, #style, #options, {
                let __shared = #shared_arc::clone(&__this);
                move |#context_name: &mut #context| {
                    let __this = #shared_arc::clone(&__shared);
                    #boxed::pin(async move { #call })
                }
            });
        };
    }
    quote! {
        // The attribute checked the filters against the point, so
        // registering cannot fail.
        let _ = #register(#point_type, __registry, __crew_name, #style, #options, {
            let __this = #shared_arc::clone(&__this);
            move |#context_name: &mut #context| -> #decision { #call }
        });
    }
}

/// `HookOptions::new().name(..).tools([..])...` for a hook method.
fn options(hook: &HookMethod, crew_name: &str, paths: &Paths) -> TokenStream {
    let hook_options = paths.hook_options();
    let name = format!("{crew_name}::{}", hook.ident.unraw());
    let mut options = quote!(#hook_options::new().name(#name));
    let args = &hook.args;
    if !args.tools.is_empty() {
        let tools = &args.tools;
        options.extend(quote!(.tools([#(#tools),*])));
    }
    if !args.agents.is_empty() {
        let agents = &args.agents;
        options.extend(quote!(.agents([#(#agents),*])));
    }
    if !args.capabilities.is_empty() {
        let capabilities = args.capabilities.iter().map(|c| paths.capability(*c));
        options.extend(quote!(.capabilities([#(#capabilities),*])));
    }
    if args.order != 0 {
        let order = args.order;
        options.extend(quote!(.order(#order)));
    }
    if args.unchecked_filters {
        options.extend(quote!(.unchecked_filters()));
    }
    if args.fail_closed {
        options.extend(quote!(.fail_closed()));
    }
    if let Some((millis, _)) = args.timeout_ms {
        let duration = crate::paths::duration();
        options.extend(quote!(.timeout(#duration::from_millis(#millis))));
    }
    options
}

/// The crew's name in `HookOrigin::Crew`: the type's last path segment.
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .map(|segment| segment.ident.unraw().to_string())
            .unwrap_or_default(),
        Type::Group(group) => type_name(&group.elem),
        Type::Paren(paren) => type_name(&paren.elem),
        other => other.to_token_stream().to_string().replace(' ', ""),
    }
}
