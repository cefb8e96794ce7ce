//! The traffic controls together: which check refuses which call, and what each refusal says.

use super::*;

fn traffic(config: serde_json::Value) -> Traffic {
    Traffic::new(&serde_json::from_value(config).unwrap()).unwrap()
}

#[tokio::test]
async fn an_open_breaker_hides_its_tools_where_asked_and_says_so_when_they_leave_and_return() {
    let mut t = traffic(serde_json::json!({
        "files": {"breakerFailures": 1, "breakerOpenSecs": 0.3, "hideWhileOpen": true},
        "other": {"breakerFailures": 1, "breakerOpenSecs": 0.3}
    }));
    let (tx, mut heard) = broadcast::channel(8);
    t.tell_changes(tx);
    assert!(t.hides_any());
    let (files, other): (Arc<str>, Arc<str>) = ("files".into(), "other".into());
    assert!(!t.hidden("files"), "closed: listed");
    t.admit(&files, "t", "-").await.unwrap().ended(true);
    t.admit(&other, "t", "-").await.unwrap().ended(true);
    assert!(t.hidden("files"), "open: held out");
    assert!(!t.hidden("other"), "open, but not asked to hide: listed");
    assert_eq!(heard.try_recv().unwrap(), Change::Tools);
    assert!(
        heard.try_recv().is_err(),
        "the other's opening changes no listing"
    );
    // The delay ends: listed again (the next call is the trial), and said so.
    let back = tokio::time::timeout(std::time::Duration::from_secs(5), heard.recv()).await;
    assert_eq!(back.unwrap().unwrap(), Change::Tools);
    assert!(!t.hidden("files"));
}

#[tokio::test]
async fn an_entry_s_settings_replace_the_defaults_one_by_one_and_others_get_the_defaults() {
    let t = traffic(serde_json::json!({
        "*": {"maxConcurrent": 1, "queue": 0, "breakerFailures": 1},
        "files": {"maxConcurrent": 2}
    }));
    let (files, other): (Arc<str>, Arc<str>) = ("files".into(), "other".into());
    let _a = t.admit(&files, "t", "-").await.unwrap();
    let _b = t.admit(&files, "t", "-").await.unwrap();
    let third = t.admit(&files, "t", "-").await.unwrap_err();
    assert!(
        third.message.contains("2 calls in flight"),
        "{}",
        third.message
    );
    let _c = t.admit(&other, "t", "-").await.unwrap();
    let second = t.admit(&other, "t", "-").await.unwrap_err();
    assert!(
        second.message.contains("1 calls in flight"),
        "{}",
        second.message
    );
    assert_eq!(second.data.unwrap()["reason"], "queue_full");
}

#[tokio::test]
async fn failures_open_the_breaker_and_its_refusal_names_the_upstream_and_the_wait() {
    let t = traffic(serde_json::json!({"slow": {"breakerFailures": 2, "breakerOpenSecs": 60}}));
    let slow: Arc<str> = "slow".into();
    for _ in 0..2 {
        t.admit(&slow, "t", "-").await.unwrap().ended(true);
    }
    let refused = t.admit(&slow, "t", "-").await.unwrap_err();
    assert!(
        refused.message.contains("upstream `slow` is failing")
            && refused.message.contains("after 2 consecutive failures"),
        "{}",
        refused.message
    );
    assert_eq!(refused.data.as_ref().unwrap()["retryAfterSecs"], 60);
    assert_eq!(t.states(), vec![("slow".to_owned(), Some("open"), None)]);
    // Another upstream is not held back by this one's breaker.
    let fine: Arc<str> = "fine".into();
    assert!(t.admit(&fine, "t", "-").await.is_ok());
}

#[tokio::test]
async fn a_call_its_caller_abandoned_is_no_failure_and_frees_its_slot() {
    let t = traffic(serde_json::json!({"s": {
        "breakerFailures": 1, "maxConcurrent": 1, "queue": 0}}));
    let s: Arc<str> = "s".into();
    drop(t.admit(&s, "t", "-").await.unwrap());
    let next = t.admit(&s, "t", "-").await.unwrap();
    assert_eq!(
        t.states(),
        vec![("s".to_owned(), Some("closed"), Some((1, 0)))]
    );
    next.ended(false);
    assert_eq!(
        t.states(),
        vec![("s".to_owned(), Some("closed"), Some((0, 0)))]
    );
}

#[tokio::test]
async fn a_caller_past_its_own_rate_is_refused_with_a_retry_and_the_other_caller_is_not() {
    let t = traffic(serde_json::json!({"*": {"callerCallsPerSecond": 0.5, "callerBurst": 2}}));
    let up: Arc<str> = "up".into();
    for _ in 0..2 {
        t.admit(&up, "t", "alice").await.unwrap().ended(false);
    }
    let refused = t.admit(&up, "t", "alice").await.unwrap_err();
    assert!(
        refused.message.contains("your calls to it"),
        "{}",
        refused.message
    );
    assert_eq!(refused.data.as_ref().unwrap()["reason"], "rate_limited");
    assert_eq!(refused.data.as_ref().unwrap()["retryAfterSecs"], 2);
    let denial = refused.challenge.as_ref().unwrap();
    assert_eq!(denial.status, 429);
    // Bob's budget is his own.
    for _ in 0..2 {
        t.admit(&up, "t", "bob").await.unwrap().ended(false);
    }
    assert!(t.limits_rates());
}

#[tokio::test]
async fn the_upstreams_rate_counts_every_caller_together() {
    let t = traffic(serde_json::json!({"up": {"callsPerSecond": 1, "burst": 2}}));
    let up: Arc<str> = "up".into();
    t.admit(&up, "t", "alice").await.unwrap().ended(false);
    t.admit(&up, "t", "bob").await.unwrap().ended(false);
    let refused = t.admit(&up, "t", "carol").await.unwrap_err();
    assert!(
        refused.message.contains("calls to it are past"),
        "{}",
        refused.message
    );
}

#[test]
fn unusable_settings_are_refused_naming_the_entry_and_the_setting() {
    for (config, named) in [
        (
            serde_json::json!({"a": {"maxConcurrent": 0}}),
            "gateway.traffic.a.maxConcurrent",
        ),
        (
            serde_json::json!({"*": {"queueTimeoutSecs": -1.0}}),
            "gateway.traffic.*.queueTimeoutSecs",
        ),
        (
            serde_json::json!({"b": {"breakerFailures": 0}}),
            "gateway.traffic.b.breakerFailures",
        ),
    ] {
        let error = Traffic::new(&serde_json::from_value(config).unwrap()).unwrap_err();
        assert!(error.to_string().starts_with(named), "{error}");
    }
}

#[tokio::test]
async fn a_tools_own_rate_limits_that_tool_only_and_each_caller_on_its_own() {
    let t = traffic(serde_json::json!({
        "files": {"tools": {"write_file": {"callerCallsPerSecond": 0.001, "callerBurst": 1}}}
    }));
    let files: Arc<str> = "files".into();
    t.admit(&files, "write_file", "alice")
        .await
        .unwrap()
        .ended(false);
    let refused = t.admit(&files, "write_file", "alice").await.unwrap_err();
    assert!(
        refused
            .message
            .contains("your calls to its tool `write_file`"),
        "{}",
        refused.message
    );
    assert_eq!(refused.data.unwrap()["reason"], "rate_limited");
    // Another tool of the upstream, and another caller of the tool, are not limited by it.
    t.admit(&files, "read_file", "alice")
        .await
        .unwrap()
        .ended(false);
    t.admit(&files, "write_file", "bob")
        .await
        .unwrap()
        .ended(false);
    assert!(t.limits_rates(), "its refusals are 429s");
}

#[tokio::test]
async fn a_daily_quota_refuses_until_midnight_utc_naming_the_quota_used_up() {
    let t = traffic(serde_json::json!({
        "files": {"callerCallsPerDay": 3, "tools": {"write_file": {"callerCallsPerDay": 1}}}
    }));
    let files: Arc<str> = "files".into();
    t.admit(&files, "write_file", "alice")
        .await
        .unwrap()
        .ended(false);
    let tool_used = t.admit(&files, "write_file", "alice").await.unwrap_err();
    assert!(
        tool_used
            .message
            .contains("your 1 calls a day to its tool `write_file` are used up"),
        "{}",
        tool_used.message
    );
    let data = tool_used.data.unwrap();
    assert_eq!(data["reason"], "quota_used");
    let retry = data["retryAfterSecs"].as_u64().unwrap();
    let midnight = 86_400 - quota::unix_now() % 86_400;
    assert!(
        retry.abs_diff(midnight) <= 2,
        "{retry} s, midnight in {midnight} s"
    );
    // The refused call took nothing from the upstream's quota: two more calls fit in it.
    t.admit(&files, "read_file", "alice")
        .await
        .unwrap()
        .ended(false);
    t.admit(&files, "read_file", "alice")
        .await
        .unwrap()
        .ended(false);
    let used = t.admit(&files, "read_file", "alice").await.unwrap_err();
    assert!(
        used.message
            .contains("your 3 calls a day to it are used up"),
        "{}",
        used.message
    );
    // Bob's quota is his own.
    t.admit(&files, "write_file", "bob")
        .await
        .unwrap()
        .ended(false);
}

#[tokio::test]
async fn a_call_the_breaker_refuses_counts_for_no_quota() {
    let t = traffic(serde_json::json!({
        "up": {"callerCallsPerDay": 2, "breakerFailures": 1, "breakerOpenSecs": 60}
    }));
    let up: Arc<str> = "up".into();
    t.admit(&up, "t", "alice").await.unwrap().ended(true);
    for _ in 0..3 {
        let refused = t.admit(&up, "t", "alice").await.unwrap_err();
        assert_eq!(refused.data.unwrap()["reason"], "circuit_open");
    }
    let lane = t.lane(&up).unwrap();
    let counted = lane.per_day.as_ref().unwrap().used("alice");
    assert_eq!(counted, Some(1), "only the call let through is counted");
}

#[test]
fn a_quota_of_no_calls_is_refused_naming_the_tool_it_is_set_for() {
    let refused = Traffic::new(
        &serde_json::from_value(serde_json::json!({
            "files": {"tools": {"write_file": {"callerCallsPerDay": 0}}}
        }))
        .unwrap(),
    )
    .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "gateway.traffic.files.tools.write_file.callerCallsPerDay: at least 1 call a day"
    );
}
