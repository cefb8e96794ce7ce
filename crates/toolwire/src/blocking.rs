//! A blocking client, for callers without an async runtime.
//!
//! It owns a small tokio runtime (one worker thread, so the connection keeps reading between
//! calls) and blocks on the async [`crate::Client`]. Calling it from inside an async runtime
//! is an error ([`UsageError::BlockingInAsync`](crate::UsageError::BlockingInAsync)), not a panic. It is set up with the same
//! [`ClientBuilder`] as the async client:
//!
//! ```no_run
//! use toolwire::{Client, StdioConfig};
//!
//! let client = toolwire::blocking::Client::connect_stdio(
//!     Client::builder("my-agent", "1.0"),
//!     StdioConfig::new("my-mcp-server", ["--stdio"]),
//! )?;
//! let tools = client.list_all_tools()?;
//! # Ok::<(), toolwire::Error>(())
//! ```

use serde_json::Value;
use toolwire_cache::{Commit, ListOutcome, ToolSnapshot};
use toolwire_http::HttpTransportBuilder;
use toolwire_session::Negotiated;
use toolwire_stdio::StdioConfig;
use toolwire_types::{CallToolResult, Tool};

use std::sync::Arc;

use crate::{CallOptions, ClientBuilder, Error};

/// The blocking face of [`crate::Client`].
#[derive(Debug)]
pub struct Client {
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    inner: crate::Client,
}

fn not_in_async() -> Result<(), Error> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => Err(Error::Usage(crate::UsageError::BlockingInAsync)),
        Err(_) => Ok(()),
    }
}

impl Client {
    /// Starts the server as a child process and connects to it over stdio
    /// ([`ClientBuilder::connect_stdio`]).
    pub fn connect_stdio(builder: ClientBuilder, stdio: StdioConfig) -> Result<Self, Error> {
        Self::start(|| builder.connect_stdio(stdio))
    }

    /// Connects over Streamable HTTP ([`ClientBuilder::connect_http`]).
    pub fn connect_http(builder: ClientBuilder, http: HttpTransportBuilder) -> Result<Self, Error> {
        Self::start(|| builder.connect_http(http))
    }

    /// Makes the runtime, and the async client inside it.
    fn start(connect: impl FnOnce() -> Result<crate::Client, Error>) -> Result<Self, Error> {
        not_in_async()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolwire-blocking")
            .enable_all()
            .build()
            .map_err(|e| {
                Error::Connection(crate::ConnectionError::Transport(Arc::new(
                    crate::TransportError::Io(e),
                )))
            })?;
        let inner = runtime.block_on(async { connect() })?;
        Ok(Self {
            runtime: Some(runtime),
            inner,
        })
    }

    fn block_on<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        not_in_async()?;
        match &self.runtime {
            Some(runtime) => runtime.block_on(f),
            None => Err(Error::Closed),
        }
    }

    /// See [`crate::Client::ready`].
    pub fn ready(&self) -> Result<Arc<Negotiated>, Error> {
        self.block_on(self.inner.ready())
    }

    /// See [`crate::Client::list_tools`].
    pub fn list_tools(&self) -> Result<ListOutcome, Error> {
        self.block_on(self.inner.list_tools())
    }

    /// See [`crate::Client::list_all_tools`].
    pub fn list_all_tools(&self) -> Result<Vec<Arc<Tool>>, Error> {
        self.block_on(self.inner.list_all_tools())
    }

    /// See [`crate::Client::call_tool`].
    pub fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.block_on(self.inner.call_tool(name, arguments))
    }

    /// See [`crate::Client::call_tool_with`].
    pub fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        self.block_on(self.inner.call_tool_with(name, arguments, options))
    }

    /// See [`crate::Client::tools`].
    pub fn tools(&self) -> Arc<ToolSnapshot> {
        self.inner.tools()
    }

    /// See [`crate::Client::add_known_tools`].
    pub fn add_known_tools(&self, tools: impl IntoIterator<Item = Tool>) -> Result<Commit, Error> {
        self.inner.add_known_tools(tools)
    }

    /// See [`crate::Client::disconnect`] (reusable: the next call connects again).
    pub fn disconnect(&self) -> Result<(), Error> {
        self.block_on(async {
            self.inner.disconnect().await;
            Ok(())
        })
    }

    /// See [`crate::Client::close`] (final).
    pub fn close(&self) -> Result<(), Error> {
        self.block_on(async {
            self.inner.close().await;
            Ok(())
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // `shutdown_background` is allowed anywhere, even inside another runtime, where
        // dropping a runtime would panic. The child process is killed with its transport.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
