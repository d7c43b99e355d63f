//! Collecting every error of one expansion, so the user sees them all at once.

use std::fmt::Display;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

/// The errors found while expanding one attribute, combined into one
/// `syn::Error` that renders as one `compile_error!` per message, each on
/// its own token.
#[derive(Default)]
pub(crate) struct Errors {
    combined: Option<syn::Error>,
}

impl Errors {
    pub(crate) fn new() -> Self {
        Errors::default()
    }

    /// Records an error already built (a parse error from syn, say).
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.combined {
            Some(combined) => combined.combine(error),
            None => self.combined = Some(error),
        }
    }

    /// Records an error spanning all of `tokens` (from their first to their
    /// last token, so rustc underlines the whole offending piece).
    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error at one span.
    pub(crate) fn at(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.combined.is_none()
    }

    /// One `compile_error!` per recorded error (nothing when there is none).
    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.combined
            .as_ref()
            .map(syn::Error::to_compile_error)
            .unwrap_or_default()
    }
}
