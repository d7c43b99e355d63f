//! Compile tests of the hook attributes: every accepted signature compiles
//! (and its program runs), every refused one fails with the committed
//! message, on the offending token.
//!
//! Regenerate the expected messages with `TRYBUILD=overwrite` and read
//! every changed `.stderr` before committing it.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
