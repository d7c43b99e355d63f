//! The server: its state, shared by every clone, and its MCP handler.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, tool::ToolCallContext},
    model::{
        CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde_json::Value;

use crate::tools::{State, Tools};

/// The demo MCP server: filesystem tools confined to a root directory, and
/// fixture tools covering every tool annotation and result kind.
///
/// Clones share the root and the call log, so a test can keep one clone and
/// serve another, then check with [`DemoServer::calls`] which calls the
/// server really received.
///
/// ```no_run
/// # async fn run() -> Result<(), mcp_demo_server::Error> {
/// let server = mcp_demo_server::DemoServer::new("/srv/shared");
/// mcp_demo_server::serve_stdio(server).await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct DemoServer {
    tools: Tools,
    router: Arc<ToolRouter<Tools>>,
}

impl DemoServer {
    /// A server whose filesystem tools are confined to `root`.
    ///
    /// The root is made canonical (absolute, symbolic links resolved) when
    /// it exists, so that the confinement checks compare like with like; a
    /// root that does not exist is kept as given, and every filesystem tool
    /// call then fails with an I/O error.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        let state = State {
            root,
            calls: Mutex::new(Vec::new()),
        };
        Self {
            tools: Tools {
                state: Arc::new(state),
            },
            router: Arc::new(Tools::tool_router()),
        }
    }

    /// The directory the filesystem tools are confined to, canonical if it
    /// existed when the server was made.
    pub fn root(&self) -> &std::path::Path {
        &self.tools.state.root
    }

    /// Every tool call received so far by this server or any of its clones,
    /// in the order their handling began: the tool's name and its arguments
    /// (an empty object when the call carried none). Calls of unknown tools
    /// are included. Requests are handled concurrently, so calls a client
    /// sends without awaiting each answer may be logged in any order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.tools.state.calls().clone()
    }

    /// How many tool calls this server and its clones received so far.
    pub fn call_count(&self) -> usize {
        self.tools.state.calls().len()
    }

    /// The tools this server offers, sorted by name.
    pub fn tools(&self) -> Vec<Tool> {
        self.router.list_all()
    }
}

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "A demo server for tests: filesystem tools confined to one directory, \
                 and fixture tools of every annotation and result kind.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.router.list_all()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.router.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Logged before dispatch, so that `stats` counts itself and a call
        // of an unknown tool is still seen by the tests.
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        self.tools
            .state
            .calls()
            .push((request.name.to_string(), arguments));
        let call = ToolCallContext::new(&self.tools, request, context);
        self.router.call(call).await
    }
}
