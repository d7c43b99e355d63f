//! Cross-crate behavior tests and compile-fail tests of the hook attributes.
//!
//! The library holds only hooks registered from a module nothing refers
//! to: link-time registration must find them all the same.

mod orphan_hooks;

/// The README's code blocks, compiled and run as doctests so the front page
/// never drifts from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
