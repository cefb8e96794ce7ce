//! The session on a fake clock: SEP-2549 freshness of the tool listing and the other answers, authorization contexts, saturating deadlines, fail-fast answers, postponed deadlines.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

mod common;

#[allow(
    unused_imports,
    reason = "the imports every file of these tests shares"
)]
use common::*;

/// A `tools/list` page of tools named `names`, with `ttl` as its `ttlMs` (none when `None`)
/// and `next` as its cursor.
fn tools_page(names: &[&str], ttl: Option<i64>, next: Option<&str>) -> Value {
    let mut page = json!({"tools": names.iter().map(|n| named(n)).collect::<Vec<_>>(),
        "cacheScope": "private"});
    if let Some(ttl) = ttl {
        page["ttlMs"] = json!(ttl);
    }
    if let Some(next) = next {
        page["nextCursor"] = json!(next);
    }
    page
}

impl Peer {
    /// Lists the tools in `mode` at `ms`; `Some(request)` if that sent one, else the listing's
    /// tool names (answered from the last listing).
    fn list_in(&mut self, mode: CacheMode, ms: u64) -> Result<Value, Vec<String>> {
        let op = self.session.list_tools_with(mode, self.at(ms)).unwrap();
        if let Some(t) = self.session.poll_transmit() {
            return Ok(serde_json::from_slice(&t.body).unwrap());
        }
        let listed = self.events().into_iter().find_map(|e| match e {
            Event::ToolsListed { op: o, result } if o == op => Some(result.unwrap()),
            _ => None,
        });
        let outcome = listed.expect("answered at once");
        assert!(
            outcome.commit.diff.is_empty(),
            "a cached answer changes nothing"
        );
        Err(outcome.tools.iter().map(|t| t.name.clone()).collect())
    }
}

#[test]
fn a_fresh_listing_answers_at_once_until_its_earliest_page_expires() {
    let mut p = Peer::ready_modern(true);
    let first = p.list_in(CacheMode::Use, 0).expect("nothing kept yet");
    p.reply(&first, tools_page(&["a"], Some(10_000), Some("c")), 1);
    let (second, _) = p.sent();
    p.reply(&second, tools_page(&["b"], Some(5_000), None), 2);
    p.events();
    // Fresh: no round trip, the same listing.
    assert_eq!(
        p.list_in(CacheMode::Use, 3),
        Err(vec!["a".into(), "b".into()])
    );
    assert_eq!(
        p.list_in(CacheMode::Use, 5_001),
        Err(vec!["a".into(), "b".into()])
    );
    // The second page's clock (received at 2 ms, 5 s) ends it: now >= received + ttlMs.
    let again = p
        .list_in(CacheMode::Use, 5_002)
        .expect("stale: asked again");
    assert_eq!(again["method"], "tools/list");
}

#[test]
fn an_absent_zero_or_negative_ttl_is_never_fresh() {
    for ttl in [None, Some(0), Some(-5)] {
        let mut p = Peer::ready_modern(true);
        let list = p.list_in(CacheMode::Use, 0).unwrap();
        p.reply(&list, tools_page(&["a"], ttl, None), 1);
        p.events();
        assert!(p.list_in(CacheMode::Use, 1).is_ok(), "{ttl:?}: asked again");
    }
}

#[test]
fn a_list_change_invalidates_and_a_walk_asked_before_it_cannot_make_the_listing_fresh() {
    let mut p = Peer::ready_modern(true);
    let list = p.list_in(CacheMode::Use, 0).unwrap();
    p.reply(&list, tools_page(&["a"], Some(60_000), None), 1);
    p.events();
    assert!(p.list_in(CacheMode::Use, 2).is_err(), "fresh");
    // A walk is under way when the server says the list changed; its answer (fresh by its
    // own ttlMs) came from before the change.
    let walk = p.list_in(CacheMode::Refresh, 3).unwrap();
    let change = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    p.session
        .handle_inbound(change.to_string().as_bytes(), p.at(4));
    p.reply(&walk, tools_page(&["a", "b"], Some(60_000), None), 5);
    p.events();
    assert!(
        p.list_in(CacheMode::Use, 6).is_ok(),
        "invalidated: asked again"
    );
}

#[test]
fn refresh_always_asks_and_bypass_leaves_the_fresh_listing_alone() {
    let mut p = Peer::ready_modern(true);
    let list = p.list_in(CacheMode::Use, 0).unwrap();
    p.reply(&list, tools_page(&["a"], Some(60_000), None), 1);
    p.events();
    // Bypass asks, and its answer (stale at once) does not replace the fresh listing.
    let bypass = p.list_in(CacheMode::Bypass, 2).unwrap();
    p.reply(&bypass, tools_page(&["a", "b"], Some(0), None), 3);
    p.events();
    assert_eq!(p.list_in(CacheMode::Use, 4), Err(vec!["a".into()]));
    // Refresh asks, and its answer is what counts from then on: stale at once here.
    let refresh = p.list_in(CacheMode::Refresh, 5).unwrap();
    p.reply(&refresh, tools_page(&["a", "b"], Some(0), None), 6);
    p.events();
    assert!(p.list_in(CacheMode::Use, 6).is_ok(), "ttlMs 0: asked again");
}

#[test]
fn a_cursor_the_server_no_longer_takes_drops_the_pages_and_starts_over_once() {
    let mut p = Peer::ready_modern(true);
    let op = p.session.list_tools(p.at(0)).unwrap();
    let (first, _) = p.sent();
    p.reply(&first, tools_page(&["old"], Some(60_000), Some("c1")), 1);
    let (second, _) = p.sent();
    assert_eq!(second["params"]["cursor"], "c1");
    p.reply_error(&second, -32602, json!({}), 2);
    // From the first page again, without a cursor; the dropped page is not in the result.
    let (again, _) = p.sent();
    assert_eq!(again["method"], "tools/list");
    assert!(again["params"].get("cursor").is_none(), "{again}");
    p.reply(&again, tools_page(&["new"], Some(60_000), Some("c2")), 3);
    let (next, _) = p.sent();
    // A second refusal in the same walk ends it.
    p.reply_error(&next, -32602, json!({}), 4);
    p.nothing_sent();
    let failed = p.events().into_iter().find_map(|e| match e {
        Event::ToolsListed { op: o, result } if o == op => Some(result),
        _ => None,
    });
    assert!(
        matches!(failed, Some(Err(RequestError::Server { .. }))),
        "{failed:?}"
    );
    assert!(p.session.cache().snapshot().get("old").is_none());
}

// ---- SEP-2549: the response cache ----

use toolwire_types::methods::method::{ListPrompts, ListResources, ReadResource};

fn read_params(uri: &str, extra: Value) -> toolwire_types::ReadResourceParams {
    let mut params = json!({"uri": uri});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    serde_json::from_value(params).unwrap()
}

fn list_params(cursor: Option<&str>) -> toolwire_types::ListParams {
    serde_json::from_value(json!({ "cursor": cursor })).unwrap()
}

impl Peer {
    /// Issues a cached request; `Ok(request)` if it was sent, `Err(result)` if it was
    /// answered at once.
    fn cached<M>(&mut self, params: M::Params, mode: CacheMode, ms: u64) -> Result<Value, String>
    where
        M: toolwire_types::RequestMethod,
        M::Params: toolwire_types::HasMeta,
    {
        let op = self
            .session
            .request_cached::<M>(params, mode, self.at(ms))
            .unwrap();
        if let Some(t) = self.session.poll_transmit() {
            return Ok(serde_json::from_slice(&t.body).unwrap());
        }
        Err(self
            .completed(op)
            .expect("answered at once")
            .expect("a kept answer"))
    }
}

const READ: &str = "file:///a";

impl Peer {
    /// A cached `resources/read` of [`READ`] in `mode` at `ms` (see [`Peer::cached`]).
    fn read(&mut self, mode: CacheMode, ms: u64) -> Result<Value, String> {
        self.cached::<ReadResource>(read_params(READ, json!({})), mode, ms)
    }

    /// `notifications/resources/updated` for [`READ`] at `ms`.
    fn read_updated(&mut self, ms: u64) {
        let update = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": READ}});
        self.session
            .handle_inbound(update.to_string().as_bytes(), self.at(ms));
    }
}

/// A `resources/read` result for [`READ`] with `ttl` as its `ttlMs`.
fn read_result(text: &str, ttl: Value) -> Value {
    json!({"contents": [{"uri": READ, "text": text}], "ttlMs": ttl, "cacheScope": "private"})
}

#[test]
fn a_fresh_read_is_served_without_a_round_trip_until_an_update_evicts_it() {
    let mut p = Peer::ready_modern(true);
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 0)
        .unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    // `_meta` is not part of the key.
    let traced = read_params(READ, json!({"_meta": {"traceparent": "00-1-2-01"}}));
    let kept = p
        .cached::<ReadResource>(traced, CacheMode::Use, 2)
        .unwrap_err();
    assert!(kept.contains("\"one\""), "{kept}");
    // Fresh until received + ttlMs, not at it.
    assert!(p.read(CacheMode::Use, 60_001).is_ok());
    let again = p.read(CacheMode::Use, 60_002);
    p.reply(&again.unwrap(), read_result("two", json!(60_000)), 60_003);
    p.events();
    p.read_updated(60_004);
    p.events();
    assert!(
        p.read(CacheMode::Use, 60_005).is_ok(),
        "evicted by the update although fresh"
    );
}

#[test]
fn a_kept_answer_says_how_much_of_its_freshness_is_left() {
    let mut p = Peer::ready_modern(true);
    let sent = p.read(CacheMode::Use, 0).unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1_000);
    p.events();
    // Received at 1 s with 60 s to live: at 21 s, 40 s are left.
    let kept = p.read(CacheMode::Use, 21_000).unwrap_err();
    let kept: Value = serde_json::from_str(&kept).unwrap();
    assert_eq!(kept["ttlMs"], 40_000, "{kept}");
    assert_eq!(kept["contents"][0]["text"], "one");
    assert_eq!(kept["cacheScope"], "private");
}

#[test]
fn an_absent_zero_or_negative_ttl_keeps_nothing() {
    for ttl in [Value::Null, json!(0), json!(-1)] {
        let mut p = Peer::ready_modern(true);
        let sent = p.read(CacheMode::Use, 0);
        p.reply(&sent.unwrap(), read_result("one", ttl.clone()), 1);
        p.events();
        assert!(p.read(CacheMode::Use, 1).is_ok(), "{ttl}: asked again");
    }
}

#[test]
fn each_page_is_kept_on_its_own_and_a_list_change_or_a_refused_cursor_drops_them_all() {
    let mut p = Peer::ready_modern(true);
    let page = |names: &[&str], next: Option<&str>| {
        json!({"prompts": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
            "nextCursor": next, "ttlMs": 60_000, "cacheScope": "public"})
    };
    let first = p
        .cached::<ListPrompts>(list_params(None), CacheMode::Use, 0)
        .unwrap();
    p.reply(&first, page(&["a"], Some("c")), 1);
    let second = p
        .cached::<ListPrompts>(list_params(Some("c")), CacheMode::Use, 2)
        .unwrap();
    assert_eq!(second["params"]["cursor"], "c");
    p.reply(&second, page(&["b"], None), 3);
    p.events();
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 4)
            .is_err()
    );
    assert!(
        p.cached::<ListPrompts>(list_params(Some("c")), CacheMode::Use, 4)
            .is_err()
    );
    let change = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    p.session
        .handle_inbound(change.to_string().as_bytes(), p.at(5));
    p.events();
    let first = p
        .cached::<ListPrompts>(list_params(None), CacheMode::Use, 6)
        .unwrap();
    p.reply(&first, page(&["a"], Some("c")), 7);
    let second = p
        .cached::<ListPrompts>(list_params(Some("c")), CacheMode::Use, 8)
        .unwrap();
    p.reply(&second, page(&["b"], None), 9);
    p.events();

    // resources/list: a cursor refused drops the first page too.
    let resources = |next: Option<&str>| json!({"resources": [], "nextCursor": next, "ttlMs": 60_000, "cacheScope": "private"});
    let first = p
        .cached::<ListResources>(list_params(None), CacheMode::Use, 10)
        .unwrap();
    p.reply(&first, resources(Some("r")), 11);
    let second = p
        .cached::<ListResources>(list_params(Some("r")), CacheMode::Use, 12)
        .unwrap();
    p.reply_error(&second, -32602, json!({}), 13);
    p.events();
    assert!(
        p.cached::<ListResources>(list_params(None), CacheMode::Use, 14)
            .is_ok()
    );
    // The prompts are kept: only that list went.
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 15)
            .is_err()
    );
}

#[test]
fn retries_input_required_answers_and_answers_asked_before_an_eviction_are_not_kept() {
    let mut p = Peer::ready_modern(true);
    // An MRTR retry: asked, never kept, never served.
    let retry = read_params(READ, json!({"requestState": "s", "inputResponses": {}}));
    let sent = p.cached::<ReadResource>(retry, CacheMode::Use, 0).unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    assert!(p.read(CacheMode::Use, 2).is_ok());
    // An input_required round with hints: not kept.
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Refresh, 3)
        .unwrap();
    p.reply(
        &sent,
        json!({"resultType": "input_required", "inputRequests": {}, "ttlMs": 60_000}),
        4,
    );
    p.events();
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 5)
        .unwrap();
    // The update arrives while the read is in flight: its answer is from before it.
    p.read_updated(6);
    p.reply(&sent, read_result("old", json!(60_000)), 7);
    p.events();
    assert!(p.read(CacheMode::Use, 8).is_ok());
}

#[test]
fn refresh_keeps_bypass_does_not_and_a_cache_turned_off_keeps_nothing() {
    let mut p = Peer::ready_modern(true);
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 0)
        .unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Bypass, 2)
        .unwrap();
    p.reply(&sent, read_result("bypassed", json!(60_000)), 3);
    p.events();
    let kept = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 4)
        .unwrap_err();
    assert!(kept.contains("\"one\""), "bypass left it alone: {kept}");
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Refresh, 5)
        .unwrap();
    p.reply(&sent, read_result("refreshed", json!(60_000)), 6);
    p.events();
    let kept = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 7)
        .unwrap_err();
    assert!(kept.contains("\"refreshed\""), "{kept}");

    let mut p = Peer::ready_modern_with(config().with_response_cache(false), true);
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 0)
        .unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    assert!(p.read(CacheMode::Use, 2).is_ok());
}

#[test]
fn directory_reads_are_refused_in_either_era_unless_the_skills_extension_declares_them() {
    let params = || -> toolwire_types::ReadDirectoryParams {
        serde_json::from_value(json!({"uri": "skill://x"})).unwrap()
    };
    for (declared, allowed) in [
        (json!({}), false),
        (json!({"io.modelcontextprotocol/skills": {}}), false),
        (
            json!({"io.modelcontextprotocol/skills": {"directoryRead": false}}),
            false,
        ),
        (
            json!({"io.modelcontextprotocol/skills": {"directoryRead": true}}),
            true,
        ),
    ] {
        let (mut p, _) =
            Peer::ready_modern_declaring(json!({"extensions": declared.clone()}), true);
        let asked = p
            .session
            .request::<toolwire_types::methods::method::ReadDirectory>(params(), p.at(2));
        match asked {
            Ok(_) => {
                assert!(allowed, "{declared}");
                let (sent, _) = p.sent();
                assert_eq!(sent["method"], "resources/directory/read");
            }
            Err(e) => {
                assert!(!allowed, "{declared}: {e}");
                assert!(matches!(
                    e,
                    RequestError::NotAdvertised(Capability::SkillsDirectoryRead)
                ));
                p.nothing_sent();
            }
        }
    }
}

impl Peer {
    /// The transport gives up on `request` at `ms` (no HTTP status).
    fn undelivered(&mut self, request: &Value, ms: u64) {
        self.session.handle_undelivered(
            RequestFailure {
                id: request_id(request),
                status: None,
                body: Default::default(),
                cause: Arc::new(std::io::Error::other("connection reset")),
                session_gone: false,
            },
            self.at(ms),
        );
    }
}

#[test]
fn a_stale_answer_stands_in_for_a_failed_refetch_only_when_asked_to() {
    for serve_stale in [false, true] {
        let config = config().with_serve_stale_on_error(serve_stale);
        let mut p = Peer::ready_modern_with(config, true);
        let sent = p.read(CacheMode::Use, 0).unwrap();
        p.reply(&sent, read_result("kept", json!(1_000)), 1);
        let list = p.list_in(CacheMode::Use, 2).unwrap();
        p.reply(&list, tools_page(&["a"], Some(1_000), None), 3);
        p.events();
        // Both stale now; asking again fails at the transport.
        let again = p.read(CacheMode::Use, 5_000).unwrap();
        p.undelivered(&again, 5_001);
        let events = p.events();
        let served = events.iter().any(
            |e| matches!(e, Event::Completed { result: Ok(raw), .. } if raw.get().contains("kept")),
        );
        assert_eq!(served, serve_stale, "{events:?}");
        let walk = p.list_in(CacheMode::Use, 5_002).unwrap();
        p.undelivered(&walk, 5_003);
        let listed = p.events().into_iter().find_map(|e| match e {
            Event::ToolsListed { result, .. } => Some(result.is_ok()),
            _ => None,
        });
        assert_eq!(listed, Some(serve_stale));
        // A server's own answer, an error included, always counts; and Refresh never serves
        // stale.
        let again = p.read(CacheMode::Use, 5_004).unwrap();
        p.reply_error(&again, -32603, json!({}), 5_005);
        let refresh = p.read(CacheMode::Refresh, 5_006).unwrap();
        p.undelivered(&refresh, 5_007);
        let errors = p
            .events()
            .into_iter()
            .filter(|e| matches!(e, Event::Completed { result: Err(_), .. }))
            .count();
        assert_eq!(errors, 2, "serve_stale {serve_stale}");
    }
}

// ---- SEP-2549: cacheScope and the authorization context ----

#[test]
fn a_new_identity_drops_private_and_unmarked_answers_and_keeps_public_ones() {
    let mut p = Peer::ready_modern(true);
    let private = p.read(CacheMode::Use, 0).unwrap();
    p.reply(&private, read_result("mine", json!(60_000)), 1);
    let public = || read_params("file:///public", json!({}));
    let sent = p
        .cached::<ReadResource>(public(), CacheMode::Use, 2)
        .unwrap();
    p.reply(
        &sent,
        json!({"contents": [{"uri": "file:///public", "text": "everyone's"}],
            "ttlMs": 60_000, "cacheScope": "public"}),
        3,
    );
    let unmarked = p
        .cached::<ListPrompts>(list_params(None), CacheMode::Use, 4)
        .unwrap();
    p.reply(&unmarked, json!({"prompts": [], "ttlMs": 60_000}), 5);
    p.events();
    assert!(p.read(CacheMode::Use, 6).is_err(), "fresh");
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 6)
            .is_err(),
        "fresh"
    );

    p.session.authorization_changed();
    let kept = p
        .cached::<ReadResource>(public(), CacheMode::Use, 7)
        .unwrap_err();
    assert!(kept.contains("everyone's"), "{kept}");
    assert!(p.read(CacheMode::Use, 8).is_ok(), "private: asked again");
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 9)
            .is_ok(),
        "no scope is private: asked again"
    );
}

#[test]
fn an_answer_to_a_request_asked_under_the_identity_before_is_not_kept() {
    let mut p = Peer::ready_modern(true);
    let asked = p.read(CacheMode::Use, 0).unwrap();
    p.session.authorization_changed();
    p.reply(&asked, read_result("whose?", json!(60_000)), 1);
    p.events();
    assert!(p.read(CacheMode::Use, 2).is_ok(), "asked again");
}

#[test]
fn a_new_identity_makes_a_private_tool_listing_stale_and_leaves_a_public_one_fresh() {
    for (scope, asked_again) in [
        (Some("private"), true),
        (None, true),
        (Some("public"), false),
    ] {
        let mut p = Peer::ready_modern(true);
        let list = p.list_in(CacheMode::Use, 0).unwrap();
        let mut page = tools_page(&["a"], Some(60_000), None);
        match scope {
            Some(scope) => page["cacheScope"] = json!(scope),
            None => drop(page.as_object_mut().unwrap().remove("cacheScope")),
        }
        p.reply(&list, page, 1);
        p.events();
        assert!(p.list_in(CacheMode::Use, 2).is_err(), "{scope:?}: fresh");
        p.session.authorization_changed();
        assert_eq!(
            p.list_in(CacheMode::Use, 3).is_ok(),
            asked_again,
            "{scope:?}"
        );
        assert!(
            p.session.cache().snapshot().get("a").is_some(),
            "{scope:?}: the tools themselves stay"
        );
    }
}

#[test]
fn a_maximal_timeout_and_a_huge_ttl_saturate_instead_of_panicking() {
    let mut p = Peer::ready_modern(true);
    // A caller's Duration::MAX timeout: the call goes out and waits "for ever".
    p.session
        .call_tool(
            "x",
            None,
            CallOptions::default().with_timeout(Duration::MAX),
            p.at(2),
        )
        .unwrap();
    let (call, _) = p.sent();
    assert_eq!(call["method"], "tools/call");
    assert!(p.session.poll_timeout().is_some_and(|t| t > p.at(2)));
    p.session.handle_timeout(p.at(10_000_000));
    p.reply(&call, json!({"content": []}), 10_000_001);
    assert!(
        p.events()
            .iter()
            .any(|e| matches!(e, Event::Completed { .. })),
        "the call was still waiting, and completes"
    );
    // A server's ttlMs of i64::MAX: kept "for ever", no panic.
    let first = p
        .list_in(CacheMode::Use, 10_000_002)
        .expect("nothing kept yet");
    p.reply(&first, tools_page(&["a"], Some(i64::MAX), None), 10_000_003);
    p.events();
    assert_eq!(
        p.list_in(CacheMode::Use, 10_000_004),
        Err(vec!["a".to_owned()]),
        "fresh"
    );
}

#[test]
fn an_answer_with_invalid_utf8_fails_its_call_at_once_with_the_decode_error() {
    let mut p = Peer::ready_modern(true);
    let op = p
        .session
        .call_tool("x", None, CallOptions::default(), p.at(2))
        .unwrap();
    let (call, _) = p.sent();
    let mut answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":""#,
        call["id"]
    )
    .into_bytes();
    answer.extend_from_slice(&[0xff, 0xfe]);
    answer.extend_from_slice(br#""}]}}"#);
    p.session.handle_inbound(&answer, p.at(3));
    let failed = p.events().into_iter().find_map(|e| match e {
        Event::Completed { op: o, result } if o == op => Some(result),
        _ => None,
    });
    match failed {
        Some(Err(RequestError::Undelivered(failure))) => {
            assert!(
                failure
                    .cause
                    .downcast_ref::<toolwire_types::DecodeError>()
                    .is_some(),
                "{}",
                failure.cause
            );
        }
        other => panic!("expected the call to fail now, got {other:?}"),
    }
}

#[test]
fn paused_deadlines_are_never_due_and_move_by_the_pause_and_no_more() {
    let mut p = Peer::ready_modern(true);
    let op = p
        .session
        .call_tool(
            "x",
            None,
            CallOptions::default().with_timeout(Duration::from_secs(1)),
            p.at(0),
        )
        .unwrap();
    let _ = p.sent();
    // A login took five seconds: nothing is due meanwhile, and the call's second starts
    // after it.
    p.session.pause(true, p.at(0));
    assert_eq!(p.session.poll_timeout(), None);
    p.session.handle_timeout(p.at(2_000));
    assert!(p.events().is_empty());
    p.session.pause(false, p.at(5_000));
    assert_eq!(p.session.poll_timeout(), Some(p.at(6_000)));
    p.session.handle_timeout(p.at(5_999));
    assert!(
        !p.events()
            .iter()
            .any(|e| matches!(e, Event::Completed { op: o, .. } if *o == op))
    );
    p.session.handle_timeout(p.at(6_000));
    assert!(p.events().iter().any(|e| matches!(
        e,
        Event::Completed { op: o, result: Err(RequestError::Timeout(_)) } if *o == op
    )));
}
