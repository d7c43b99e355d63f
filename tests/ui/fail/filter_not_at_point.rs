//! `tools = [...]` applies only at the tool-call points, `agents = [...]`
//! only where there is an agent.

use hooks_core::{OutputContext, StepContext};
use hooks_macros::on;

#[on(POST_STEP, tools = ["web_search"])]
fn step_hook(_ctx: &mut StepContext) {}

#[on(OUTPUT, agents = ["Writer"])]
fn output_hook(_ctx: &mut OutputContext) {}

fn main() {}
