//! Resources, prompts and completions of every upstream, under the gateway's names: listings
//! merged (a server that is down or offers none is left out), reads, prompts and completions
//! routed to the server a name or URI leads back to.

use std::sync::Arc;
use toolwire_types::Method as _;
use toolwire_types::methods::method as mcp;

use serde_json::{Value, json};
use toolwire::types::methods::method;
use toolwire::types::{CompleteParams, ReadResourceParams};
use toolwire::{Client, ServerCapabilities};
use toolwire_host::HostError;
use toolwire_server::{Answer, RpcError};
use toolwire_types::Cacheable;
use toolwire_types::error::code;

use crate::{Gateway, relayed, upstream_error, uris};

/// Which listing a merge is for.
#[derive(Clone, Copy)]
pub(crate) enum Listing {
    Resources,
    ResourceTemplates,
    Prompts,
}

impl Listing {
    /// The member of the result that holds the items.
    fn key(self) -> &'static str {
        match self {
            Self::Resources => "resources",
            Self::ResourceTemplates => "resourceTemplates",
            Self::Prompts => "prompts",
        }
    }

    fn offered(self, capabilities: &ServerCapabilities) -> bool {
        match self {
            Self::Resources | Self::ResourceTemplates => capabilities.resources.is_some(),
            Self::Prompts => capabilities.prompts.is_some(),
        }
    }

    /// One page `client` lists after `cursor`: its items as JSON, the next cursor, and how
    /// long it may be kept.
    async fn page(
        self,
        client: &Client,
        cursor: Option<String>,
    ) -> Result<(Value, Option<String>, Freshness), toolwire::Error> {
        Ok(match self {
            Self::Resources => {
                let page = client.list_resources(cursor).await?;
                (
                    json!(page.resources),
                    page.next_cursor.clone(),
                    Freshness::of(&page),
                )
            }
            Self::ResourceTemplates => {
                let page = client.list_resource_templates(cursor).await?;
                let fresh = Freshness::of(&page);
                (json!(page.resource_templates), page.next_cursor, fresh)
            }
            Self::Prompts => {
                let page = client.list_prompts(cursor).await?;
                (
                    json!(page.prompts),
                    page.next_cursor.clone(),
                    Freshness::of(&page),
                )
            }
        })
    }

    /// Every item `client` lists, as JSON (at most [`MAX_PAGES`] pages; a cursor given before
    /// ends the walk), and how long the whole may be kept.
    async fn fetch(self, client: &Client) -> Result<(Vec<Value>, Freshness), toolwire::Error> {
        let (mut all, mut fresh, mut cursor) = (Vec::new(), Freshness::FOREVER, None);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..MAX_PAGES {
            let (items, next, page) = self.page(client, cursor.take()).await?;
            fresh = fresh.and(page);
            if let Value::Array(items) = items {
                all.extend(items);
            }
            match next {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                _ => break,
            }
        }
        Ok((all, fresh))
    }
}

/// The most pages of one upstream's listing the gateway walks.
const MAX_PAGES: usize = 1_000;

/// How long a merged answer may be kept (SEP-2549): the least `ttlMs` of the pages it was
/// made of, and shared across callers (`public`) only if every page was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Freshness {
    ttl_ms: u64,
    public: bool,
}

impl Freshness {
    /// Nothing merged yet.
    const FOREVER: Self = Self {
        ttl_ms: u64::MAX,
        public: true,
    };

    /// A page's hints (absent: not to be kept, and private).
    fn of(page: &impl Cacheable) -> Self {
        Self {
            ttl_ms: page.ttl_ms(),
            public: page.is_public(),
        }
    }

    fn and(self, other: Self) -> Self {
        Self {
            ttl_ms: self.ttl_ms.min(other.ttl_ms),
            public: self.public && other.public,
        }
    }

    /// Writes itself into a 2026-07-28 result (`FOREVER`, from no page at all, is 0).
    fn stamp(self, result: &mut Value) {
        let ttl = if self == Self::FOREVER {
            0
        } else {
            self.ttl_ms
        };
        result["ttlMs"] = json!(ttl);
        result["cacheScope"] = json!(if self.public && ttl > 0 {
            "public"
        } else {
            "private"
        });
    }
}

/// A JSON-RPC error for a name or URI no upstream has.
fn unknown(what: &str, name: &str) -> RpcError {
    RpcError::new(code::INVALID_PARAMS, format!("Unknown {what}: {name}"))
}

impl Gateway {
    /// The upstreams that run and offer `listing`, with their clients, in the host's order.
    fn offering(&self, listing: Listing) -> Vec<(Arc<str>, Client)> {
        self.host
            .servers()
            .into_iter()
            .filter_map(|server| {
                let client = self.host.client(&server).ok()?;
                let offers = client
                    .server_capabilities()
                    .is_some_and(|c| listing.offered(&c));
                offers.then_some((server, client))
            })
            .collect()
    }

    /// One listing, merged: each upstream's items under the gateway's names, in the host's
    /// order of servers; an upstream that fails to list is left out (and logged).
    pub(crate) async fn merged(&self, listing: Listing) -> Answer {
        let upstreams = self.offering(listing);
        let fetched = futures_util::future::join_all(
            upstreams
                .iter()
                .map(|(_, client)| async move { listing.fetch(client).await }),
        )
        .await;
        let separator = self.host.separator();
        let mut items = Vec::new();
        let mut fresh = Freshness::FOREVER;
        for ((server, _), result) in upstreams.iter().zip(fetched) {
            let mut listed = match result {
                Ok((listed, kept)) => {
                    fresh = fresh.and(kept);
                    listed
                }
                Err(error) => {
                    tracing::warn!(%server, listing = listing.key(), error = %toolwire::ErrorChain(&error), "an upstream's listing is left out");
                    continue;
                }
            };
            for item in &mut listed {
                match listing {
                    Listing::Resources => rename_uri(item, "uri", server, separator),
                    Listing::ResourceTemplates => {
                        rename_uri(item, "uriTemplate", server, separator);
                    }
                    Listing::Prompts => {
                        if let Some(name) = item["name"].as_str() {
                            item["name"] = json!(self.host.name_of(server, name));
                        }
                    }
                }
            }
            items.extend(listed);
        }
        let mut result = json!({ listing.key(): items });
        fresh.stamp(&mut result);
        Ok(result)
    }

    /// The server and its own URI behind a URI the gateway gave out.
    pub(crate) fn resource_route(&self, uri: &str) -> Result<(Arc<str>, Client, String), RpcError> {
        let (server, original) =
            uris::inward(uri, self.host.separator()).ok_or_else(|| unknown("resource", uri))?;
        let client = self.host.client(&server).map_err(|e| match e {
            HostError::UnknownServer(_) => unknown("resource", uri),
            other => upstream_error(&other),
        })?;
        Ok((server.into(), client, original))
    }

    /// `resources/read`, routed; the contents' URIs renamed back.
    pub(crate) async fn read(&self, params: ReadResourceParams) -> Answer {
        let (server, client, original) = self.resource_route(&params.uri)?;
        self.own_credentials_only(&server, mcp::ReadResource::NAME)?;
        let result = client
            .read_resource(&original)
            .await
            .map_err(|error| called(&server, error))?;
        let mut result = serde_json::to_value(result)
            .map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))?;
        let separator = self.host.separator();
        if let Some(contents) = result["contents"].as_array_mut() {
            for part in contents {
                rename_uri(part, "uri", &server, separator);
            }
        }
        Ok(result)
    }

    /// The server and its own name for a prompt the gateway named: split at the separator,
    /// else (provider-safe short forms) found by listing.
    async fn prompt_route(&self, name: &str) -> Result<(Arc<str>, Client, String), RpcError> {
        if let Some((server, own)) = name.split_once(self.host.separator())
            && self.host.name_of(server, own) == name
            && let Ok(client) = self.host.client(server)
        {
            return Ok((server.into(), client, own.to_owned()));
        }
        for (server, client) in self.offering(Listing::Prompts) {
            let Ok(prompts) = client.list_all_prompts().await else {
                continue;
            };
            if let Some(prompt) = prompts
                .iter()
                .find(|p| self.host.name_of(&server, &p.name) == name)
            {
                let own = prompt.name.clone();
                return Ok((server, client, own));
            }
        }
        Err(unknown("prompt", name))
    }

    /// `prompts/get`, routed.
    pub(crate) async fn prompt(&self, params: &Value) -> Answer {
        let name = params["name"].as_str().unwrap_or("");
        let (server, client, own) = self.prompt_route(name).await?;
        self.own_credentials_only(&server, mcp::GetPrompt::NAME)?;
        let arguments: Vec<(String, String)> = params["arguments"]
            .as_object()
            .map(|args| {
                args.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let result = client
            .get_prompt(&own, arguments)
            .await
            .map_err(|error| called(&server, error))?;
        serde_json::to_value(result).map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))
    }

    /// `completion/complete`, routed by its reference (a prompt's name or a template's URI).
    pub(crate) async fn complete(&self, mut params: CompleteParams) -> Answer {
        // The request upstream carries its own envelope.
        params.meta = None;
        let (server, client) = match (&params.reference.name, &params.reference.uri) {
            (Some(name), _) if params.reference.kind == "ref/prompt" => {
                let (server, client, own) = self.prompt_route(name).await?;
                params.reference.name = Some(own);
                (server, client)
            }
            (_, Some(uri)) if params.reference.kind == "ref/resource" => {
                let (server, client, original) = self.resource_route(uri)?;
                params.reference.uri = Some(original);
                (server, client)
            }
            _ => {
                return Err(RpcError::new(
                    code::INVALID_PARAMS,
                    format!("Unknown completion reference {}", params.reference.kind),
                ));
            }
        };
        self.own_credentials_only(&server, mcp::Complete::NAME)?;
        let result = client
            .request::<method::Complete>(params)
            .await
            .map_err(|error| called(&server, error))?;
        serde_json::to_value(result).map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))
    }
}

impl Gateway {
    /// Refuses `method` for `server` when its calls carry each caller's own credentials
    /// (per-user sign-in, pass-through, exchange): the gateway's client of an upstream sends
    /// the caller's credentials with `tools/call` only, and anything else would go as the
    /// entry's own identity (the operator's), reading what that identity may for every
    /// caller.
    pub(crate) fn own_credentials_only(&self, server: &str, method: &str) -> Result<(), RpcError> {
        if self
            .access
            .as_ref()
            .is_some_and(|a| a.calls_as_caller(server))
        {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "server `{server}` is called with each caller's own credentials, which the gateway sends with tools/call only: {method} is not relayed to it (it would run as the gateway's own identity)"
                ),
            ));
        }
        Ok(())
    }
}

/// An upstream's error as the downstream client hears it.
fn called(server: &str, error: toolwire::Error) -> RpcError {
    relayed(server, &error)
}

/// `item[key]`, a URI of `server`'s, under the gateway's name.
pub(crate) fn rename_uri(item: &mut Value, key: &str, server: &str, separator: &str) {
    if let Some(uri) = item[key].as_str()
        && let Some(renamed) = uris::outward(server, separator, uri)
    {
        item[key] = json!(renamed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(ttl: Option<i64>, scope: Option<&str>) -> Freshness {
        let hints: toolwire_types::CacheHints =
            serde_json::from_value(json!({"ttlMs": ttl, "cacheScope": scope})).unwrap();
        Freshness::of(&hints)
    }

    fn stamped(fresh: Freshness) -> (Value, Value) {
        let mut result = json!({});
        fresh.stamp(&mut result);
        (result["ttlMs"].clone(), result["cacheScope"].clone())
    }

    #[test]
    fn a_merge_keeps_the_least_ttl_and_is_public_only_if_every_page_is() {
        let all_public = page(Some(60_000), Some("public")).and(page(Some(5_000), Some("public")));
        assert_eq!(stamped(all_public), (json!(5_000), json!("public")));
        let one_private = all_public.and(page(Some(90_000), Some("private")));
        assert_eq!(stamped(one_private), (json!(5_000), json!("private")));
        // A page with no hints (a legacy upstream) is not to be kept at all.
        let one_legacy = all_public.and(page(None, None));
        assert_eq!(stamped(one_legacy), (json!(0), json!("private")));
        // Nothing merged: nothing to keep.
        assert_eq!(stamped(Freshness::FOREVER), (json!(0), json!("private")));
    }
}
