//! `tools/call` from the caller's side: one call's rounds (MRTR `input_required` answered
//! through the handler), a task followed to its result, progress callbacks, and the
//! cancellation of a call whose future is dropped.

use serde_json::value::RawValue;

use super::*;

/// What [`Client::call_tool_as_task`] gave: the result at once, or a task.
#[derive(Debug)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "the result is the common case; boxing it would cost an allocation per call"
)]
pub enum Called {
    /// The server answered the call itself.
    Done(CallToolResult),
    /// The server answered with a task: follow it with the handle.
    Task(Box<crate::tasks::TaskHandle>),
    /// The server's result as it sent it ([`Client::call_tool_relayed`]).
    Raw(RawResult),
}

/// A tool's result as its server sent it, not decoded: for a relay that passes it on as it
/// came ([`Client::call_tool_relayed`]). It is a JSON object whose `resultType`, if any, is
/// `complete`; the rest is not checked (the client it is passed on to checks it).
#[derive(Debug, Clone)]
pub struct RawResult {
    json: Box<RawValue>,
    facts: toolwire_types::CompleteCall,
}

impl RawResult {
    /// The result's JSON text.
    pub fn json(&self) -> &RawValue {
        &self.json
    }

    /// The result's JSON text, owned.
    pub fn into_json(self) -> Box<RawValue> {
        self.json
    }

    /// Whether the server marked the result an error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.facts.is_error
    }

    /// What the result says of itself, read from its own members: whether it is an error,
    /// names tools it changes, says it is complete, carries caching hints.
    pub fn facts(&self) -> toolwire_types::CompleteCall {
        self.facts
    }

    /// The result, decoded.
    pub fn decode(&self) -> Result<CallToolResult, Error> {
        match CallTool::decode_result(&self.json) {
            Ok(Outcome::Complete(result)) => Ok(result),
            Ok(Outcome::InputRequired(_)) => Err(Error::Protocol(crate::ProtocolError::Decode(
                Arc::new(toolwire_types::DecodeError::UnexpectedInputRequired {
                    method: "tools/call".to_owned(),
                }),
            ))),
            Err(e) => Err(Error::Protocol(crate::ProtocolError::Decode(Arc::new(e)))),
        }
    }

    /// `raw` when it is a complete result (an object with no `resultType` or `complete`);
    /// anything else is decoded the usual way, which answers it or says what is wrong.
    fn complete(raw: Box<RawValue>) -> Result<Self, Box<RawValue>> {
        match toolwire_types::complete_call_result(&raw) {
            Some(facts) => Ok(Self { json: raw, facts }),
            None => Err(raw),
        }
    }
}

/// What one round of a call gave: a result or an input request, or a task to follow.
#[allow(
    clippy::large_enum_variant,
    reason = "the result is the common case; boxing it would cost an allocation per call"
)]
enum Round {
    Outcome(Outcome<CallToolResult>),
    Raw(RawResult),
    Task(Box<toolwire_types::Task>),
}

/// What a caller wants of a call: a task answered handed back rather than followed, a
/// result left as the server sent it.
#[derive(Clone, Copy)]
struct Wanted {
    follow: bool,
    raw: bool,
}

/// Cancels a call whose future is dropped before its answer arrives.
struct CancelOnDrop<'a> {
    commands: &'a mpsc::UnboundedSender<Command>,
    call: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.commands.send(Command::Cancel { call: self.call });
        }
    }
}

impl Client {
    /// Calls a tool. `arguments` must be a JSON object or `null`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call_tool_with_hooks(
            name,
            arguments,
            CallOptions::default(),
            CallHooks::default(),
        )
        .await
    }

    /// Calls a tool with per-call options (deadline, a tool definition or header map for this
    /// call, retry opt-in).
    ///
    /// Dropping the future cancels the call: the server is told where the era and transport
    /// allow it, and a late answer is discarded.
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        self.call_tool_with_hooks(name, arguments, options, CallHooks::default())
            .await
    }

    /// Calls a tool, asking the server for progress and handing each notification to
    /// `on_progress` (each one also pushes the call's deadline forward).
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
        on_progress: impl Fn(&ProgressParams) + Send + Sync + 'static,
    ) -> Result<CallToolResult, Error> {
        let hooks = CallHooks::new().on_progress(on_progress);
        self.call_tool_with_hooks(name, arguments, options, hooks)
            .await
    }

    /// Calls a tool with hooks of its own: its progress, and a handler for the requests the
    /// server makes about this call (a gateway relays them to whoever made the call).
    pub async fn call_tool_with_hooks(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
        hooks: CallHooks,
    ) -> Result<CallToolResult, Error> {
        // The other ways to call a tool come here directly, not through one another: a call's
        // future is large, and every `async fn` between the caller and it moves it once more.
        let wanted = Wanted {
            follow: true,
            raw: false,
        };
        match self
            .call_inner(name, arguments, options, hooks, wanted)
            .await?
        {
            Called::Done(result) => Ok(result),
            Called::Task(handle) => Box::pin((*handle).result()).await,
            Called::Raw(raw) => raw.decode(),
        }
    }

    /// Calls a tool and, if the server answers with a task (the tasks extension), returns
    /// its handle instead of following it: the task id, its state, `next` to poll it,
    /// `answer` for its input requests, `cancel`, or `result` to follow it to the end as
    /// [`Client::call_tool`] does. A result the server gives at once is `Called::Done`.
    pub async fn call_tool_as_task(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<Called, Error> {
        self.call_tool_as_task_with_hooks(name, arguments, options, CallHooks::default())
            .await
    }

    /// [`Client::call_tool_as_task`] with hooks of the call's own
    /// ([`Client::call_tool_with_hooks`]): its progress, and a handler for what the server asks
    /// before it answers (an MRTR round may come before the task is created).
    pub async fn call_tool_as_task_with_hooks(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
        hooks: CallHooks,
    ) -> Result<Called, Error> {
        let wanted = Wanted {
            follow: false,
            raw: false,
        };
        self.call_inner(name, arguments, options, hooks, wanted)
            .await
    }

    /// A call for a relay that passes the result on: [`Client::call_tool_with_hooks`], but a
    /// complete result comes back as the server sent it ([`Called::Raw`]), not decoded, so
    /// it is passed on without being decoded and encoded again. A result the client checks
    /// against the tool's output schema is decoded and checked ([`Called::Done`]). With
    /// `tasks`, a task the server answers with is handed back ([`Called::Task`], as
    /// [`Client::call_tool_as_task_with_hooks`] does); without, it is followed to its result.
    pub async fn call_tool_relayed(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
        hooks: CallHooks,
        tasks: bool,
    ) -> Result<Called, Error> {
        let wanted = Wanted {
            follow: !tasks,
            raw: true,
        };
        self.call_inner(name, arguments, options, hooks, wanted)
            .await
    }

    async fn call_inner(
        &self,
        name: &str,
        arguments: Value,
        mut options: CallOptions,
        hooks: CallHooks,
        wanted: Wanted,
    ) -> Result<Called, Error> {
        // A progress hook asks the server for progress.
        if hooks.progress.is_some() {
            options = options.with_progress();
        }
        let arguments = match arguments {
            Value::Object(map) => Some(Arc::new(map)),
            Value::Null => None,
            _ => return Err(Error::Usage(crate::UsageError::ArgumentsNotAnObject)),
        };
        // Which tool definition the result is checked against: the per-call one (its schema
        // copied, as the options move into the call), else the cached one as it is when the
        // call is made (an `Arc`, no copy).
        let given_schema = options.tool.as_ref().map(|t| t.output_schema.clone());
        let cached = match given_schema {
            Some(_) => None,
            None => self
                .inner
                .cache
                .load()
                .get(name)
                .map(|t| Arc::clone(t.tool())),
        };
        // MRTR: each `input_required` answer is met by the handler and the call is retried
        // (new id, the answers, the exact requestState), a bounded number of times. The
        // arguments are shared with every round, never copied. Without a handler an
        // `input_required` answer ends the call (`InputError::NoHandler`), so there is no next
        // round to keep the options for: they move into the call.
        let another_round_possible =
            self.inner.config.handler.is_some() || hooks.requests.is_some();
        // A result checked against an output schema is decoded to be checked.
        let raw = wanted.raw
            && (self.inner.validators.is_none()
                || match &given_schema {
                    Some(given) => given.is_none(),
                    None => cached.as_ref().is_none_or(|t| t.output_schema.is_none()),
                });
        let mut rounds = 0;
        let mut input = None;
        // A task is followed until this deadline: the call's own, else the longest a request
        // may run.
        let limit = options
            .timeout
            .unwrap_or(self.inner.config.session.max_request_time);
        // The runtime's clock (paused in tests), saturating past what it holds.
        let deadline = tokio::time::Instant::from_std(toolwire_session::later(
            tokio::time::Instant::now().into_std(),
            limit,
        ));
        let result = loop {
            let this_round = if another_round_possible {
                options.clone()
            } else {
                std::mem::take(&mut options)
            };
            let outcome = self
                .call_once(
                    name,
                    arguments.clone(),
                    this_round,
                    input.take(),
                    hooks.clone(),
                    raw,
                )
                .await?;
            match outcome {
                Round::Outcome(Outcome::Complete(result)) => break result,
                Round::Raw(result) => return Ok(Called::Raw(result)),
                Round::Outcome(Outcome::InputRequired(required)) => {
                    // Boxed, as the task's following below: rare, and large futures that
                    // would otherwise make every call's future (moved on each `.await` up the
                    // stack) kilobytes larger.
                    let (responses, request_state) = Box::pin(self.answer_input_with(
                        required,
                        &mut rounds,
                        hooks.requests.as_ref(),
                    ))
                    .await?;
                    input = Some(Box::new(InputResponses {
                        responses,
                        request_state,
                    }));
                }
                Round::Task(task) => {
                    let output_schema = match &given_schema {
                        Some(given) => given.clone(),
                        None => cached.as_ref().and_then(|t| t.output_schema.clone()),
                    };
                    let handle = crate::tasks::TaskHandle::new(
                        self.clone(),
                        name,
                        *task,
                        (deadline, limit),
                        output_schema,
                    );
                    if wanted.follow {
                        break Box::pin(handle.result()).await?;
                    }
                    return Ok(Called::Task(Box::new(handle)));
                }
            }
        };
        let output_schema = match &given_schema {
            Some(given) => given.as_ref(),
            None => cached.as_ref().and_then(|t| t.output_schema.as_ref()),
        };
        self.validate(name, output_schema, &result)?;
        Ok(Called::Done(result))
    }

    /// One round of a call: one request, in its own client span, and its decoded outcome.
    async fn call_once(
        &self,
        name: &str,
        arguments: Option<Arc<JsonObject>>,
        options: CallOptions,
        input: Option<Box<InputResponses>>,
        hooks: CallHooks,
        keep_raw: bool,
    ) -> Result<Round, Error> {
        // A result with `isError` is a failed call to the conventions, not to the caller.
        let tool_error = |round: &Round| {
            let failed = match round {
                Round::Outcome(Outcome::Complete(r)) => r.is_error(),
                Round::Raw(r) => r.is_error(),
                _ => false,
            };
            failed.then_some("tool_error")
        };
        self.in_span(
            "tools/call",
            Subject::Tool(name),
            tool_error,
            |trace| async move {
                let commands = self.start(&trace)?;
                let call = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
                let (reply, answer) = oneshot::channel();
                let mut request = Box::new(CallRequest::new(name, arguments, options));
                request.input = input.map(|input| *input);
                request.options.answers_requests = hooks.requests.is_some();
                let command = Command::Call {
                    call,
                    hooks,
                    request,
                    reply,
                    trace,
                };
                commands.send(command).map_err(|_| self.unsent())?;
                let mut guard = CancelOnDrop {
                    commands: &commands,
                    call,
                    armed: true,
                };
                let raw = answer.await.map_err(|_| Error::Closed)?;
                guard.armed = false;
                let raw = raw?;
                if self.inner.config.tasks && crate::tasks::is_task(&raw) {
                    let task = serde_json::from_str(raw.get()).map_err(|source| {
                        Error::Protocol(crate::ProtocolError::Decode(Arc::new(
                            toolwire_types::DecodeError::InvalidResult {
                                method: "tools/call".to_owned(),
                                source,
                            },
                        )))
                    })?;
                    return Ok(Round::Task(Box::new(task)));
                }
                let raw = if keep_raw {
                    match RawResult::complete(raw) {
                        Ok(result) => return Ok(Round::Raw(result)),
                        Err(other) => other,
                    }
                } else {
                    raw
                };
                CallTool::decode_result(&raw)
                    .map(Round::Outcome)
                    .map_err(|e| Error::Protocol(crate::ProtocolError::Decode(Arc::new(e))))
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::test_peer::Peer;
    use crate::{CallHooks, CallOptions, Called, Client, Error, Tool};

    fn client(answer: Value) -> Client {
        let (peer, _) = Peer::new(move |method, _| match method {
            "tools/call" => answer.clone(),
            _ => json!({}),
        });
        Client::builder("relay-test", "0").connect(peer).unwrap()
    }

    async fn relayed(client: &Client, options: CallOptions) -> Result<Called, Error> {
        client
            .call_tool_relayed("job", json!({}), options, CallHooks::default(), false)
            .await
    }

    #[tokio::test]
    async fn a_relayed_result_comes_back_as_the_server_sent_it_with_its_error_mark() {
        let sent = json!({"content": [{"type": "text", "text": "no"}], "isError": true,
            "x-vendor": {"kept": [1, 2]}, "resultType": "complete"});
        let client = client(sent.clone());
        let Called::Raw(raw) = relayed(&client, CallOptions::default()).await.unwrap() else {
            panic!("decoded");
        };
        assert!(raw.is_error());
        assert_eq!(
            serde_json::from_str::<Value>(raw.json().get()).unwrap(),
            sent
        );
        let decoded = raw.decode().unwrap();
        assert_eq!(decoded.content[0].as_text(), Some("no"));
        // The plain call decodes the same answer.
        let plain = client.call_tool("job", json!({})).await.unwrap();
        assert_eq!(plain.is_error, Some(true));
    }

    #[tokio::test]
    async fn a_relayed_result_checked_by_an_output_schema_is_decoded_and_checked() {
        let tool: Tool = serde_json::from_value(json!({"name": "job",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}},
                "required": ["n"]}}))
        .unwrap();
        let options = || CallOptions::default().with_tool(tool.clone());
        let good = client(json!({"content": [], "structuredContent": {"n": 1}}));
        assert!(matches!(
            relayed(&good, options()).await.unwrap(),
            Called::Done(r) if r.structured_content == Some(json!({"n": 1}))
        ));
        let bad = client(json!({"content": [], "structuredContent": {"n": "one"}}));
        assert!(matches!(
            relayed(&bad, options()).await,
            Err(Error::Protocol(
                crate::ProtocolError::StructuredOutput { .. }
            ))
        ));
        // Without a schema the same result is passed on as it came.
        assert!(matches!(
            relayed(&bad, CallOptions::default()).await.unwrap(),
            Called::Raw(_)
        ));
    }

    #[tokio::test]
    async fn a_result_that_is_not_a_complete_one_is_refused_as_the_decoding_says() {
        let client = client(json!(["not", "a", "result"]));
        assert!(matches!(
            relayed(&client, CallOptions::default()).await,
            Err(Error::Protocol(crate::ProtocolError::Decode(_)))
        ));
    }
}
