//! Hooks registered from a library module nothing refers to.
