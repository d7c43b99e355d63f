#!/bin/bash
# Times a cold `cargo build` of a small program on crew-runtime, as a new
# user's first build: a fresh target directory, the dev profile, crates
# already downloaded. Then the rebuild after editing one hook.
#
# usage: scripts/cold-build.sh [FEATURES]
#   FEATURES: crew-runtime's features as a TOML array, e.g.
#   '["policy", "sqlite", "inbox", "audit", "openai"]'; none for the
#   defaults. Prints the seconds and the number of crates compiled.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
features="${1:-[]}"
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
mkdir -p "$probe/src"
cat > "$probe/Cargo.toml" <<TOML
[package]
name = "cold-build-probe"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
crew-runtime = { path = "$root/crew-runtime", features = $features }

[workspace]
TOML
cat > "$probe/src/main.rs" <<'RUST'
use crew_runtime::prelude::*;

#[on(PRE_TOOL_CALL, tools = ["lookup"])]
fn screen(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    if ctx.tool_input.contains_key("secret") {
        return Err(HookAborted::new("no secrets", "screen"));
    }
    Ok(())
}

fn main() {
    let llm = std::sync::Arc::new(ScriptedLlm::new().call("lookup", json!({"q": 1})).answer("done"));
    let lookup = Tool::dynamic("lookup", "Looks up", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("found"))
    });
    let clerk = Agent::builder("Clerk").tools(vec![lookup]).llm(llm).build();
    let crew = Crew::builder()
        .agent(clerk.clone())
        .task(Task::builder("Look it up").agent(&clerk).build())
        .build()
        .expect("builds");
    println!("{}", crew.kickoff_blocking(()).expect("runs").raw);
}
RUST
cp "$root/Cargo.lock" "$probe/Cargo.lock"
cd "$probe"
export CARGO_TARGET_DIR="$probe/target"
start=$(date +%s.%N)
cargo build 2> build.log || { cat build.log; exit 1; }
end=$(date +%s.%N)
echo "cold build: $(echo "$end - $start" | bc) s, $(grep -c '^ *Compiling' build.log) crates compiled (features: $features)"
sed -i 's/no secrets/no secrets here/' src/main.rs
start=$(date +%s.%N)
cargo build 2> rebuild.log || { cat rebuild.log; exit 1; }
end=$(date +%s.%N)
echo "rebuild after editing one hook: $(echo "$end - $start" | bc) s"
