//! Requests an upstream makes of its client during a call (`elicitation/create` in form and
//! URL mode, `sampling/createMessage`, `roots/list`), relayed to the downstream client whose
//! call caused them, and their answers back.
//!
//! Which call a request is about: the one on whose response stream it came (Streamable HTTP),
//! the one whose MRTR round asked it (2026-07-28), or, over a transport that cannot say
//! (stdio, HTTP+SSE), the only relayed call in flight to that upstream with a handler
//! (`toolwire::CallHooks`). A request about no call gets [`unrelated`]'s answer.
//!
//! Downstream, a legacy client is sent the request on its call's stream
//! ([`Notifier::ask`]); a 2026-07-28 client, which servers ask by answering `input_required`,
//! gets the call's answer `input_required` with the upstream's questions and a `requestState`
//! naming the call parked here ([`Parked`]), and its retry with `inputResponses` answers them
//! and waits for what comes next. A parked call lives on one replica, for [`PARKED_FOR`]:
//! a retry that reaches another replica, or comes later, is refused (`-32602`) and the upstream
//! call is cancelled.

use crate::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_channel::mpsc::{UnboundedReceiver, UnboundedSender};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;
use toolwire::{ClientBuilder, ClientCapabilities, ErrorObject, ServerRequest};
use toolwire_server::{Notifier, RpcError};
use toolwire_types::error::code;

/// How long a legacy client has to answer a relayed request (a person may be filling in a
/// form).
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// How long a 2026-07-28 client has to retry a call answered `input_required`.
pub const PARKED_FOR: Duration = Duration::from_secs(5 * 60);
/// The most calls parked at once, all callers together: a backstop; past it a call that asks
/// is refused.
pub(crate) const MAX_PARKED: usize = 10_000;
/// The most calls one caller (principal) may have parked at once: past it that caller's call
/// that asks is refused, and nobody else's.
pub const MAX_PARKED_PER_CALLER: usize = 64;

/// What the gateway declares to every upstream, so that each may ask: elicitation (form and
/// URL mode), sampling, roots. Whether the downstream client that made a call can answer is
/// checked per request: one that did not declare the capability is refused for it.
pub fn upstream_capabilities() -> ClientCapabilities {
    let declared = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}});
    serde_json::from_value(declared).unwrap_or_default()
}

/// `builder` set up as the gateway's client of each upstream: [`upstream_capabilities`] and
/// the tasks extension declared, requests about no relayed call answered by [`unrelated`].
/// Give the result to `Host::builder`.
pub fn upstream_client(builder: ClientBuilder) -> ClientBuilder {
    // Tasks declared: a client that declared the extension gets its upstream's task, and
    // the gateway follows the task of a client that did not to its result.
    builder
        .handler(upstream_capabilities(), unrelated)
        .tasks(true)
}

/// The answer to an upstream's request that is about no call the gateway relays (one made
/// outside any call, or over a transport that cannot say which of several it is about): an
/// error, as no one client's answer (its roots, its user, its model) would be right.
pub fn unrelated(request: ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> {
    let message = format!(
        "{} reached the gateway outside any call it relays, so there is no client to ask",
        request.method()
    );
    Box::pin(async move { Err(ErrorObject::new(code::INTERNAL_ERROR, message)) })
}

/// Whether the downstream client's declared capabilities (`None`: not known here) allow
/// `request`; the refusal if not. An elicitation needs its mode declared (`{}` alone is form
/// mode only).
pub(crate) fn allowed(request: &ServerRequest, client: Option<&Value>) -> Result<(), ErrorObject> {
    let Some(declared) = client else {
        return Ok(());
    };
    let missing = match request {
        ServerRequest::Elicit(params) => {
            let mode = if params.is_url() { "url" } else { "form" };
            match declared.get("elicitation") {
                None => Some("`elicitation` capability".to_owned()),
                Some(modes) => {
                    let form_only = modes.as_object().is_none_or(serde_json::Map::is_empty);
                    let ok = modes.get(mode).is_some() || (mode == "form" && form_only);
                    (!ok).then(|| format!("`elicitation` capability in {mode} mode"))
                }
            }
        }
        other => other
            .required_capability()
            .filter(|capability| declared.get(capability).is_none())
            .map(|capability| format!("`{capability}` capability")),
    };
    match missing {
        Some(what) => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: the client that made this call did not declare the {what}"),
        )),
        None => Ok(()),
    }
}

/// The params of `request` as JSON, to send on.
pub(crate) fn params_of(request: &ServerRequest) -> Result<Value, ErrorObject> {
    match request.params_value() {
        Some(Ok(params)) => Ok(params),
        Some(Err(e)) => Err(ErrorObject::new(code::INTERNAL_ERROR, e.to_string())),
        None => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {}", request.method()),
        )),
    }
}

/// A downstream answer as the upstream hears it.
pub(crate) fn to_error_object(e: RpcError) -> ErrorObject {
    let mut object = ErrorObject::new(e.code, e.message);
    object.data = e.data;
    object
}

/// Told the id of each URL elicitation a call's upstream asks, so that its completion reaches
/// the session whose call it was.
pub(crate) type AskedUrl = Option<Arc<dyn Fn(&str) + Send + Sync>>;

/// The `_meta` key that names the upstream a relayed request comes from.
pub const UPSTREAM_META: &str = "io.toolwire/upstream";

/// A relayed request's params, attributed: its `message` (an elicitation's, which a person
/// reads) begins with the upstream's name, and `_meta` names it, so that no upstream can pass
/// its question off as the gateway's own or another upstream's.
pub(crate) fn attributed(server: Option<&str>, mut params: Value) -> Value {
    let Some(server) = server else {
        return params;
    };
    if let Some(message) = params.get("message").and_then(Value::as_str) {
        params["message"] = json!(format!("[{server}] {message}"));
    }
    if let Some(object) = params.as_object_mut() {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(UPSTREAM_META.to_owned(), json!(server));
        }
    }
    params
}

/// The handler of one call from a legacy client: each request goes to that client on the
/// call's stream (attributed to `server`), bounded by [`ASK_TIMEOUT`] and by the call itself
/// (`alive` ends with it); the id of a URL elicitation goes to `asked_url`.
pub(crate) fn legacy(
    notifier: Notifier,
    client: Option<Arc<Value>>,
    alive: tokio::sync::watch::Receiver<()>,
    asked_url: AskedUrl,
    server: Option<Arc<str>>,
) -> impl Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> + Send + Sync + 'static
{
    move |request| {
        let (notifier, client, mut alive) = (notifier.clone(), client.clone(), alive.clone());
        let server = server.clone();
        if let (ServerRequest::Elicit(params), Some(asked)) = (&request, &asked_url)
            && let Some(id) = params.elicitation_id.as_deref()
        {
            asked(id);
        }
        Box::pin(async move {
            allowed(&request, client.as_deref())?;
            let params = attributed(server.as_deref(), params_of(&request)?);
            let method = request.method().to_owned();
            tokio::select! {
                answer = tokio::time::timeout(ASK_TIMEOUT, notifier.ask(&method, params)) => match answer {
                    Ok(answer) => answer.map_err(to_error_object),
                    Err(_) => Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        format!("the client did not answer {method} within {} s", ASK_TIMEOUT.as_secs()),
                    )),
                },
                _ = alive.changed() => Err(ErrorObject::new(
                    code::INTERNAL_ERROR,
                    format!("the call {method} was about ended before the client answered"),
                )),
            }
        })
    }
}

/// One question an upstream asks during a 2026-07-28 client's call, and where its answer goes.
pub(crate) struct Question {
    pub(crate) method: String,
    pub(crate) params: Value,
    pub(crate) reply: oneshot::Sender<Result<Value, ErrorObject>>,
}

/// The handler of one call from a 2026-07-28 client: each request becomes a [`Question`] the
/// call's answer carries as an input request.
pub(crate) fn modern(
    client: Option<Arc<Value>>,
    questions: UnboundedSender<Question>,
    server: Option<Arc<str>>,
) -> impl Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> + Send + Sync + 'static
{
    move |request| {
        let (client, questions) = (client.clone(), questions.clone());
        let server = server.clone();
        Box::pin(async move {
            allowed(&request, client.as_deref())?;
            let params = attributed(server.as_deref(), params_of(&request)?);
            let (reply, answer) = oneshot::channel();
            let method = request.method().to_owned();
            let asked = Question {
                method: method.clone(),
                params,
                reply,
            };
            if questions.unbounded_send(asked).is_err() {
                return Err(gone(&method));
            }
            answer.await.unwrap_or_else(|_| Err(gone(&method)))
        })
    }
}

/// The client's call ended (or its parked state expired) before it answered `method`.
fn gone(method: &str) -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        format!("the client's call ended before it answered {method}"),
    )
}

/// A call's work upstream: polled while its client waits, set aside while it is parked
/// (what the upstream says meanwhile is handled by its client's own task), dropped to cancel
/// the call upstream.
pub(crate) struct Running<T> {
    pub(crate) task: BoxFuture<'static, T>,
    pub(crate) questions: UnboundedReceiver<Question>,
    /// Where its news goes: the client's latest request for it.
    pub(crate) relay_to: Arc<Mutex<Relay>>,
}

/// Where what the upstream says about a call goes now: the notifier of the client's latest
/// request for it (a 2026-07-28 call's rounds are requests of their own), that request's
/// progress token, and the log level it asked for (2026-07-28; none, no log messages).
pub(crate) struct Relay {
    pub(crate) notifier: Notifier,
    pub(crate) token: Option<Value>,
    pub(crate) level: Option<toolwire::LoggingLevel>,
}

/// A call answered `input_required`, waiting for the client's retry.
pub(crate) struct ParkedCall<T> {
    pub(crate) running: Running<T>,
    /// The questions asked, by the key the client answers them under.
    pub(crate) asked: Vec<(String, oneshot::Sender<Result<Value, ErrorObject>>)>,
    until: Instant,
    /// The principal whose call it is: only its retry resumes it.
    owner: String,
}

/// Why a call could not be parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// Its caller has [`MAX_PARKED_PER_CALLER`] calls parked.
    Caller,
    /// The gateway has [`MAX_PARKED`].
    Gateway,
}

impl Full {
    /// The error its caller hears.
    pub(crate) fn error(self) -> RpcError {
        let message = match self {
            Self::Caller => format!(
                "you have {MAX_PARKED_PER_CALLER} calls waiting for your input already; answer or abandon them (they expire after {} s) and try again",
                PARKED_FOR.as_secs()
            ),
            Self::Gateway => {
                "the gateway has too many calls waiting for their clients' input; try again later"
                    .to_owned()
            }
        };
        RpcError::new(code::INTERNAL_ERROR, message)
    }
}

/// The calls of 2026-07-28 clients waiting for their retries, by `requestState`.
pub(crate) struct Parked<T> {
    calls: Mutex<HashMap<String, ParkedCall<T>>>,
}

impl<T> std::fmt::Debug for Parked<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parked")
            .field("calls", &self.len())
            .finish()
    }
}

impl<T> Default for Parked<T> {
    fn default() -> Self {
        Self {
            calls: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Parked<T> {
    /// Parks `owner`'s call that asked `asked`: its `requestState`, or why it cannot be.
    pub(crate) fn park(
        &self,
        owner: &str,
        running: Running<T>,
        asked: Vec<(String, oneshot::Sender<Result<Value, ErrorObject>>)>,
    ) -> Result<String, Full> {
        let now = Instant::now();
        let mut calls = lock(&self.calls);
        // Calls whose clients never came back are cancelled (dropping them aborts their work).
        calls.retain(|_, call| call.until > now);
        if calls.values().filter(|c| c.owner == owner).count() >= MAX_PARKED_PER_CALLER {
            return Err(Full::Caller);
        }
        if calls.len() >= MAX_PARKED {
            return Err(Full::Gateway);
        }
        let state = format!("gw-{}", toolwire_server::random_id());
        calls.insert(
            state.clone(),
            ParkedCall {
                running,
                asked,
                until: now + PARKED_FOR,
                owner: owner.to_owned(),
            },
        );
        Ok(state)
    }

    /// Takes the call parked under `state` out, if it is (still) here and `owner`'s; another
    /// caller's retry leaves it where it is.
    pub(crate) fn take(&self, state: &str, owner: &str) -> Option<ParkedCall<T>> {
        let mut calls = lock(&self.calls);
        if calls.get(state)?.owner != owner {
            return None;
        }
        let call = calls.remove(state)?;
        (call.until > Instant::now()).then_some(call)
    }

    /// How many calls are parked.
    pub(crate) fn len(&self) -> usize {
        lock(&self.calls).len()
    }
}

impl<T> ParkedCall<T> {
    /// Hands the client's `inputResponses` to the questions they answer; a question left
    /// unanswered is refused upstream.
    pub(crate) fn answer(&mut self, responses: &Value) {
        for (key, reply) in self.asked.drain(..) {
            let answer = match responses.get(&key) {
                Some(answer) => Ok(answer.clone()),
                None => Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!("the client's retry did not answer input request `{key}`"),
                )),
            };
            let _ = reply.send(answer);
        }
    }
}

/// The `input_required` answer that carries `asked` (keyed as the client answers them) and
/// the parked call's `state`.
pub(crate) fn input_required(asked: &[(String, String, Value)], state: &str) -> Value {
    let requests: serde_json::Map<String, Value> = asked
        .iter()
        .map(|(key, method, params)| (key.clone(), json!({"method": method, "params": params})))
        .collect();
    json!({"resultType": "input_required", "inputRequests": requests, "requestState": state})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> (Running<()>, UnboundedSender<Question>) {
        let (tx, questions) = futures_channel::mpsc::unbounded();
        let task = Box::pin(std::future::pending::<()>());
        let relay_to = Arc::new(Mutex::new(Relay {
            notifier: Notifier::new(tokio::sync::mpsc::unbounded_channel().0),
            token: None,
            level: None,
        }));
        (
            Running {
                task,
                questions,
                relay_to,
            },
            tx,
        )
    }

    #[tokio::test]
    async fn a_parked_call_is_taken_once_by_its_state_and_answers_its_questions() {
        let parked = Parked::default();
        let (run, _tx) = running();
        let (reply, answer) = oneshot::channel();
        let (other, unanswered) = oneshot::channel();
        let state = parked
            .park(
                "alice",
                run,
                vec![("q1".into(), reply), ("q2".into(), other)],
            )
            .unwrap();
        assert!(parked.take("gw-someone-else", "alice").is_none());
        assert!(
            parked.take(&state, "bob").is_none(),
            "another caller's retry"
        );
        let mut call = parked.take(&state, "alice").unwrap();
        assert!(parked.take(&state, "alice").is_none(), "taken once");
        call.answer(&json!({"q1": {"action": "accept"}}));
        assert_eq!(answer.await.unwrap(), Ok(json!({"action": "accept"})));
        let refused = unanswered.await.unwrap().unwrap_err();
        assert!(refused.message.contains("`q2`"), "{refused:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_whose_client_never_retries_expires_and_its_work_is_aborted() {
        let parked = Parked::default();
        let (mut run, _tx) = running();
        // Work that says when it is dropped.
        let (held, dropped) = oneshot::channel::<()>();
        run.task = Box::pin(async move {
            let _held = held;
            std::future::pending::<()>().await;
        });
        let state = parked.park("alice", run, Vec::new()).unwrap();
        tokio::time::advance(PARKED_FOR + Duration::from_secs(1)).await;
        assert!(parked.take(&state, "alice").is_none(), "expired");
        assert!(
            dropped.await.is_err(),
            "its work was dropped, which cancels the call"
        );
    }

    #[tokio::test]
    async fn one_caller_filling_its_share_of_parked_calls_leaves_room_for_the_others() {
        let parked = Parked::default();
        let mut held = Vec::new();
        for _ in 0..MAX_PARKED_PER_CALLER {
            let (run, tx) = running();
            held.push(tx);
            parked.park("mallory", run, Vec::new()).unwrap();
        }
        let (run, _tx) = running();
        assert_eq!(parked.park("mallory", run, Vec::new()), Err(Full::Caller));
        let (run, _tx) = running();
        let state = parked.park("alice", run, Vec::new()).unwrap();
        assert!(parked.take(&state, "alice").is_some());
        assert!(Full::Caller.error().message.contains("you have"));
    }

    #[test]
    fn a_request_for_an_undeclared_capability_is_refused_and_unknown_ones_pass() {
        let request = ServerRequest::decode_value("roots/list", None).unwrap();
        assert!(allowed(&request, Some(&json!({"elicitation": {}}))).is_err());
        assert!(allowed(&request, Some(&json!({"roots": {}}))).is_ok());
        assert!(
            allowed(&request, None).is_ok(),
            "not known here: the client decides"
        );
    }

    #[test]
    fn an_elicitation_needs_its_mode_declared_and_an_empty_object_is_form_only() {
        let form = json!({"message": "m", "requestedSchema": {"type": "object"}});
        let form = ServerRequest::decode_value("elicitation/create", Some(form)).unwrap();
        let url = json!({"mode": "url", "message": "m", "url": "https://example.com",
            "elicitationId": "e"});
        let url = ServerRequest::decode_value("elicitation/create", Some(url)).unwrap();
        for (declared, form_ok, url_ok) in [
            (json!({"elicitation": {}}), true, false),
            (json!({"elicitation": {"form": {}}}), true, false),
            (json!({"elicitation": {"url": {}}}), false, true),
            (json!({"elicitation": {"form": {}, "url": {}}}), true, true),
            (json!({"sampling": {}}), false, false),
        ] {
            assert_eq!(
                allowed(&form, Some(&declared)).is_ok(),
                form_ok,
                "{declared}"
            );
            let refused = allowed(&url, Some(&declared));
            assert_eq!(refused.is_ok(), url_ok, "{declared}");
            if let (Err(e), Some(_)) = (refused, declared.get("elicitation")) {
                assert!(e.message.ends_with("in url mode"), "{}", e.message);
            }
        }
    }
}
