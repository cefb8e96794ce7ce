//! MCP Apps: the interactive view a tool names (`_meta.ui.resourceUri`), read and checked.
//!
//! [`crate::ClientBuilder::apps`] declares the extension (servers offer their UI tools only
//! to clients that do); [`crate::Client::app`] reads a tool's `ui://` view with
//! `resources/read`, checks it is `text/html;profile=mcp-app` HTML, and keeps it with the
//! Content Security Policy and permissions of its `_meta.ui` until the tool list changes. The
//! client renders nothing: a host puts the HTML in a sandboxed frame under that policy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use toolwire_types::{ReadResourceResult, ResourceContents, UiResourceMeta, UiToolMeta};

use crate::{Error, ProtocolError};

/// A tool's view, as read and checked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AppView {
    /// The tool that names it.
    pub tool: String,
    /// Its `ui://` URI.
    pub uri: String,
    /// The HTML document.
    pub html: String,
    /// How the host must sandbox it: allowed origins, permissions, domain, border.
    pub meta: UiResourceMeta,
    /// The tool's own UI metadata (its visibility to the model and to views).
    pub tool_meta: UiToolMeta,
}

/// The views read so far, for one generation of the tool snapshot.
#[derive(Debug, Default)]
pub(crate) struct AppCache(Mutex<(u64, HashMap<String, Arc<AppView>>)>);

impl AppCache {
    pub(crate) fn get(&self, generation: u64, tool: &str) -> Option<Arc<AppView>> {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (held.0 == generation)
            .then(|| held.1.get(tool).cloned())
            .flatten()
    }

    pub(crate) fn put(&self, generation: u64, view: Arc<AppView>) {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if held.0 != generation {
            *held = (generation, HashMap::new());
        }
        held.1.insert(view.tool.clone(), view);
    }
}

/// The `ui://` URI a tool's metadata names, checked.
pub(crate) fn view_uri(tool: &str, ui: &UiToolMeta) -> Result<Option<String>, Error> {
    let Some(uri) = ui.resource_uri.clone() else {
        return Ok(None);
    };
    if !uri.starts_with("ui://") {
        return Err(broken(tool, &uri, "the URI is not a ui:// one"));
    }
    Ok(Some(uri))
}

/// The view in `read`'s contents for `uri`, checked against the extension's rules.
pub(crate) fn view(
    tool: &str,
    uri: &str,
    tool_meta: UiToolMeta,
    read: &ReadResourceResult,
) -> Result<AppView, Error> {
    let contents = read
        .contents
        .iter()
        .find(|c| c.uri() == uri)
        .ok_or_else(|| broken(tool, uri, "the server returned no contents for it"))?;
    if !contents.is_app_html() {
        let found = contents.mime_type().unwrap_or("none");
        return Err(broken(
            tool,
            uri,
            &format!(
                "its MIME type is {found:?}, not \"{}\"",
                toolwire_types::APP_HTML_MIME
            ),
        ));
    }
    let html = match contents {
        ResourceContents::Text(t) => t.text.clone(),
        ResourceContents::Blob(b) => base64::engine::general_purpose::STANDARD
            .decode(&b.blob)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| broken(tool, uri, "its blob is not base64 of UTF-8 text"))?,
    };
    let meta = contents
        .ui_meta()
        .ok_or_else(|| broken(tool, uri, "its _meta.ui is not of the documented shape"))?;
    Ok(AppView {
        tool: tool.to_owned(),
        uri: uri.to_owned(),
        html,
        meta,
        tool_meta,
    })
}

fn broken(tool: &str, uri: &str, reason: &str) -> Error {
    Error::Protocol(ProtocolError::App {
        tool: tool.to_owned(),
        uri: uri.to_owned(),
        reason: reason.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(contents: serde_json::Value) -> ReadResourceResult {
        serde_json::from_value(json!({ "contents": [contents] })).unwrap()
    }

    #[test]
    fn a_view_is_checked_for_its_profile_and_decoded() {
        let uri = "ui://s/v.html";
        let ok = view(
            "t",
            uri,
            UiToolMeta::default(),
            &read(json!({"uri": uri, "mimeType": "text/html;profile=mcp-app",
                "blob": base64::engine::general_purpose::STANDARD.encode("<html></html>"),
                "_meta": {"ui": {"domain": "x.example"}}})),
        )
        .unwrap();
        assert_eq!(ok.html, "<html></html>");
        assert_eq!(ok.meta.domain.as_deref(), Some("x.example"));
        for (contents, reason) in [
            (
                json!({"uri": uri, "mimeType": "text/html", "text": "<html>"}),
                "MIME",
            ),
            (
                json!({"uri": "ui://other", "mimeType": "text/html;profile=mcp-app", "text": ""}),
                "no contents",
            ),
            (
                json!({"uri": uri, "mimeType": "text/html;profile=mcp-app", "blob": "%%%"}),
                "base64",
            ),
            (
                json!({"uri": uri, "mimeType": "text/html;profile=mcp-app", "text": "",
                "_meta": {"ui": {"prefersBorder": "yes"}}}),
                "_meta.ui",
            ),
        ] {
            let err = view("t", uri, UiToolMeta::default(), &read(contents)).unwrap_err();
            assert!(err.to_string().contains(reason), "{err}");
            assert!(matches!(err, Error::Protocol(ProtocolError::App { .. })));
        }
        let not_ui = UiToolMeta {
            resource_uri: Some("https://example.com/v.html".into()),
            ..UiToolMeta::default()
        };
        assert!(view_uri("t", &not_ui).is_err());
        assert_eq!(view_uri("t", &UiToolMeta::default()).unwrap(), None);
    }

    #[test]
    fn the_cache_forgets_views_when_the_tools_change() {
        let cache = AppCache::default();
        let v = Arc::new(AppView {
            tool: "t".into(),
            uri: "ui://v".into(),
            html: String::new(),
            meta: UiResourceMeta::default(),
            tool_meta: UiToolMeta::default(),
        });
        cache.put(1, v.clone());
        assert_eq!(cache.get(1, "t"), Some(v));
        assert_eq!(cache.get(2, "t"), None);
        assert_eq!(cache.get(1, "u"), None);
    }
}
