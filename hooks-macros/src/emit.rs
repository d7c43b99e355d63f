//! Expanding a hook attribute on a free function: the function unchanged,
//! plus a link-time record in `hooks-core`'s distributed slice.

use proc_macro2::{Group, Ident, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::Item;
use syn::ext::IdentExt;

use crate::errors::Errors;
use crate::parse::{self, HookArgs, HookKind, Point};
use crate::paths::{self, Paths};
use crate::validate::{self, HookSignature};

/// Expands `#[on]`, `#[before_tool_call]` or `#[after_tool_call]`.
///
/// The item always comes back unchanged, next to one `compile_error!` per
/// problem found, so an IDE keeps seeing the function and no "cannot find
/// function" error follows the real one.
pub(crate) fn hook_attribute(kind: HookKind, args: TokenStream, item: TokenStream) -> TokenStream {
    if parse::is_collected(&args) {
        // Left by `#[crew_base]`, which has already read this hook method.
        return item;
    }
    let mut errors = Errors::new();
    let hook_args = parse::hook_args(kind, args, &mut errors);
    let function = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(function)) => Some(function),
        Ok(_) => {
            errors.at(
                Span::call_site(),
                format!(
                    "`#[{}]` goes on a free function: `fn my_hook(ctx: &mut ToolCallHookContext) {{ ... }}`",
                    kind.attribute()
                ),
            );
            None
        }
        // Not even an item: rustc reports the syntax error when it reads
        // the tokens back.
        Err(_) => None,
    };
    let signature = function
        .as_ref()
        .and_then(|function| validate::free_hook(&function.sig, hook_args.point, &mut errors));
    if let Some(signature) = &signature {
        hook_args.check_timeout(signature.is_async, &mut errors);
    }
    let registration = match (&function, &signature, hook_args.point) {
        (Some(function), Some(signature), Some(point)) if errors.is_empty() => {
            static_record(&function.sig.ident, &hook_args, point, signature)
        }
        _ => TokenStream::new(),
    };
    let compile_errors = errors.to_compile_errors();
    quote! {
        #item
        #registration
        #compile_errors
    }
}

/// The link-time record of a valid hook.
fn static_record(
    function: &Ident,
    args: &HookArgs,
    point: Point,
    signature: &HookSignature,
) -> TokenStream {
    let paths = Paths::new(args.krate.as_ref());
    let context = paths.context(point);
    let decision = paths.decision(point);
    let static_hook = paths.static_hook(point);
    let static_hook_record = paths.static_hook_record();
    let static_slice = paths.static_slice(point);
    let linkme = paths.linkme();
    let type_id = paths::type_id();
    let type_id_of = paths.type_id_of();
    let [module_path, file, line, column] = paths::source_position();

    let context_name = Ident::new("__ctx", Span::call_site());
    let call = adapted_call(
        &paths,
        args.kind,
        point,
        signature,
        function.to_token_stream(),
        TokenStream::new(),
        &context_name,
    );
    let style = style(&paths, args.kind);
    let failure = failure(&paths, args.fail_closed);
    let timeout = match args.timeout_ms {
        Some((millis, _)) => {
            let (some, duration) = (paths.some(), paths::duration());
            quote!(#some(#duration::from_millis(#millis)))
        }
        None => paths.none(),
    };
    let name = function.unraw().to_string();
    let tools = &args.tools;
    let agents = &args.agents;
    let capabilities = paths.capabilities(&args.capabilities);
    let order = args.order;
    let unchecked_filters = args.unchecked_filters;

    let static_call = paths.static_call();
    let (hook_fn, call_kind) = if signature.is_async {
        let future = paths.hook_future();
        let boxed = paths.hook_box();
        (
            quote! {
                fn __hook<'__c>(#context_name: &'__c mut #context) -> #future<'__c, #decision> {
                    #boxed::pin(async move { #call })
                }
            },
            quote!(#static_call::Async(__hook)),
        )
    } else {
        (
            quote! {
                fn __hook(#context_name: &mut #context) -> #decision {
                    #call
                }
            },
            quote!(#static_call::Sync(__hook)),
        )
    };
    quote! {
        const _: () = {
            #hook_fn
            fn __type_id() -> #type_id {
                #type_id_of(&#function)
            }
            #[#linkme::distributed_slice(#static_slice)]
            #[linkme(crate = #linkme)]
            static __HOOK: #static_hook = #static_hook_record {
                style: #style,
                name: #name,
                module_path: #module_path,
                file: #file,
                line: #line,
                column: #column,
                tools: &[#(#tools),*],
                agents: &[#(#agents),*],
                capabilities: #capabilities,
                order: #order,
                failure: #failure,
                timeout: #timeout,
                unchecked_filters: #unchecked_filters,
                call: #call_kind,
                type_id: __type_id,
            };
        };
    }
}

/// `HookStyle::…` for an attribute.
pub(crate) fn style(paths: &Paths, kind: HookKind) -> TokenStream {
    let hook_style = paths.hook_style();
    match kind {
        HookKind::On => quote!(#hook_style::On),
        HookKind::BeforeToolCall => quote!(#hook_style::BeforeToolCall),
        HookKind::AfterToolCall => quote!(#hook_style::AfterToolCall),
        HookKind::BeforeLlmCall => quote!(#hook_style::BeforeLlmCall),
        HookKind::AfterLlmCall => quote!(#hook_style::AfterLlmCall),
    }
}

fn failure(paths: &Paths, fail_closed: bool) -> TokenStream {
    let failure_mode = paths.failure_mode();
    if fail_closed {
        quote!(#failure_mode::FailClosed)
    } else {
        quote!(#failure_mode::FailOpen)
    }
}

/// The call of the user's hook, adapted to its point's decision:
/// `reader::<Point, R>(callee(leading_args &mut *ctx))`.
///
/// The return type is written out as the reader's type argument, so an
/// unaccepted return type is reported by rustc (with the message of the
/// reader's trait) on the user's own return type. The context argument is
/// spanned at the user's argument type, so a context of the wrong type is
/// reported there.
pub(crate) fn adapted_call(
    paths: &Paths,
    kind: HookKind,
    point: Point,
    signature: &HookSignature,
    callee: TokenStream,
    leading_args: TokenStream,
    context: &Ident,
) -> TokenStream {
    let reader = if kind.is_legacy_before() {
        paths.legacy_before()
    } else {
        paths.on_reader()
    };
    let point_type = paths.point_type(point);
    let (output, output_span) = match &signature.output {
        Some(ty) => {
            let span = ty
                .to_token_stream()
                .into_iter()
                .next()
                .map_or_else(Span::call_site, |token| token.span());
            (ty.to_token_stream(), span)
        }
        None => (quote!(()), Span::call_site()),
    };
    let reader = respan(reader, output_span);
    let (first, last) = signature.context;
    let borrow = respan(quote!(&mut *), first);
    let context = Ident::new(&context.to_string(), Span::call_site().located_at(last));
    let awaited = if signature.is_async {
        quote!(.await)
    } else {
        TokenStream::new()
    };
    quote! {
        #reader::<#point_type, #output>(#callee(#leading_args #borrow #context) #awaited)
    }
}

/// The same tokens, located at `span` (keeping call-site hygiene, so the
/// names they use resolve as before).
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    let located = Span::call_site().located_at(span);
    tokens
        .into_iter()
        .map(|mut tree| {
            if let TokenTree::Group(group) = &tree {
                let mut respanned = Group::new(group.delimiter(), respan(group.stream(), span));
                respanned.set_span(located);
                tree = TokenTree::Group(respanned);
            } else {
                tree.set_span(located);
            }
            tree
        })
        .collect()
}
