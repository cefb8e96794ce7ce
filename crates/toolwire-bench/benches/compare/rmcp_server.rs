//! rmcp's server with the bench's tool: over Streamable HTTP for the `rmcp-server-*-seq`
//! HTTP cases, over stdio for `rmcp-server-stdio-seq`.

use std::sync::Arc;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};
use serde_json::json;

use super::{Error, Server, TOOL, serve_self};

#[derive(Clone)]
struct Sql;

fn tool() -> Tool {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "query": {"type": "string"}
    }, "required": ["region", "query"]});
    let schema = match schema {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    Tool::new(TOOL, "runs a query in a region", Arc::new(schema))
}

impl ServerHandler for Sql {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    /// rmcp checks `Mcp-Param-*` headers against the body with this definition.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == TOOL).then(tool)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let arg = |name: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let text = format!("region={} rows=1 query={}", arg("region"), arg("query"));
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serves on a free loopback port until killed; prints the URL first, on stderr.
pub(super) fn run() -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None);
        let service: StreamableHttpService<Sql, NeverSessionManager> =
            StreamableHttpService::new(|| Ok(Sql), Default::default(), config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        eprintln!(
            "rmcp server listening on http://{}/mcp",
            listener.local_addr()?
        );
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// Starts it: this binary with `--serve-rmcp`.
pub(super) fn start() -> Result<Server, Error> {
    serve_self(&["--serve-rmcp"])
}

/// Serves over stdin and stdout until stdin closes: rmcp's stdio server as its documentation
/// recommends for pipes (`stdio_pipes`: through the reactor, not tokio's blocking pool), on the
/// runtime `#[tokio::main]` would give it (a worker per core).
pub(super) fn run_stdio() -> Result<(), Error> {
    use rmcp::ServiceExt as _;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let service = Sql.serve(rmcp::transport::stdio_pipes()).await?;
        service.waiting().await?;
        Ok(())
    })
}
