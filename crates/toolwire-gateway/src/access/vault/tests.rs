//! The vault: sealing, files, Redis shared by replicas.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use super::*;

fn config(dir: &Path) -> VaultConfig {
    VaultConfig {
        dir: Some(dir.to_owned()),
        key: Some(Secret::new(STANDARD.encode([7u8; 32]))),
        ..VaultConfig::default()
    }
}

fn entry(token: &str) -> StoredAuth {
    serde_json::from_value(serde_json::json!({
        "server": "https://up.example/mcp", "issuer": "https://as.example",
        "resource": "https://up.example/mcp", "token_endpoint": "https://as.example/token",
        "tokens": {"access_token": token, "token_type": "Bearer"},
    }))
    .unwrap()
}

#[tokio::test]
async fn a_record_is_kept_sealed_in_a_private_file_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Arc::new(Vault::new(&config(dir.path())).unwrap());
    let alice = vault.store("alice");
    alice.save(&entry("alice-secret-token")).await.unwrap();
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
    let path = files[0].as_ref().unwrap().path();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(SEALED));
    assert!(
        !text.contains("alice-secret-token"),
        "the token is in the clear"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let listed = alice.list().await.unwrap();
    assert_eq!(listed, vec![entry("alice-secret-token")]);
    // Another caller has nothing.
    assert!(vault.store("bob").list().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_record_does_not_open_with_another_key_under_another_name_or_changed() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Arc::new(Vault::new(&config(dir.path())).unwrap());
    vault.store("alice").save(&entry("t")).await.unwrap();
    let name = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let sealed = std::fs::read_to_string(&name).unwrap();
    let alices = name.file_stem().unwrap().to_str().unwrap().to_owned();

    let mut other = config(dir.path());
    other.key = Some(Secret::new(STANDARD.encode([8u8; 32])));
    let other = Vault::new(&other).unwrap();
    assert!(
        other.read(&alices).await.is_err(),
        "opened with another key"
    );

    // Copied under bob's name: it does not open as his.
    let bobs_name = hashed("bob");
    std::fs::write(record_path(dir.path(), &bobs_name), &sealed).unwrap();
    assert!(
        vault.read(&bobs_name).await.is_err(),
        "opened under another name"
    );

    // One character changed.
    let mut changed = sealed.into_bytes();
    let last = changed.len() - 3;
    changed[last] = if changed[last] == b'A' { b'B' } else { b'A' };
    std::fs::write(&name, changed).unwrap();
    assert!(
        vault.read(&alices).await.is_err(),
        "a changed record opened"
    );
}

/// A replica's vault in `redis`, with the key every replica shares.
fn replica(redis: &toolwire_test_support::redis::RedisServer) -> Arc<Vault> {
    let config = VaultConfig {
        redis: Some(redis.url()),
        key: Some(Secret::new(STANDARD.encode([7u8; 32]))),
        ..VaultConfig::default()
    };
    Arc::new(Vault::new(&config).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_lock_in_redis_keeps_a_second_replica_waiting_until_the_first_lets_go() {
    let Some(redis) = toolwire_test_support::redis::RedisServer::start().await else {
        return;
    };
    let (a, b) = (replica(&redis), replica(&redis));
    let held = a.store("alice").lock().await.unwrap();
    let alice_b = b.store("alice");
    let waiting = tokio::spawn(async move { alice_b.lock().await.map(drop) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "both replicas held the lock");
    // Another caller's record is not locked.
    drop(b.store("bob").lock().await.unwrap());
    drop(held);
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the lock was never let go")
        .unwrap()
        .unwrap();
    // And what one replica saves, the other reads.
    a.store("alice").save(&entry("shared")).await.unwrap();
    assert_eq!(
        b.store("alice").list().await.unwrap(),
        vec![entry("shared")]
    );
}

fn entry_for(server: &str) -> StoredAuth {
    let mut entry = entry(server);
    entry.server = server.to_owned();
    entry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_callers_logins_saved_at_once_by_two_replicas_are_all_kept() {
    let Some(redis) = toolwire_test_support::redis::RedisServer::start().await else {
        return;
    };
    let (a, b) = (replica(&redis), replica(&redis));
    let saving = |vault: Arc<Vault>, side: &'static str| {
        tokio::spawn(async move {
            let store = vault.store("alice");
            for i in 0..10 {
                store
                    .save(&entry_for(&format!("https://{side}{i}.example/mcp")))
                    .await
                    .unwrap();
            }
        })
    };
    let (one, two) = (saving(a.clone(), "a"), saving(b, "b"));
    one.await.unwrap();
    two.await.unwrap();
    let kept = a.store("alice").list().await.unwrap();
    assert_eq!(kept.len(), 20, "a save was lost: {} kept", kept.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saves_in_one_process_at_once_are_all_kept_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Arc::new(Vault::new(&config(dir.path())).unwrap());
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = vault.store("alice");
            tokio::spawn(async move {
                store
                    .save(&entry_for(&format!("https://s{i}.example/mcp")))
                    .await
                    .unwrap();
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(vault.store("alice").list().await.unwrap().len(), 20);
}

#[test]
fn a_vault_without_a_good_key_is_refused_naming_the_variable_not_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = config(dir.path());
    bad.key = Some(Secret::new("c2hvcnQ="));
    let e = Vault::new(&bad).unwrap_err().to_string();
    assert!(e.contains(VAULT_KEY_ENV) && !e.contains("c2hvcnQ"), "{e}");
    let mut unset = config(dir.path());
    unset.key = None;
    unset.key_env = Some("TOOLWIRE_TEST_VAULT_KEY_THAT_IS_NOT_SET".into());
    let e = Vault::new(&unset).unwrap_err().to_string();
    assert!(e.contains("TOOLWIRE_TEST_VAULT_KEY_THAT_IS_NOT_SET"), "{e}");
    let mut both = config(dir.path());
    both.redis = Some("redis://127.0.0.1:1/".into());
    assert!(Vault::new(&both).is_err());
}

#[tokio::test]
async fn a_key_file_opens_what_the_same_key_sealed_and_a_bad_one_is_named_not_shown() {
    let dir = tempfile::tempdir().unwrap();
    let sealed_by = Arc::new(Vault::new(&config(dir.path())).unwrap());
    sealed_by
        .store("alice")
        .save(&entry("alice-token"))
        .await
        .unwrap();

    let keys = tempfile::tempdir().unwrap();
    let file = keys.path().join("vault_key");
    std::fs::write(&file, format!("{}\n", STANDARD.encode([7u8; 32]))).unwrap();
    let from_file = VaultConfig {
        dir: Some(dir.path().to_owned()),
        key_file: Some(file.clone()),
        key_env: Some("TOOLWIRE_TEST_VAULT_KEY_THAT_IS_NOT_SET".into()),
        ..VaultConfig::default()
    };
    let opened = Arc::new(Vault::new(&from_file).unwrap());
    let listed = opened.store("alice").list().await.unwrap();
    assert_eq!(listed.len(), 1, "the record sealed with the same key opens");

    std::fs::write(&file, "bm90LWEta2V5").unwrap();
    let e = Vault::new(&from_file).unwrap_err().to_string();
    assert!(
        e.contains("vault_key") && !e.contains("bm90LWEta2V5"),
        "{e}"
    );
    let missing = VaultConfig {
        key_file: Some(keys.path().join("absent")),
        ..from_file
    };
    let e = Vault::new(&missing).unwrap_err().to_string();
    assert!(e.contains("absent"), "{e}");
}

#[test]
fn a_vault_setting_is_a_directory_or_an_object_and_never_shows_a_redis_password() {
    // tidy: not an MCP shape
    #[derive(Deserialize)]
    struct Holder {
        #[serde(deserialize_with = "deserialize")]
        vault: Option<VaultConfig>,
    }
    let dir: Holder = serde_json::from_str(r#"{"vault": "/var/lib/tw"}"#).unwrap();
    assert_eq!(dir.vault.unwrap().dir, Some(PathBuf::from("/var/lib/tw")));
    let redis: Holder = serde_json::from_str(
        r#"{"vault": {"redis": "redis://user:hunter2@cache:6379/0", "keyEnv": "K"}}"#,
    )
    .unwrap();
    let shown = format!("{:?}", redis.vault.unwrap());
    assert!(
        shown.contains("cache") && !shown.contains("hunter2"),
        "{shown}"
    );
}
