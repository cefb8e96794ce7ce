//! `tools/call` from the caller's side: one call's rounds (MRTR `input_required` answered
//! through the handler), a task followed to its result, progress callbacks, and the
//! cancellation of a call whose future is dropped.

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
}

/// What one round of a call gave: a result or an input request, or a task to follow.
#[allow(
    clippy::large_enum_variant,
    reason = "the result is the common case; boxing it would cost an allocation per call"
)]
enum Round {
    Outcome(Outcome<CallToolResult>),
    Task(Box<toolwire_types::Task>),
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
        match self
            .call_inner(name, arguments, options, hooks, true)
            .await?
        {
            Called::Done(result) => Ok(result),
            Called::Task(handle) => Box::pin((*handle).result()).await,
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
        self.call_inner(name, arguments, options, hooks, false)
            .await
    }

    async fn call_inner(
        &self,
        name: &str,
        arguments: Value,
        mut options: CallOptions,
        hooks: CallHooks,
        follow: bool,
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
                )
                .await?;
            match outcome {
                Round::Outcome(Outcome::Complete(result)) => break result,
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
                    if follow {
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
    ) -> Result<Round, Error> {
        // A result with `isError` is a failed call to the conventions, not to the caller.
        let tool_error = |round: &Round| {
            matches!(round, Round::Outcome(Outcome::Complete(r)) if r.is_error())
                .then_some("tool_error")
        };
        self.in_span(
            "tools/call",
            Subject::Tool(name),
            tool_error,
            |trace| async move {
                let (commands, rx) = self.start(&trace)?;
                let call = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
                let (reply, answer) = oneshot::channel();
                let mut request = Box::new(CallRequest::new(name, arguments, options));
                request.input = input.map(|input| *input);
                let command = Command::Call {
                    call,
                    hooks,
                    request,
                    reply,
                    trace,
                };
                commands.send(command).map_err(|_| unsent(&rx))?;
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
                CallTool::decode_result(&raw)
                    .map(Round::Outcome)
                    .map_err(|e| Error::Protocol(crate::ProtocolError::Decode(Arc::new(e))))
            },
        )
        .await
    }
}
