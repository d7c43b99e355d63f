"""Side-by-side figure for SPEC §5: the reference system's tool-hook dispatch.

Measures what `cargo bench -p crew-hooks-core --bench dispatch` calls
`one_pre_one_post`: one tool call's PRE + POST dispatch with one no-op hook
at each point, on a prepared context, in crewai 1.15.30.

    python3 -m venv /tmp/crewai-venv
    /tmp/crewai-venv/bin/pip install crewai==1.15.30
    /tmp/crewai-venv/bin/python hooks-core/benches/reference_crewai.py
    CREWAI_DISABLE_TELEMETRY=true OTEL_SDK_DISABLED=true \
        /tmp/crewai-venv/bin/python hooks-core/benches/reference_crewai.py

Prints `reference one_pre_one_post <us_per_call> us` (median of 15 samples).
"""

import statistics
import time

from crewai.hooks import InterceptionPoint, on
from crewai.hooks.tool_hooks import (
    ToolCallHookContext,
    run_after_tool_call_hooks,
    run_before_tool_call_hooks,
)


@on(InterceptionPoint.PRE_TOOL_CALL)
def pre_noop(ctx):
    return None


@on(InterceptionPoint.POST_TOOL_CALL)
def post_noop(ctx):
    return None


def one_call(ctx):
    blocked = run_before_tool_call_hooks(ctx)
    result = run_after_tool_call_hooks(ctx)
    return blocked, result


def main():
    ctx = ToolCallHookContext(
        tool_name="web_search",
        tool_input={"query": "rust"},
        tool=None,
        tool_result="ok",
        raw_tool_result="ok",
    )
    for _ in range(2_000):
        one_call(ctx)
    iterations = 2_000
    samples = []
    for _ in range(15):
        start = time.perf_counter()
        for _ in range(iterations):
            one_call(ctx)
        samples.append((time.perf_counter() - start) / iterations * 1e6)
    print(
        f"reference one_pre_one_post {statistics.median(samples):.1f} us "
        f"(min {min(samples):.1f}, max {max(samples):.1f})"
    )


if __name__ == "__main__":
    main()
