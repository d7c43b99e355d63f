//! `timeout_ms` applies to `async fn` hooks only: a synchronous hook runs
//! inline and cannot be cut short, so the argument would do nothing.

use crew_runtime::prelude::*;

#[on(PRE_TOOL_CALL, timeout_ms = 500)]
fn inline(_ctx: &mut ToolCallHookContext) {}

#[derive(Clone)]
struct Mailroom;

#[crew_base]
impl Mailroom {
    #[on(POST_TOOL_CALL, timeout_ms = 500)]
    fn scoped_inline(&self, _ctx: &mut ToolCallHookContext) {}

    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        Crew::builder().build()
    }
}

fn main() {}
