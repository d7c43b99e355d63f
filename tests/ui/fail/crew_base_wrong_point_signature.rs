//! A `#[crew_base]` hook method takes its point's context.

use crew_runtime::{OutputContext, prelude::*};

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl MyCrew {
    #[on(POST_STEP)]
    fn sign(&self, ctx: &mut ToolCallHookContext) -> Option<String> {
        ctx.tool_result.clone()
    }

    #[on(OUTPUT, tools = ["web_search"])]
    fn filtered(&self, _ctx: &mut OutputContext) {}

    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        Crew::builder().build()
    }
}

fn main() {}
