//! The tools: filesystem tools shaped like the reference MCP filesystem
//! server's, and fixture tools covering every annotation and result kind.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use rmcp::{
    handler::server::wrapper::Parameters,
    model::{CallToolResult, ContentBlock, JsonObject, RequestMetaObject, Resource},
    tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{self, PathRefused};

/// A 1×1 transparent PNG, base64: the smallest valid image for `picture`.
const TINY_PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// The state every clone of a server shares: its root and the calls it
/// received.
#[derive(Debug)]
pub(crate) struct State {
    /// The canonical root the filesystem tools are confined to.
    pub(crate) root: PathBuf,
    /// Every tool call received, in order: the tool's name and arguments.
    pub(crate) calls: Mutex<Vec<(String, Value)>>,
}

impl State {
    /// The call log; a test that panicked while holding it cannot have left
    /// it half-written (each push is one step), so a poisoned lock is used
    /// as is.
    pub(crate) fn calls(&self) -> MutexGuard<'_, Vec<(String, Value)>> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The receiver of the tool methods: what `#[tool_router]` builds its routes
/// on. Kept private so that the generated tool metadata functions do not
/// become part of the crate's API.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub(crate) state: Arc<State>,
}

/// Arguments of the tools that take one path.
#[derive(Debug, Deserialize, JsonSchema)]
struct PathArguments {
    /// A path inside the allowed directory, absolute or relative to it.
    path: String,
}

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
struct WriteFileArguments {
    /// A path inside the allowed directory, absolute or relative to it.
    path: String,
    /// The complete new content of the file.
    content: String,
}

/// Arguments of the tools that take no argument.
#[derive(Debug, Deserialize, JsonSchema)]
struct NoArguments {}

/// Arguments of the tools that take one text.
#[derive(Debug, Deserialize, JsonSchema)]
struct TextArguments {
    /// The text.
    text: String,
}

/// Arguments of `delete_record`.
#[derive(Debug, Deserialize, JsonSchema)]
struct DeleteRecordArguments {
    /// The identifier of the record to delete.
    id: String,
}

/// Arguments of `set_flag`.
#[derive(Debug, Deserialize, JsonSchema)]
struct SetFlagArguments {
    /// The flag's name.
    name: String,
    /// The flag's new value.
    value: bool,
}

/// Arguments of `web_lookup`.
#[derive(Debug, Deserialize, JsonSchema)]
struct WebLookupArguments {
    /// What to look up.
    query: String,
}

/// Arguments of `fail`.
#[derive(Debug, Deserialize, JsonSchema)]
struct FailArguments {
    /// The error message the tool reports.
    message: String,
}

/// Arguments of `slow`.
#[derive(Debug, Deserialize, JsonSchema)]
struct SlowArguments {
    /// How long to sleep, in milliseconds.
    millis: u64,
}

/// The output schema of the filesystem tools, as the reference server
/// declares it: `{"content": string}`.
fn content_output_schema() -> Arc<JsonObject> {
    object_schema(json!({
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
    }))
}

/// The output schema of `stats`.
fn stats_output_schema() -> Arc<JsonObject> {
    object_schema(json!({
        "type": "object",
        "properties": {
            "files": {"type": "integer", "minimum": 0},
            "calls": {"type": "integer", "minimum": 0},
        },
        "required": ["files", "calls"],
    }))
}

/// The output schema of `structured_only`.
fn structured_only_output_schema() -> Arc<JsonObject> {
    object_schema(json!({
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }))
}

fn object_schema(schema: Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(object) => Arc::new(object),
        // The callers above only pass object literals.
        _ => Arc::new(JsonObject::new()),
    }
}

/// A successful filesystem tool result: the text, and the same text as
/// `structuredContent.content`, as the reference server answers.
fn text_with_structured_content(text: String) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
    result.structured_content = Some(json!({ "content": text }));
    result
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The tool error for a path that cannot be used, with the reference
/// server's wording for a path outside the root.
fn refused(requested: &str, refusal: PathRefused) -> CallToolResult {
    match refusal {
        PathRefused::OutsideRoot => tool_error(format!(
            "Access denied - path outside allowed directories: {requested}"
        )),
        PathRefused::Io(error) => tool_error(format!("Cannot resolve {requested}: {error}")),
    }
}

impl Tools {
    fn root(&self) -> &Path {
        &self.state.root
    }

    /// The path inside the root, or the refusal to answer with (boxed: a
    /// tool result is large beside a path).
    fn resolve(&self, requested: &str) -> Result<PathBuf, Box<CallToolResult>> {
        confine::resolve(self.root(), requested)
            .map_err(|refusal| Box::new(refused(requested, refusal)))
    }
}

#[tool_router(router = tool_router, vis = "pub(crate)")]
impl Tools {
    /// Read the complete contents of a file from the file system as text.
    /// Only works within allowed directories.
    #[tool(
        title = "Read Text File",
        output_schema = content_output_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_text_file(
        &self,
        Parameters(PathArguments { path }): Parameters<PathArguments>,
    ) -> CallToolResult {
        let resolved = match self.resolve(&path) {
            Ok(resolved) => resolved,
            Err(refusal) => return *refusal,
        };
        match tokio::fs::read_to_string(&resolved).await {
            Ok(text) => text_with_structured_content(text),
            Err(error) => tool_error(format!("Cannot read {path}: {error}")),
        }
    }

    /// Get a listing of all files and directories in a specified path, with
    /// [FILE] and [DIR] prefixes, sorted by name. Only works within allowed
    /// directories.
    #[tool(
        title = "List Directory",
        output_schema = content_output_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_directory(
        &self,
        Parameters(PathArguments { path }): Parameters<PathArguments>,
    ) -> CallToolResult {
        let resolved = match self.resolve(&path) {
            Ok(resolved) => resolved,
            Err(refusal) => return *refusal,
        };
        match list(&resolved).await {
            Ok(lines) => text_with_structured_content(lines),
            Err(error) => tool_error(format!("Cannot list {path}: {error}")),
        }
    }

    /// Create a new file or completely overwrite an existing file with new
    /// content. Only works within allowed directories.
    #[tool(
        title = "Write File",
        output_schema = content_output_schema(),
        annotations(
            read_only_hint = false,
            idempotent_hint = true,
            destructive_hint = true,
            open_world_hint = false
        )
    )]
    async fn write_file(
        &self,
        Parameters(WriteFileArguments { path, content }): Parameters<WriteFileArguments>,
    ) -> CallToolResult {
        let resolved = match self.resolve(&path) {
            Ok(resolved) => resolved,
            Err(refusal) => return *refusal,
        };
        match tokio::fs::write(&resolved, content).await {
            Ok(()) => text_with_structured_content(format!("Successfully wrote to {path}")),
            Err(error) => tool_error(format!("Cannot write {path}: {error}")),
        }
    }

    /// Returns the list of directories this server is allowed to access.
    #[tool(
        title = "List Allowed Directories",
        output_schema = content_output_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_allowed_directories(
        &self,
        Parameters(NoArguments {}): Parameters<NoArguments>,
    ) -> CallToolResult {
        text_with_structured_content(format!("Allowed directories:\n{}", self.root().display()))
    }

    /// Returns the text it is given.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn echo(&self, Parameters(TextArguments { text }): Parameters<TextArguments>) -> String {
        text
    }

    /// Returns the `_meta` of its `tools/call` request, as a JSON object
    /// (`{}` when the request carried none): what a client sent beside the
    /// arguments (an idempotency key, a progress token).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn echo_meta(
        &self,
        Parameters(NoArguments {}): Parameters<NoArguments>,
        meta: RequestMetaObject,
    ) -> String {
        Value::Object(meta.0.0).to_string()
    }

    /// Returns the text it is given; declares no annotations at all.
    #[tool]
    async fn plain(&self, Parameters(TextArguments { text }): Parameters<TextArguments>) -> String {
        text
    }

    /// Deletes a record (nothing is really deleted): a destructive tool.
    #[tool(annotations(read_only_hint = false, destructive_hint = true))]
    async fn delete_record(
        &self,
        Parameters(DeleteRecordArguments { id }): Parameters<DeleteRecordArguments>,
    ) -> String {
        format!("deleted record {id}")
    }

    /// Sets a flag (nothing is really stored): a non-destructive, idempotent
    /// write.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn set_flag(
        &self,
        Parameters(SetFlagArguments { name, value }): Parameters<SetFlagArguments>,
    ) -> String {
        format!("flag {name} = {value}")
    }

    /// Looks something up on the web (the answer is canned): a read-only
    /// tool of the open world.
    #[tool(
        title = "Web Lookup",
        annotations(title = "Web Lookup", read_only_hint = true, open_world_hint = true)
    )]
    async fn web_lookup(
        &self,
        Parameters(WebLookupArguments { query }): Parameters<WebLookupArguments>,
    ) -> String {
        format!("results for {query}: nothing found")
    }

    /// Always fails: a tool error result carrying the given message.
    #[tool]
    async fn fail(
        &self,
        Parameters(FailArguments { message }): Parameters<FailArguments>,
    ) -> CallToolResult {
        tool_error(message)
    }

    /// Sleeps for the given number of milliseconds, then says so.
    #[tool]
    async fn slow(
        &self,
        Parameters(SlowArguments { millis }): Parameters<SlowArguments>,
    ) -> String {
        tokio::time::sleep(Duration::from_millis(millis)).await;
        format!("slept {millis} ms")
    }

    /// Counts the files directly in the root and the tool calls received so
    /// far (this one included), as structured content and as text.
    #[tool(output_schema = stats_output_schema())]
    async fn stats(&self, Parameters(NoArguments {}): Parameters<NoArguments>) -> CallToolResult {
        let calls = self.state.calls().len();
        match count_files(self.root()).await {
            Ok(files) => CallToolResult::structured(json!({ "files": files, "calls": calls })),
            Err(error) => tool_error(format!("Cannot list {}: {error}", self.root().display())),
        }
    }

    /// Answers with structured content only, and an empty content list.
    #[tool(output_schema = structured_only_output_schema())]
    async fn structured_only(
        &self,
        Parameters(NoArguments {}): Parameters<NoArguments>,
    ) -> CallToolResult {
        let mut result = CallToolResult::structured(json!({ "answer": 42 }));
        result.content.clear();
        result
    }

    /// Answers with an image, an embedded text resource and a resource link.
    #[tool]
    async fn picture(&self, Parameters(NoArguments {}): Parameters<NoArguments>) -> CallToolResult {
        let link = Resource::new("file:///pictures/pixel.png", "pixel.png");
        CallToolResult::success(vec![
            ContentBlock::image(TINY_PNG_BASE64, "image/png"),
            ContentBlock::embedded_text("file:///pictures/caption.txt", "a transparent pixel"),
            ContentBlock::resource_link(link),
        ])
    }
}

/// The reference server's listing: `[DIR] name` or `[FILE] name`, one a
/// line; sorted by name here, so that the answer does not depend on the
/// order the filesystem returns.
async fn list(directory: &Path) -> std::io::Result<String> {
    let mut entries = tokio::fs::read_dir(directory).await?;
    let mut lines = Vec::new();
    while let Some(entry) = entries.next_entry().await? {
        let kind = if entry.file_type().await?.is_dir() {
            "[DIR]"
        } else {
            "[FILE]"
        };
        lines.push((entry.file_name().to_string_lossy().into_owned(), kind));
    }
    lines.sort();
    Ok(lines
        .into_iter()
        .map(|(name, kind)| format!("{kind} {name}"))
        .collect::<Vec<_>>()
        .join("\n"))
}

async fn count_files(directory: &Path) -> std::io::Result<usize> {
    let mut entries = tokio::fs::read_dir(directory).await?;
    let mut files = 0;
    while let Some(entry) = entries.next_entry().await? {
        if entry.file_type().await?.is_file() {
            files += 1;
        }
    }
    Ok(files)
}
