//! Methods by name: a marker type per method that ties its name to its params and result types,
//! and the dispatch enums that do phase two of decoding for each direction.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::DecodeError;
use crate::jsonrpc::decode_params;
use crate::mrtr::{Outcome, decode_outcome, decode_result};

/// A JSON-RPC method: its name and the type of its params (a marker type, `'static`).
pub trait Method: 'static {
    /// The method name on the wire.
    const NAME: &'static str;
    /// The params type (`Clone` and `Send`: a session keeps a copy to send it again on the
    /// next one, or once it is ready).
    type Params: Serialize + DeserializeOwned + Clone + Send + 'static;
}

/// How a client may keep a method's answers (SEP-2549: while their `ttlMs` says, within their
/// `cacheScope`) and which notification makes every kept answer of the method stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// The notification that evicts every kept answer of the method (a list change).
    pub evicted_by: Option<&'static str>,
    /// Kept per resource: `notifications/resources/updated` naming the answer's `uri` evicts
    /// it, and one that names no URI the client can read evicts every answer of the method.
    pub by_uri: bool,
}

impl CachePolicy {
    /// Kept until `notification` says the list changed.
    pub const fn until(notification: &'static str) -> Self {
        Self {
            evicted_by: Some(notification),
            by_uri: false,
        }
    }

    /// Kept until the resource it reads is updated.
    pub const BY_URI: Self = Self {
        evicted_by: None,
        by_uri: true,
    };

    /// Kept for its `ttlMs` alone (and a change of identity, unless public).
    pub const TTL_ONLY: Self = Self {
        evicted_by: None,
        by_uri: false,
    };

    /// Every method's policy, for the questions asked of all of them at once.
    pub const ALL: [Option<Self>; 7] = {
        use method::*;
        [
            ListPrompts::CACHE,
            ListResources::CACHE,
            ListResourceTemplates::CACHE,
            ReadResource::CACHE,
            ListSkills::CACHE,
            GetSkill::CACHE,
            ReadDirectory::CACHE,
        ]
    };

    /// Whether a 2026-07-28 result of `method` carries the SEP-2549 hints (`ttlMs` and
    /// `cacheScope`, both required there): every method whose answers a client may keep,
    /// `tools/list` and `server/discover` among them. A server fills them in where its service
    /// gave none.
    pub fn carries_hints(method: &str) -> bool {
        use method::*;
        [
            Discover::NAME,
            ListTools::NAME,
            ListPrompts::NAME,
            ListResources::NAME,
            ListResourceTemplates::NAME,
            ReadResource::NAME,
            ListSkills::NAME,
            GetSkill::NAME,
            ReadDirectory::NAME,
        ]
        .contains(&method)
    }

    /// Whether `notification` makes some method's kept answers stale (an answer to a request
    /// asked before it must not be kept either).
    pub fn evicts(notification: &str) -> bool {
        Self::ALL
            .iter()
            .flatten()
            .any(|p| p.evicted_by == Some(notification))
    }
}

/// A request method: also has a result type.
pub trait RequestMethod: Method {
    /// The result type.
    type Result: Serialize + DeserializeOwned;
    /// Whether the method may answer `input_required` (MRTR, `2026-07-28`).
    const MAY_REQUIRE_INPUT: bool;
    /// The server capability a legacy server must have declared before a client sends this
    /// (`None`: always allowed, or a request the server sends).
    const CAPABILITY: Option<crate::Capability>;
    /// Whether resending it can do no harm (`ping`, lists, reads): a transport may retry it.
    /// `false` for `tools/call`, whose safety depends on the tool (the session decides).
    const RETRY_SAFE: bool;
    /// Whether a client may keep its answers by their SEP-2549 hints, and what makes them
    /// stale (`None`: never kept; `tools/list` and `server/discover` are kept in their own
    /// ways).
    const CACHE: Option<CachePolicy> = None;

    /// The params member that `Mcp-Name` mirrors (SEP-2243): the tool or prompt name, the
    /// resource URI; `None` for methods without one.
    fn mcp_name(params: &Self::Params) -> Option<&str> {
        let _ = params;
        None
    }

    /// Decodes a raw result of this method; a method that may require input decodes an
    /// [`Outcome`], the others only [`Outcome::Complete`] (anything else is a typed error).
    fn decode_result(raw: &RawValue) -> Result<Outcome<Self::Result>, DecodeError> {
        if Self::MAY_REQUIRE_INPUT {
            decode_outcome(Self::NAME, raw)
        } else {
            decode_result(Self::NAME, raw).map(Outcome::Complete)
        }
    }
}

/// A notification method.
pub trait NotificationMethod: Method {}

/// Marker types, one per method.
pub mod method {
    use super::{Method, NotificationMethod, RequestMethod};
    use crate::*;

    macro_rules! request {
        ($(#[$doc:meta])* $name:ident = $wire:literal, $params:ty => $result:ty, mrtr = $mrtr:literal,
         cap = $cap:expr, retry = $retry:literal $(, mcp_name = $field:ident)? $(, decode = $decode:path)?
         $(, cache = $cache:expr)?) => {
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub enum $name {}
            impl Method for $name {
                const NAME: &'static str = $wire;
                type Params = $params;
            }
            impl RequestMethod for $name {
                type Result = $result;
                const MAY_REQUIRE_INPUT: bool = $mrtr;
                const CAPABILITY: Option<crate::Capability> = $cap;
                const RETRY_SAFE: bool = $retry;
                $(const CACHE: Option<super::CachePolicy> = Some($cache);)?
                $(
                    fn mcp_name(params: &$params) -> Option<&str> {
                        Some(&params.$field)
                    }
                )?
                $(
                    fn decode_result(
                        raw: &serde_json::value::RawValue,
                    ) -> Result<crate::Outcome<$result>, crate::DecodeError> {
                        $decode(raw)
                    }
                )?
            }
        };
    }

    macro_rules! notification {
        ($(#[$doc:meta])* $name:ident = $wire:literal, $params:ty) => {
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub enum $name {}
            impl Method for $name {
                const NAME: &'static str = $wire;
                type Params = $params;
            }
            impl NotificationMethod for $name {}
        };
    }

    use crate::Capability::{Completions, Logging, Prompts, ResourceSubscribe, Resources, Tools};

    request!(/// `initialize` (legacy handshake).
        Initialize = "initialize", InitializeParams => InitializeResult, mrtr = false,
        cap = None, retry = false);
    request!(/// `server/discover` (modern).
        Discover = "server/discover", DiscoverParams => DiscoverResult, mrtr = false,
        cap = None, retry = true);
    request!(/// `ping` (legacy, either direction).
        Ping = "ping", MetaOnlyParams => EmptyResult, mrtr = false,
        cap = None, retry = true);
    request!(/// `tools/list`.
        ListTools = "tools/list", ListParams => ListToolsResult, mrtr = false,
        cap = Some(Tools), retry = true);
    request!(/// `tools/call` (retry safety is per tool: its annotations or the caller's opt-in).
        CallTool = "tools/call", CallToolParams => CallToolResult, mrtr = true,
        cap = Some(Tools), retry = false, mcp_name = name,
        decode = crate::tools::decode_call_tool);
    request!(/// `resources/list`.
        ListResources = "resources/list", ListParams => ListResourcesResult, mrtr = false,
        cap = Some(Resources), retry = true,
        cache = super::CachePolicy::until("notifications/resources/list_changed"));
    request!(/// `resources/templates/list`.
        ListResourceTemplates = "resources/templates/list", ListParams => ListResourceTemplatesResult, mrtr = false,
        cap = Some(Resources), retry = true,
        cache = super::CachePolicy::until("notifications/resources/list_changed"));
    request!(/// `resources/read`.
        ReadResource = "resources/read", ReadResourceParams => ReadResourceResult, mrtr = true,
        cap = Some(Resources), retry = true, mcp_name = uri, cache = super::CachePolicy::BY_URI);
    request!(/// `resources/subscribe` (legacy).
        Subscribe = "resources/subscribe", ResourceUriParams => EmptyResult, mrtr = false,
        cap = Some(ResourceSubscribe), retry = false);
    request!(/// `resources/unsubscribe` (legacy).
        Unsubscribe = "resources/unsubscribe", ResourceUriParams => EmptyResult, mrtr = false,
        cap = Some(ResourceSubscribe), retry = false);
    request!(/// `prompts/list`.
        ListPrompts = "prompts/list", ListParams => ListPromptsResult, mrtr = false,
        cap = Some(Prompts), retry = true,
        cache = super::CachePolicy::until("notifications/prompts/list_changed"));
    request!(/// `prompts/get`.
        GetPrompt = "prompts/get", GetPromptParams => GetPromptResult, mrtr = true,
        cap = Some(Prompts), retry = false, mcp_name = name);
    request!(/// `completion/complete`.
        Complete = "completion/complete", CompleteParams => CompleteResult, mrtr = false,
        cap = Some(Completions), retry = false);
    request!(/// `skills/list` (the skills extension).
        ListSkills = "skills/list", ListParams => ListSkillsResult, mrtr = false,
        cap = Some(crate::Capability::Extension(crate::SKILLS_EXTENSION)), retry = true,
        cache = super::CachePolicy::TTL_ONLY);
    request!(/// `skills/get` (the skills extension).
        GetSkill = "skills/get", GetSkillParams => GetSkillResult, mrtr = false,
        cap = Some(crate::Capability::Extension(crate::SKILLS_EXTENSION)), retry = true,
        cache = super::CachePolicy::TTL_ONLY);
    request!(/// `resources/directory/read` (the skills extension, where the server declares
        /// `directoryRead`).
        ReadDirectory = "resources/directory/read", ReadDirectoryParams => ReadDirectoryResult,
        mrtr = false, cap = Some(crate::Capability::SkillsDirectoryRead), retry = true,
        cache = super::CachePolicy::until("notifications/resources/list_changed"));
    request!(/// `tasks/get` (the tasks extension): the task, with its result once completed.
        GetTask = "tasks/get", TaskParams => Task, mrtr = false,
        cap = Some(crate::Capability::Extension(crate::TASKS_EXTENSION)), retry = true,
        mcp_name = task_id);
    request!(/// `tasks/update` (the tasks extension): answers to a task's input requests.
        UpdateTask = "tasks/update", UpdateTaskParams => EmptyResult, mrtr = false,
        cap = Some(crate::Capability::Extension(crate::TASKS_EXTENSION)), retry = true,
        mcp_name = task_id);
    request!(/// `tasks/cancel` (the tasks extension).
        CancelTask = "tasks/cancel", TaskParams => EmptyResult, mrtr = false,
        cap = Some(crate::Capability::Extension(crate::TASKS_EXTENSION)), retry = true,
        mcp_name = task_id);
    request!(/// `logging/setLevel` (legacy).
        SetLevel = "logging/setLevel", SetLevelParams => EmptyResult, mrtr = false,
        cap = Some(Logging), retry = false);
    request!(/// `subscriptions/listen` (modern): its response stream carries list changes.
        Listen = "subscriptions/listen", ListenParams => EmptyResult, mrtr = false,
        cap = None, retry = true);
    request!(/// `sampling/createMessage` (server to client).
        CreateMessage = "sampling/createMessage", CreateMessageParams => CreateMessageResult, mrtr = false,
        cap = None, retry = false);
    request!(/// `elicitation/create` (server to client).
        Elicit = "elicitation/create", ElicitParams => ElicitResult, mrtr = false,
        cap = None, retry = false);
    request!(/// `roots/list` (server to client).
        ListRoots = "roots/list", MetaOnlyParams => ListRootsResult, mrtr = false,
        cap = None, retry = false);

    notification!(/// `notifications/initialized` (legacy).
        Initialized = "notifications/initialized", MetaOnlyParams);
    notification!(/// `notifications/cancelled`.
        Cancelled = "notifications/cancelled", CancelledParams);
    notification!(/// `notifications/progress`.
        Progress = "notifications/progress", ProgressParams);
    notification!(/// `notifications/message`.
        LoggingMessage = "notifications/message", LoggingMessageParams);
    notification!(/// `notifications/tools/list_changed`.
        ToolsListChanged = "notifications/tools/list_changed", MetaOnlyParams);
    notification!(/// `notifications/prompts/list_changed`.
        PromptsListChanged = "notifications/prompts/list_changed", MetaOnlyParams);
    notification!(/// `notifications/resources/list_changed`.
        ResourcesListChanged = "notifications/resources/list_changed", MetaOnlyParams);
    notification!(/// `notifications/resources/updated`.
        ResourceUpdated = "notifications/resources/updated", ResourceUriParams);
    notification!(/// `notifications/roots/list_changed` (legacy, client to server).
        RootsListChanged = "notifications/roots/list_changed", MetaOnlyParams);
    notification!(/// `notifications/subscriptions/acknowledged` (modern).
        SubscriptionsAcknowledged = "notifications/subscriptions/acknowledged", SubscriptionsAcknowledgedParams);
    notification!(/// `notifications/elicitation/complete` (`2025-11-25`).
        ElicitationComplete = "notifications/elicitation/complete", ElicitationCompleteParams);
    notification!(/// `notifications/tasks`: a task's whole state, as `tasks/get` would answer
        /// (the tasks extension; a server may send it on a `subscriptions/listen` stream that
        /// asked for the task's id).
        TaskStatusChanged = "notifications/tasks", crate::Task);
}

macro_rules! dispatch {
    ($(#[$doc:meta])* $name:ident / $kind:ident { $($(#[$vdoc:meta])* $variant:ident,)* }) => {
        #[doc = concat!("The methods [`", stringify!($name), "`] knows, by name alone: what a \
            server dispatches on, deciding what to do with a message before (or instead of) \
            decoding its params — a relay passes them on as they came.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[non_exhaustive]
        pub enum $kind {
            $($(#[$vdoc])* $variant,)*
            /// A method not known here (and what a message without one, a response, is).
            #[default]
            Other,
        }

        impl $kind {
            /// The method named `name` on the wire ([`Self::Other`] for one not known here).
            pub fn of(name: &str) -> Self {
                match name {
                    $(<method::$variant as Method>::NAME => Self::$variant,)*
                    _ => Self::Other,
                }
            }

            /// Its name on the wire; None for [`Self::Other`].
            pub const fn name(self) -> Option<&'static str> {
                match self {
                    $(Self::$variant => Some(<method::$variant as Method>::NAME),)*
                    Self::Other => None,
                }
            }
        }

        impl $name {
            #[doc = concat!("Which method it is, as a [`", stringify!($kind), "`].")]
            pub fn kind(&self) -> $kind {
                match self {
                    $(Self::$variant(_) => $kind::$variant,)*
                    Self::Other { .. } => $kind::Other,
                }
            }
        }

        $(#[$doc])*
        ///
        /// Params are boxed: their sizes differ by an order of magnitude, and a decoded message
        /// is allocated once anyway.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vdoc])* $variant(Box<<method::$variant as Method>::Params>),)*
            /// A method this enum does not know; the caller still holds the raw message.
            Other {
                /// The method name.
                method: String,
            },
        }

        impl $name {
            /// Phase two: decodes the params of `method` from the raw params of a message.
            pub fn decode(method: &str, params: Option<&RawValue>) -> Result<Self, DecodeError> {
                $(if method == <method::$variant as Method>::NAME {
                    return decode_params(method, params).map(|p| Self::$variant(Box::new(p)));
                })*
                Ok(Self::Other { method: method.to_owned() })
            }

            /// Phase two from an already-parsed value (MRTR `inputRequests` carry params as
            /// values).
            pub fn decode_value(method: &str, params: Option<Value>) -> Result<Self, DecodeError> {
                let params = params.unwrap_or_else(|| Value::Object(Default::default()));
                $(if method == <method::$variant as Method>::NAME {
                    return serde_json::from_value(params)
                        .map(|p| Self::$variant(Box::new(p)))
                        .map_err(|source| DecodeError::InvalidParams { method: method.to_owned(), source });
                })*
                Ok(Self::Other { method: method.to_owned() })
            }

            /// The method name.
            pub fn method(&self) -> &str {
                match self {
                    $(Self::$variant(_) => <method::$variant as Method>::NAME,)*
                    Self::Other { method } => method,
                }
            }

            /// The params as JSON again, for a message that passes them on (a gateway relaying
            /// a request): unknown fields were kept, so nothing is lost. `None` for
            /// [`Self::Other`], whose params were never decoded.
            pub fn params_value(&self) -> Option<Result<Value, serde_json::Error>> {
                match self {
                    $(Self::$variant(p) => Some(serde_json::to_value(p)),)*
                    Self::Other { .. } => None,
                }
            }

            /// Every method name this enum knows.
            pub const METHODS: &'static [&'static str] = &[$(<method::$variant as Method>::NAME,)*];
        }
    };
}

dispatch!(
    /// A request from client to server, decoded (what a server or gateway receives).
    ClientRequest / ClientMethod {
        /// `initialize`.
        Initialize,
        /// `server/discover`.
        Discover,
        /// `ping`.
        Ping,
        /// `tools/list`.
        ListTools,
        /// `tools/call`.
        CallTool,
        /// `resources/list`.
        ListResources,
        /// `resources/templates/list`.
        ListResourceTemplates,
        /// `resources/read`.
        ReadResource,
        /// `resources/subscribe`.
        Subscribe,
        /// `resources/unsubscribe`.
        Unsubscribe,
        /// `prompts/list`.
        ListPrompts,
        /// `prompts/get`.
        GetPrompt,
        /// `completion/complete`.
        Complete,
        /// `logging/setLevel`.
        SetLevel,
        /// `subscriptions/listen`.
        Listen,
        /// `skills/list`.
        ListSkills,
        /// `skills/get`.
        GetSkill,
        /// `resources/directory/read`.
        ReadDirectory,
        /// `tasks/get`.
        GetTask,
        /// `tasks/update`.
        UpdateTask,
        /// `tasks/cancel`.
        CancelTask,
    }
);

dispatch!(
    /// A request from server to client, decoded (legacy requests, or modern MRTR input requests).
    ServerRequest / ServerMethod {
        /// `ping`.
        Ping,
        /// `sampling/createMessage`.
        CreateMessage,
        /// `elicitation/create`.
        Elicit,
        /// `roots/list`.
        ListRoots,
    }
);

impl ServerRequest {
    /// The client capability a server must have seen declared before sending this request
    /// (`sampling`, `elicitation`, `roots`); `None` for `ping` and methods not known here.
    pub fn required_capability(&self) -> Option<&'static str> {
        match self {
            Self::CreateMessage(_) => Some("sampling"),
            Self::Elicit(_) => Some("elicitation"),
            Self::ListRoots(_) => Some("roots"),
            Self::Ping(_) | Self::Other { .. } => None,
        }
    }

    /// Whether `capabilities` declare what this request needs
    /// ([`ServerRequest::required_capability`]).
    pub fn declared_by(&self, capabilities: &crate::ClientCapabilities) -> bool {
        match self {
            Self::CreateMessage(_) => capabilities.sampling.is_some(),
            Self::Elicit(_) => capabilities.elicitation.is_some(),
            Self::ListRoots(_) => capabilities.roots.is_some(),
            Self::Ping(_) | Self::Other { .. } => true,
        }
    }
}

dispatch!(
    /// A notification from client to server, decoded.
    ClientNotification / ClientNotice {
        /// `notifications/initialized`.
        Initialized,
        /// `notifications/cancelled`.
        Cancelled,
        /// `notifications/progress`.
        Progress,
        /// `notifications/roots/list_changed`.
        RootsListChanged,
    }
);

dispatch!(
    /// A notification from server to client, decoded.
    ServerNotification / ServerNotice {
        /// `notifications/cancelled`.
        Cancelled,
        /// `notifications/progress`.
        Progress,
        /// `notifications/message`.
        LoggingMessage,
        /// `notifications/tools/list_changed`.
        ToolsListChanged,
        /// `notifications/prompts/list_changed`.
        PromptsListChanged,
        /// `notifications/resources/list_changed`.
        ResourcesListChanged,
        /// `notifications/resources/updated`.
        ResourceUpdated,
        /// `notifications/subscriptions/acknowledged`.
        SubscriptionsAcknowledged,
        /// `notifications/elicitation/complete`.
        ElicitationComplete,
        /// `notifications/tasks`.
        TaskStatusChanged,
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_name_is_its_own_kind_and_an_unknown_one_is_other() {
        for name in ClientRequest::METHODS {
            let kind = ClientMethod::of(name);
            assert_ne!(kind, ClientMethod::Other, "{name}");
            assert_eq!(kind.name(), Some(*name));
            let decoded = ClientRequest::decode(name, Some(&RawValue::from_string(
                r#"{"name":"n","uri":"u","taskId":"t","inputResponses":{},"level":"info","ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"},"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"},"notifications":{}}"#.to_owned(),
            ).unwrap()));
            assert_eq!(decoded.map(|r| r.kind()).ok(), Some(kind), "{name}");
        }
        for name in ServerRequest::METHODS {
            assert_eq!(ServerMethod::of(name).name(), Some(*name));
        }
        assert_eq!(ClientMethod::of("tools/cal"), ClientMethod::Other);
        assert_eq!(
            ClientMethod::of("sampling/createMessage"),
            ClientMethod::Other
        );
        assert_eq!(ClientMethod::Other.name(), None);
        assert_eq!(ServerMethod::of("tools/call"), ServerMethod::Other);
    }

    #[test]
    fn list_changes_evict_their_lists_and_other_notifications_evict_nothing() {
        assert!(CachePolicy::evicts("notifications/prompts/list_changed"));
        assert!(CachePolicy::evicts("notifications/resources/list_changed"));
        assert!(!CachePolicy::evicts("notifications/message"));
        assert!(!CachePolicy::evicts("notifications/tools/list_changed"));
        assert_eq!(method::ReadResource::CACHE, Some(CachePolicy::BY_URI));
        assert_eq!(method::CallTool::CACHE, None, "a tool call is never kept");
    }

    #[test]
    fn every_kept_method_carries_hints_and_calls_and_gets_do_not() {
        for kept in CachePolicy::ALL.iter().zip([
            method::ListPrompts::NAME,
            method::ListResources::NAME,
            method::ListResourceTemplates::NAME,
            method::ReadResource::NAME,
            method::ListSkills::NAME,
            method::GetSkill::NAME,
            method::ReadDirectory::NAME,
        ]) {
            assert!(
                kept.0.is_some() && CachePolicy::carries_hints(kept.1),
                "{}",
                kept.1
            );
        }
        assert!(CachePolicy::carries_hints("tools/list"));
        assert!(CachePolicy::carries_hints("server/discover"));
        for not in [
            "tools/call",
            "prompts/get",
            "completion/complete",
            "tasks/get",
            "ping",
        ] {
            assert!(!CachePolicy::carries_hints(not), "{not}");
        }
    }
}
