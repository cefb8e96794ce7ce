//! MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865, stable 2026-01-26): a tool names an
//! interactive HTML view (`_meta.ui.resourceUri`, a `ui://` resource), which a host reads with
//! `resources/read` and renders in a sandboxed frame under the Content Security Policy and
//! permissions the resource's `_meta.ui` declares.
//!
//! A client declares the extension under `capabilities.extensions` with the MIME types it
//! renders ([`ui_extension_settings`]); servers should offer their UI tools only then.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::JsonObject;
use crate::{ResourceContents, Tool};

/// The extension's identifier under `capabilities.extensions`.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an MCP App's HTML view: the only one the stable extension defines.
pub const APP_HTML_MIME: &str = "text/html;profile=mcp-app";

/// What a client declares under `extensions["io.modelcontextprotocol/ui"]`: the MIME types it
/// renders (`mimeTypes`, required).
pub fn ui_extension_settings() -> Value {
    serde_json::json!({ "mimeTypes": [APP_HTML_MIME] })
}

/// A tool's `_meta.ui`: the view that renders its results, and who may call it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiToolMeta {
    /// The `ui://` resource holding the view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_uri: Option<String>,
    /// `"model"` (the agent may see and call it) and/or `"app"` (views of the same server may
    /// call it); absent means both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<Vec<String>>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl UiToolMeta {
    /// Whether the agent may see and call the tool: a host leaves it out of the model's tool
    /// list otherwise.
    pub fn model_visible(&self) -> bool {
        self.visible_to("model")
    }

    /// Whether a view of the same server may call the tool.
    pub fn app_visible(&self) -> bool {
        self.visible_to("app")
    }

    fn visible_to(&self, who: &str) -> bool {
        self.visibility
            .as_ref()
            .is_none_or(|v| v.iter().any(|w| w == who))
    }
}

impl Tool {
    /// The tool's MCP Apps metadata: `_meta.ui`, or the deprecated flat
    /// `_meta["ui/resourceUri"]` when that is all there is. `None` when it has neither (or
    /// `_meta.ui` is not an object of the documented shape).
    pub fn ui(&self) -> Option<UiToolMeta> {
        let meta = self.meta.as_ref()?;
        if let Some(ui) = meta.extra.get("ui") {
            return serde_json::from_value(ui.clone()).ok();
        }
        let uri = meta.extra.get("ui/resourceUri")?.as_str()?;
        Some(UiToolMeta {
            resource_uri: Some(uri.to_owned()),
            ..UiToolMeta::default()
        })
    }
}

/// Origins a view may reach, by kind; each absent or empty list allows none (the host's
/// restrictive default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiCsp {
    /// `connect-src`: fetch, XHR, WebSocket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_domains: Option<Vec<String>>,
    /// `img-src`, `script-src`, `style-src`, `font-src`, `media-src`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_domains: Option<Vec<String>>,
    /// `frame-src`: nested frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_domains: Option<Vec<String>>,
    /// `base-uri`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_uri_domains: Option<Vec<String>>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Browser capabilities a view asks the host for (each present as `{}` when asked); a host
/// may refuse any.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiPermissions {
    /// `camera`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<JsonObject>,
    /// `microphone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microphone: Option<JsonObject>,
    /// `geolocation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geolocation: Option<JsonObject>,
    /// `clipboard-write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clipboard_write: Option<JsonObject>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A view resource's `_meta.ui`: how the host must sandbox it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiResourceMeta {
    /// The Content Security Policy's allowed origins; absent: the restrictive default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csp: Option<UiCsp>,
    /// The browser capabilities asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<UiPermissions>,
    /// A dedicated sandbox origin (its format is the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Whether the host should draw a border and background.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefers_border: Option<bool>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ResourceContents {
    /// Whether these contents are an MCP App view by their MIME type
    /// ([`APP_HTML_MIME`], compared without case and spaces).
    pub fn is_app_html(&self) -> bool {
        let mime = match self {
            Self::Text(t) => t.mime_type.as_deref(),
            Self::Blob(b) => b.mime_type.as_deref(),
        };
        mime.is_some_and(|m| {
            let normal: String = m
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_ascii_lowercase();
            normal == APP_HTML_MIME
        })
    }

    /// The contents' MIME type, as sent.
    pub fn mime_type(&self) -> Option<&str> {
        match self {
            Self::Text(t) => t.mime_type.as_deref(),
            Self::Blob(b) => b.mime_type.as_deref(),
        }
    }

    /// The view's `_meta.ui` (default when absent; `None` when present but not of the
    /// documented shape).
    pub fn ui_meta(&self) -> Option<UiResourceMeta> {
        let meta = match self {
            Self::Text(t) => t.meta.as_ref(),
            Self::Blob(b) => b.meta.as_ref(),
        };
        match meta.and_then(|m| m.extra.get("ui")) {
            None => Some(UiResourceMeta::default()),
            Some(ui) => serde_json::from_value(ui.clone()).ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(meta: Value) -> Tool {
        serde_json::from_value(
            json!({"name": "t", "inputSchema": {"type": "object"}, "_meta": meta}),
        )
        .unwrap()
    }

    #[test]
    fn a_tools_view_is_read_from_meta_ui_or_the_deprecated_flat_key() {
        let nested =
            tool(json!({"ui": {"resourceUri": "ui://a/view.html", "visibility": ["app"]}}));
        let ui = nested.ui().unwrap_or_default();
        assert_eq!(ui.resource_uri.as_deref(), Some("ui://a/view.html"));
        assert!(ui.app_visible() && !ui.model_visible());
        let flat = tool(json!({"ui/resourceUri": "ui://b/old.html"}));
        let ui = flat.ui().unwrap_or_default();
        assert_eq!(ui.resource_uri.as_deref(), Some("ui://b/old.html"));
        assert!(ui.app_visible() && ui.model_visible(), "both by default");
        assert_eq!(tool(json!({"other": 1})).ui(), None);
        assert_eq!(tool(json!({"ui": "not an object"})).ui(), None);
    }

    #[test]
    fn a_views_contents_say_their_profile_and_sandbox() {
        let contents: ResourceContents = serde_json::from_value(json!({
            "uri": "ui://a/view.html", "mimeType": "text/html; profile=MCP-App", "text": "<!DOCTYPE html>",
            "_meta": {"ui": {"csp": {"connectDomains": ["https://api.example.com"]},
                "permissions": {"clipboardWrite": {}}, "prefersBorder": true}}}))
        .unwrap();
        assert!(contents.is_app_html());
        let ui = contents.ui_meta().unwrap_or_default();
        let csp = ui.csp.unwrap_or_default();
        assert_eq!(
            csp.connect_domains.unwrap_or_default(),
            ["https://api.example.com"]
        );
        assert!(ui.permissions.unwrap_or_default().clipboard_write.is_some());
        assert_eq!(ui.prefers_border, Some(true));
        let plain: ResourceContents =
            serde_json::from_value(json!({"uri": "ui://x", "mimeType": "text/html", "text": ""}))
                .unwrap();
        assert!(!plain.is_app_html());
        assert_eq!(plain.ui_meta(), Some(UiResourceMeta::default()));
    }
}
