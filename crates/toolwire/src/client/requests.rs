//! Every other request: any method by its marker (`request::<M>`, with MRTR rounds and
//! the response cache), and the thin wrappers over it (resources, prompts, completions,
//! subscriptions, `ping`).

use super::*;

impl Client {
    /// Sends any request by its method marker and decodes its result, e.g.
    /// `client.request::<method::ListResources>(ListParams::default())`. For the methods that
    /// may answer `input_required`, [`Client::request_with_input`] answers it.
    pub async fn request<M>(&self, params: M::Params) -> Result<M::Result, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + Send + 'static,
    {
        match self.request_once::<M>(params).await? {
            Outcome::Complete(result) => Ok(result),
            Outcome::InputRequired(_) => Err(Error::Input(crate::InputError::NoHandler)),
        }
    }

    /// [`Client::request`] for `prompts/get` and `resources/read` (and `tools/call`): an
    /// `input_required` answer is met by the handler and the request retried (MRTR).
    pub async fn request_with_input<M>(&self, params: M::Params) -> Result<M::Result, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + RetryWithInput + Send + 'static,
    {
        self.request_with_input_about::<M>(params, Subject::None)
            .await
    }

    /// [`Client::request_with_input`], its spans naming what the request is about.
    async fn request_with_input_about<M>(
        &self,
        mut params: M::Params,
        subject: Subject<'_>,
    ) -> Result<M::Result, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + RetryWithInput + Send + 'static,
    {
        let mut rounds = 0;
        loop {
            let round = self.request_in::<M>(params.clone(), CacheMode::Use, subject);
            match round.await? {
                Outcome::Complete(result) => return Ok(result),
                Outcome::InputRequired(required) => {
                    let (responses, state) = self.answer_input(required, &mut rounds).await?;
                    params.set_input(responses, state);
                }
            }
        }
    }

    /// [`Client::request`] in response-cache mode `mode` (every request uses
    /// [`CacheMode::Use`]): `Refresh` asks the server and keeps the answer, `Bypass` asks
    /// and keeps nothing. Only results that carry SEP-2549 hints are ever kept (the prompt,
    /// resource, template and skill lists, `resources/read`, `skills/get`), each while its
    /// `ttlMs` says and until a notification says it changed.
    pub async fn request_with_cache<M>(
        &self,
        params: M::Params,
        mode: CacheMode,
    ) -> Result<M::Result, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + Send + 'static,
    {
        match self.request_in::<M>(params, mode, Subject::None).await? {
            Outcome::Complete(result) => Ok(result),
            Outcome::InputRequired(_) => Err(Error::Input(crate::InputError::NoHandler)),
        }
    }

    async fn request_once<M>(&self, params: M::Params) -> Result<Outcome<M::Result>, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + Send + 'static,
    {
        self.request_in::<M>(params, CacheMode::Use, Subject::None)
            .await
    }

    /// One request of method `M`, in its own client span.
    async fn request_in<M>(
        &self,
        params: M::Params,
        mode: CacheMode,
        subject: Subject<'_>,
    ) -> Result<Outcome<M::Result>, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + Send + 'static,
    {
        self.in_span(M::NAME, subject, no_failure, |trace| async move {
            let commands = self.start(&trace)?;
            let (reply, answer) = oneshot::channel();
            // The method says whether it is safe to resend (reads and lists are) and the
            // session whether a fresh kept answer may serve.
            let issue = Box::new(move |session: &mut Session, now| {
                session.request_cached::<M>(params, mode, now).map(Some)
            });
            commands
                .send(Command::Request {
                    issue,
                    reply,
                    trace,
                })
                .map_err(|_| self.unsent())?;
            let raw = answer.await.map_err(|_| Error::Closed)??;
            M::decode_result(&raw)
                .map_err(|e| Error::Protocol(crate::ProtocolError::Decode(Arc::new(e))))
        })
        .await
    }

    /// `ping` (legacy era; a modern server has none and answers `-32601`).
    pub async fn ping(&self) -> Result<(), Error> {
        self.request::<method::Ping>(MetaOnlyParams::default())
            .await
            .map(drop)
    }

    /// One page of `resources/list` (`cursor` from the previous page's `next_cursor`).
    pub async fn list_resources(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourcesResult, Error> {
        self.request::<method::ListResources>(list_params(cursor))
            .await
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourceTemplatesResult, Error> {
        self.request::<method::ListResourceTemplates>(list_params(cursor))
            .await
    }

    /// Every page of `resources/list` (at most 1,000 pages; a cursor the server returned
    /// before ends the walk with a warning).
    pub async fn list_all_resources(&self) -> Result<Vec<Resource>, Error> {
        crate::skills::walk("resources/list", |cursor| async move {
            let page = self.list_resources(cursor).await?;
            Ok((page.resources, page.next_cursor))
        })
        .await
    }

    /// Every page of `resources/templates/list`, bounded as [`Client::list_all_resources`].
    pub async fn list_all_resource_templates(&self) -> Result<Vec<ResourceTemplate>, Error> {
        crate::skills::walk("resources/templates/list", |cursor| async move {
            let page = self.list_resource_templates(cursor).await?;
            Ok((page.resource_templates, page.next_cursor))
        })
        .await
    }

    /// `resources/read`.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
        let params = ReadResourceParams {
            uri: uri.to_owned(),
            input_responses: None,
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        };
        self.request_with_input_about::<method::ReadResource>(params, Subject::Resource(uri))
            .await
    }

    /// Subscribes to updates of resource `uri`: each change arrives on
    /// [`Client::notifications`] as `notifications/resources/updated` naming it. Legacy:
    /// `resources/subscribe` (refused here, [`UsageError::InvalidCall`](crate::UsageError::InvalidCall), when the server did not
    /// declare `resources.subscribe`). `2026-07-28`: the `subscriptions/listen` stream is
    /// replaced by one that names `uri` too (the old one is closed only once the new one is
    /// acknowledged, so nothing is missed); the call returns when the server acknowledges it,
    /// with [`ProtocolError::SubscriptionRefused`](crate::ProtocolError::SubscriptionRefused) if the acknowledgement leaves `uri` out. The
    /// subscription outlives reconnects: the client makes it again on every new connection.
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), Error> {
        self.change_subscription(uri.to_owned(), true).await
    }

    /// Ends a subscription made with [`Client::subscribe_resource`] (legacy:
    /// `resources/unsubscribe`; `2026-07-28`: a listen stream without `uri`).
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), Error> {
        self.change_subscription(uri.to_owned(), false).await
    }

    async fn change_subscription(&self, uri: String, subscribe: bool) -> Result<(), Error> {
        let method = if subscribe {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        let shown = uri.clone();
        self.in_span(
            method,
            Subject::Resource(&shown),
            no_failure,
            |trace| async move {
                let commands = self.start(&trace)?;
                let (reply, answer) = oneshot::channel();
                let issue = Box::new(move |session: &mut Session, now| {
                    if subscribe {
                        session.subscribe_resource(&uri, now).map(Some)
                    } else {
                        session.unsubscribe_resource(&uri, now).map(Some)
                    }
                });
                commands
                    .send(Command::Request {
                        issue,
                        reply,
                        trace,
                    })
                    .map_err(|_| self.unsent())?;
                answer.await.map_err(|_| Error::Closed)?.map(drop)
            },
        )
        .await
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts(&self, cursor: Option<String>) -> Result<ListPromptsResult, Error> {
        self.request::<method::ListPrompts>(list_params(cursor))
            .await
    }

    /// Every page of `prompts/list`, bounded as [`Client::list_all_resources`].
    pub async fn list_all_prompts(&self) -> Result<Vec<Prompt>, Error> {
        crate::skills::walk("prompts/list", |cursor| async move {
            let page = self.list_prompts(cursor).await?;
            Ok((page.prompts, page.next_cursor))
        })
        .await
    }

    /// `prompts/get` with string arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: impl IntoIterator<Item = (String, String)>,
    ) -> Result<GetPromptResult, Error> {
        let params = GetPromptParams {
            name: name.to_owned(),
            arguments: Some(arguments.into_iter().collect()),
            input_responses: None,
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        };
        self.request_with_input_about::<method::GetPrompt>(params, Subject::Prompt(name))
            .await
    }

    /// `completion/complete`: suggestions for `argument` of a prompt or resource template
    /// (`CompletionReference::prompt(name)`, `CompletionReference::resource(uri_template)`)
    /// given what was typed so far, and the other arguments already chosen.
    pub async fn complete(
        &self,
        reference: toolwire_types::CompletionReference,
        argument: &str,
        typed: &str,
        context: impl IntoIterator<Item = (String, String)>,
    ) -> Result<toolwire_types::CompleteResult, Error> {
        let arguments: std::collections::BTreeMap<String, String> = context.into_iter().collect();
        let params = toolwire_types::CompleteParams {
            reference,
            argument: toolwire_types::CompletionArgument {
                name: argument.to_owned(),
                value: typed.to_owned(),
            },
            context: (!arguments.is_empty()).then_some(toolwire_types::CompletionContext {
                arguments: Some(arguments),
            }),
            meta: None,
            extra: JsonObject::new(),
        };
        self.request::<method::Complete>(params).await
    }
}
