//! Checking the signatures the attributes are put on.
//!
//! Only the shape is checked here (one argument, no generics,
//! ...). Whether the argument really is `ToolCallHookContext` and whether
//! the return type fits the point is left to rustc: the emitted code is
//! spanned at the user's tokens so its errors land on them.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{FnArg, GenericParam, Receiver, ReturnType, Signature, Type};

use crate::errors::Errors;
use crate::parse::Point;

/// What the emitted code needs to know of a valid hook signature.
pub(crate) struct HookSignature {
    /// The first and last token spans of the context argument's type, so
    /// a type mismatch is reported on the whole type.
    pub(crate) context: (Span, Span),
    /// The declared return type (`None` for `()`).
    pub(crate) output: Option<Type>,
    /// Whether the hook is an `async fn`.
    pub(crate) is_async: bool,
}

/// Checks a hook on a free function: `fn(ctx: &mut Context) -> R`, with
/// the context of `point` (any context when the point is unknown).
pub(crate) fn free_hook(
    sig: &Signature,
    point: Option<Point>,
    errors: &mut Errors,
) -> Option<HookSignature> {
    let mut valid = plain_fn(sig, "a hook", true, errors);
    let mut inputs = sig.inputs.iter().peekable();
    let receiver = inputs.next_if(|argument| matches!(argument, FnArg::Receiver(_)));
    if let Some(receiver) = receiver {
        errors.spanned(
            receiver,
            "hook methods taking `self` are only collected by `#[crew_base]` on the impl block",
        );
        valid = false;
    }
    let context = match inputs.next() {
        Some(argument) => context_argument(argument, point, errors),
        // `fn check(&self)`: the receiver's error says enough.
        None if receiver.is_some() => None,
        None => {
            errors.at(
                sig.paren_token.span.join(),
                format!(
                    "a hook takes exactly one argument, the context: `fn {}(ctx: &mut {})`",
                    sig.ident,
                    context_name(point)
                ),
            );
            None
        }
    };
    valid &= extra_arguments(
        inputs,
        "a hook takes exactly one argument, the context",
        errors,
    );
    let output = return_type(sig, errors);
    match (valid, context, output) {
        (true, Some(context), Ok(output)) => Some(HookSignature {
            context,
            output,
            is_async: sig.asyncness.is_some(),
        }),
        _ => None,
    }
}

/// Checks a hook method of a `#[crew_base]` impl:
/// `fn(&self, ctx: &mut Context) -> R`.
pub(crate) fn hook_method(
    sig: &Signature,
    point: Option<Point>,
    errors: &mut Errors,
) -> Option<HookSignature> {
    let mut valid = plain_fn(sig, "a hook method", true, errors);
    let expected = format!(
        "a hook method of a `#[crew_base]` impl takes `&self`, then the context: \
         `fn {}(&self, ctx: &mut {})`",
        sig.ident,
        context_name(point)
    );
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        Some(FnArg::Receiver(receiver)) if is_shared_self(receiver) => {}
        Some(FnArg::Receiver(receiver)) => {
            errors.spanned(receiver, &expected);
            valid = false;
        }
        Some(FnArg::Typed(_)) | None => {
            errors.spanned(&sig.ident, &expected);
            // Without `&self` there is nothing more to say about the rest.
            return None;
        }
    }
    let context = match inputs.next() {
        Some(argument) => context_argument(argument, point, errors),
        None => {
            errors.at(sig.paren_token.span.join(), &expected);
            None
        }
    };
    valid &= extra_arguments(inputs, &expected, errors);
    let output = return_type(sig, errors);
    match (valid, context, output) {
        (true, Some(context), Ok(output)) => Some(HookSignature {
            context,
            output,
            is_async: sig.asyncness.is_some(),
        }),
        _ => None,
    }
}

/// Checks an `#[agent]`, `#[task]` or `#[crew]` method: `fn(&self) -> T`.
/// Returns `T`.
pub(crate) fn builder_method(
    sig: &Signature,
    marker: &str,
    example: &str,
    errors: &mut Errors,
) -> Option<Type> {
    let expected =
        format!("`#[{marker}]` methods take only `&self` and return the {marker}: `{example}`");
    let article = if marker == "agent" { "an" } else { "a" };
    let mut valid = plain_fn(
        sig,
        &format!("{article} `#[{marker}]` method"),
        false,
        errors,
    );
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        Some(FnArg::Receiver(receiver)) if is_shared_self(receiver) => {}
        Some(argument) => {
            errors.spanned(argument, &expected);
            valid = false;
        }
        None => {
            errors.at(sig.paren_token.span.join(), &expected);
            valid = false;
        }
    }
    valid &= extra_arguments(inputs, &expected, errors);
    let output = match &sig.output {
        ReturnType::Type(_, ty) => Some((**ty).clone()),
        ReturnType::Default => {
            errors.spanned(&sig.ident, &expected);
            None
        }
    };
    output.filter(|_| valid)
}

/// The checks every attributed function shares. `what` names it in
/// messages ("a hook", "an `#[agent]` method"); hooks may be `async`,
/// the builder methods of a crew may not.
fn plain_fn(sig: &Signature, what: &str, may_be_async: bool, errors: &mut Errors) -> bool {
    let mut valid = true;
    if let Some(asyncness) = sig.asyncness.as_ref().filter(|_| !may_be_async) {
        errors.spanned(
            asyncness,
            format!("{what} cannot be an `async fn`: a crew is built synchronously"),
        );
        valid = false;
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.spanned(unsafety, format!("{what} cannot be an `unsafe fn`"));
        valid = false;
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(
            abi,
            format!("{what} cannot declare an ABI: it is called as a Rust function"),
        );
        valid = false;
    }
    for param in &sig.generics.params {
        if matches!(param, GenericParam::Type(_) | GenericParam::Const(_)) {
            errors.spanned(
                param,
                format!(
                    "{what} cannot be generic: the attribute registers one concrete function \
                     (lifetime parameters are fine)"
                ),
            );
            valid = false;
        }
    }
    if let Some(variadic) = &sig.variadic {
        errors.spanned(variadic, format!("{what} cannot be variadic"));
        valid = false;
    }
    valid
}

/// Records an error on arguments past the expected ones.
fn extra_arguments<'a>(
    rest: impl Iterator<Item = &'a FnArg>,
    message: &str,
    errors: &mut Errors,
) -> bool {
    let extra: Vec<&FnArg> = rest.collect();
    if extra.is_empty() {
        return true;
    }
    let mut tokens = TokenStream::new();
    for argument in extra {
        argument.to_tokens(&mut tokens);
    }
    errors.spanned(tokens, message);
    false
}

/// The context type of `point`, for messages (`ToolCallHookContext` when
/// the point is unknown).
fn context_name(point: Option<Point>) -> &'static str {
    point.map_or("ToolCallHookContext", Point::context)
}

/// Checks the context argument's shape: a reference to a path ending in
/// the point's context type. Returns the first and last token spans of
/// its type.
fn context_argument(
    argument: &FnArg,
    point: Option<Point>,
    errors: &mut Errors,
) -> Option<(Span, Span)> {
    let ty = match argument {
        FnArg::Typed(typed) => &*typed.ty,
        FnArg::Receiver(receiver) => {
            errors.spanned(receiver, "`self` can only be the first argument");
            return None;
        }
    };
    let fits = match point {
        Some(point) => is_context_reference(ty, &|name| name == point.context()),
        None => is_context_reference(ty, &|name| name.ends_with("Context")),
    };
    if !fits {
        let message = match point {
            Some(point) => format!(
                "a {} hook takes its context as `&mut {}` (or `&{}` when it only reads)",
                point.name(),
                point.context(),
                point.context()
            ),
            None => "a hook takes its context as `&mut ToolCallHookContext` \
                     (or the context of its point)"
                .to_owned(),
        };
        errors.spanned(ty, message);
        return None;
    }
    let mut tokens = ty.to_token_stream().into_iter();
    let first = tokens.next().map(|token| token.span())?;
    let last = tokens.last().map_or(first, |token| token.span());
    Some((first, last))
}

fn is_context_reference(ty: &Type, fits: &dyn Fn(&str) -> bool) -> bool {
    match ty {
        Type::Reference(reference) => is_context_path(&reference.elem, fits),
        Type::Group(group) => is_context_reference(&group.elem, fits),
        Type::Paren(paren) => is_context_reference(&paren.elem, fits),
        _ => false,
    }
}

fn is_context_path(ty: &Type, fits: &dyn Fn(&str) -> bool) -> bool {
    match ty {
        Type::Path(path) => {
            path.qself.is_none()
                && path.path.segments.last().is_some_and(|segment| {
                    fits(&segment.ident.to_string()) && segment.arguments.is_none()
                })
        }
        Type::Group(group) => is_context_path(&group.elem, fits),
        Type::Paren(paren) => is_context_path(&paren.elem, fits),
        _ => false,
    }
}

/// `&self` (or `self: &Self`).
fn is_shared_self(receiver: &Receiver) -> bool {
    match &*receiver.ty {
        Type::Reference(reference) => {
            reference.mutability.is_none()
                && matches!(&*reference.elem, Type::Path(path) if path.qself.is_none() && path.path.is_ident("Self"))
        }
        _ => false,
    }
}

/// The declared return type; `impl Trait` is refused (the adapter must
/// name the type).
fn return_type(sig: &Signature, errors: &mut Errors) -> Result<Option<Type>, ()> {
    match &sig.output {
        ReturnType::Default => Ok(None),
        ReturnType::Type(_, ty) if matches!(**ty, Type::ImplTrait(_)) => {
            errors.spanned(
                ty,
                "a hook names its return type: `impl Trait` is not accepted \
                 (`()`, `Result<(), HookAborted>`, or at points that replace a value \
                 `Option<String>` / `Option<Inputs>` and their `Result<Option<_>, HookAborted>`)",
            );
            Err(())
        }
        ReturnType::Type(_, ty) => Ok(Some((**ty).clone())),
    }
}
